"""The gateware's ``amaranth.lib.data`` layouts, built from the ABI's plain records (:mod:`abi.layout`).

Every record the host and the gateware exchange is defined once, in :mod:`abi`;
:func:`struct_layout` turns it into the ``StructLayout`` a stream or a view
uses, field for field, so the gateware's bits are the host's. An enum field
(:func:`enum_shape`) reads back in simulation as the ABI's own enum member.
"""

import enum
from functools import cache

from amaranth.hdl import Const, Format, ShapeCastable, Signal, Value, unsigned
from amaranth.lib import data, wiring

from abi.layout import Array, Member, Struct, member_width

__all__ = ["struct_layout", "member_shape", "enum_shape", "EnumShape", "copy_fields", "as_layout", "connect_fields"]


class EnumShape(ShapeCastable):
    """An ABI enum (a plain :class:`enum.Enum`) as a field's shape: unsigned, as wide as the ABI says
    (:func:`abi.layout.member_width`); a constant of it reads back as the enum's member, and waveforms name
    its values."""

    def __init__(self, enum_class: type[enum.Enum]):
        self.enum_class = enum_class
        self.width = member_width(enum_class)

    def as_shape(self):
        return unsigned(self.width)

    def __call__(self, target):
        return target

    def const(self, init):
        if init is None:
            return Const(0, self.width)
        return Const(init.value if isinstance(init, enum.Enum) else init, self.width)

    def from_bits(self, raw: int):
        return self.enum_class(raw)

    def format(self, obj, spec: str):
        """The member's name in waveforms and prints, as Amaranth's own enums give it."""
        if spec != "":
            raise ValueError(f"format specifier {spec!r} is not supported for enums")
        return Format.Enum(obj, self.enum_class, name=self.enum_class.__qualname__)

    def __eq__(self, other):
        return isinstance(other, EnumShape) and other.enum_class is self.enum_class

    def __hash__(self):
        return hash(self.enum_class)

    def __repr__(self):
        return f"EnumShape({self.enum_class.__name__})"


@cache
def enum_shape(enum_class: type[enum.Enum]) -> EnumShape:
    return EnumShape(enum_class)


def member_shape(member: Member):
    """The Amaranth shape of one field: ``unsigned(width)``, an enum as :func:`enum_shape`, a nested layout."""
    if isinstance(member, Struct):
        return struct_layout(member)
    if isinstance(member, Array):
        return data.ArrayLayout(member_shape(member.element), member.count)
    if isinstance(member, type) and issubclass(member, enum.Enum):
        return enum_shape(member)
    return unsigned(member)


@cache
def struct_layout(struct: Struct) -> data.StructLayout:
    """The ``StructLayout`` of ``struct``: the same fields, in the same order, at the same offsets."""
    return data.StructLayout({name: member_shape(member) for name, member in struct})


def copy_fields(target: data.View, source: data.View) -> list:
    """Assignments copying ``source`` into ``target`` field by field, by name: the same record laid out
    with other widths (a host address kept in fewer bits inside the gateware than on the host's wire). A
    field narrower in ``target`` keeps its low bits, a wider one is zero-extended; fields of one only are
    left out. Records of one layout are copied whole."""
    if target.shape() == source.shape():
        return [target.eq(source)]
    statements = []
    for name, field in target.shape():
        if name not in source.shape().members:
            continue
        if isinstance(field.shape, data.StructLayout) and isinstance(source.shape().members[name], data.StructLayout):
            statements += copy_fields(target[name], source[name])
        else:
            statements.append(Value.cast(target[name]).eq(Value.cast(source[name])))
    return statements


def connect_fields(m, source, sink) -> None:
    """Connect stream ``source`` to stream ``sink`` whose payload is the same record at other widths
    (:func:`copy_fields`); streams of one payload are connected whole."""
    if source.payload.shape() == sink.payload.shape():
        wiring.connect(m, source, sink)
        return
    m.d.comb += copy_fields(sink.payload, source.payload) + [sink.valid.eq(source.valid),
                                                             source.ready.eq(sink.ready)]


def as_layout(m, record: data.View, layout: data.StructLayout) -> data.View:
    """``record`` as the same record laid out with ``layout``'s widths (:func:`copy_fields`); ``record``
    itself when it has that layout."""
    if record.shape() == layout:
        return record
    converted = Signal(layout)
    m.d.comb += copy_fields(converted, record)
    return converted
