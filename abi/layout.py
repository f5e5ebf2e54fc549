"""Records as plain data: named bit fields packed from bit 0 up.

A :class:`Struct` lists its fields in order; each is a width in bits (an
unsigned integer), an :class:`enum.Enum` class (unsigned, as wide as its
largest value), a nested :class:`Struct` or an :class:`Array` of them. The
packing is that of ``amaranth.lib.data.StructLayout``: the first field in the
lowest bits, no padding; the gateware builds its layouts from these
(:func:`hdl.layout.struct_layout`), so host and gateware agree bit for bit.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterator, Union

__all__ = ["Struct", "Array", "Member", "member_width", "record_size_bytes"]


@dataclass(frozen=True)
class Array:
    """``count`` elements of ``element``, element 0 in the lowest bits."""
    element: "Member"
    count: int


Member = Union[int, type, "Struct", Array]


def member_width(member: Member) -> int:
    """Bits of one field."""
    if isinstance(member, bool):
        raise TypeError("a field width is an int, not a bool")
    if isinstance(member, int):
        if member < 0:
            raise ValueError(f"negative field width {member}")
        return member
    if isinstance(member, Struct):
        return member.size
    if isinstance(member, Array):
        return member_width(member.element) * member.count
    if isinstance(member, type) and issubclass(member, enum.Enum):
        return max(int(item.value) for item in member).bit_length()
    raise TypeError(f"not a field: {member!r}")


class Struct:
    """An ordered record of named fields (see the module docstring)."""

    def __init__(self, members: dict[str, Member]):
        self._members = tuple(members.items())
        self._offsets = {}
        offset = 0
        for name, member in self._members:
            self._offsets[name] = offset
            offset += member_width(member)
        self.size = offset

    def __iter__(self) -> Iterator[tuple[str, Member]]:
        return iter(self._members)

    def __getitem__(self, name: str) -> Member:
        return dict(self._members)[name]

    def __contains__(self, name: str) -> bool:
        return name in self._offsets

    def __eq__(self, other) -> bool:
        return isinstance(other, Struct) and self._members == other._members

    def __hash__(self) -> int:
        return hash(self._members)

    def __repr__(self) -> str:
        return f"Struct({dict(self._members)!r})"

    @property
    def members(self) -> dict[str, Member]:
        return dict(self._members)

    def offset(self, name: str) -> int:
        """The lowest bit of field ``name``."""
        return self._offsets[name]

    def width(self, name: str) -> int:
        return member_width(self[name])

    def pack(self, fields: dict) -> int:
        """The record as an integer. Fields left out are 0; a value wider than its field is cut to it
        (two's complement for negative values), as ``StructLayout.const`` does."""
        unknown = set(fields) - set(self._offsets)
        if unknown:
            raise KeyError(f"not fields of the record: {sorted(unknown)}")
        value = 0
        for name, member in self._members:
            if name in fields:
                value |= _pack_member(member, fields[name]) << self._offsets[name]
        return value

    def unpack(self, value: int) -> dict:
        """The fields of a packed record: integers, nested records as dicts, arrays as lists."""
        return {name: _unpack_member(member, value >> self._offsets[name]) for name, member in self._members}

    @property
    def beat_bytes(self) -> int:
        """Bytes of one stream beat carrying the record (padded to whole bytes)."""
        return record_size_bytes(self)

    def to_bytes(self, fields: dict) -> bytes:
        """The record as the bytes of its AXI4-Stream beat (bit 0 in byte 0)."""
        return self.pack(fields).to_bytes(self.beat_bytes, "little")

    def from_bytes(self, data: bytes) -> dict:
        return self.unpack(int.from_bytes(data, "little"))


def record_size_bytes(struct: Struct) -> int:
    return (struct.size + 7) // 8


def _pack_member(member: Member, value) -> int:
    if isinstance(member, Struct):
        return member.pack(value) if isinstance(value, dict) else int(value) & ((1 << member.size) - 1)
    if isinstance(member, Array):
        if not isinstance(value, (list, tuple)):
            return int(value) & ((1 << member_width(member)) - 1)
        width = member_width(member.element)
        packed = 0
        for index, element in enumerate(value[:member.count]):
            packed |= _pack_member(member.element, element) << (index * width)
        return packed
    if isinstance(value, enum.Enum):
        value = value.value
    return int(value) & ((1 << member_width(member)) - 1)


def _unpack_member(member: Member, value: int):
    if isinstance(member, Struct):
        return member.unpack(value)
    if isinstance(member, Array):
        width = member_width(member.element)
        return [_unpack_member(member.element, value >> (index * width)) for index in range(member.count)]
    return value & ((1 << member_width(member)) - 1)
