"""Configuration of a receive engine: addresses, associations, streams,
memory regions and posted buffers, as read from a JSON file.

This is what `rnic replay --config` reads and what the host driver writes
into the engine's tables. JSON integers may also be written as strings in
any base Python accepts ("0x5e6f7081"); MAC addresses as "02:00:00:00:00:02",
IPv4 addresses dotted. Every field is checked; a bad file raises
`ConfigError` naming the entry and the field. A file::

    {
      "local_mac": "02:00:00:00:00:02", "local_ip": "10.0.0.2", "udp_port": 9899,
      "associations": [{"index": 0, "local_port": 5002, "peer_port": 5001,
                        "peer_ip": "10.0.0.1", "tag": "0x5e6f7080", "ddp": true}],
      "streams": [{"association": 0, "stream_id": 0, "pd": 2, "first_ssn": 1}],
      "regions": [{"stag": "0x0142", "pd": 2, "base_to": "0x8000", "length": 8192,
                   "access": ["remote_read", "remote_write"], "host_address": "0x40000",
                   "stream": null}],
      "buffers": [{"association": 0, "stream_id": 0, "qn": 0,
                   "host_address": "0x60000", "length": 4096}]
    }

`tag` is the verification tag this end expects in inbound packets (its own
Initiate Tag, RFC 4960 8.5); its low ASSOCIATION_BITS bits must be the
entry's `index`, the row the engine reads for a packet with that tag
(`abi.rx.association_row`). A region's `stream` is null for a region
usable by every stream of its protection domain, or {"association",
"stream_id"} to bind it to one DDP stream (RFC 5041 8.2). Buffers are
posted in file order per (stream, QN) and take MSNs from 1 (RFC 5041 4.3);
QN 0 takes Sends, 1 RDMA Read Requests, 2 Terminates (RFC 5040 4.2).
A stream's `first_ssn` (default 1) is the DDP-SSN its first DDP segment
carries: a session's DDP-SSNs start at 0 with the Initiate or Accept, which
the host handles (RFC 5043 6.1).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from typing import Any

from abi.rx import ASSOCIATION_BITS, STAG_KEY_BITS, association_row, check_key_bits
from model.errors import RnicError
from model.ddp.memory import Access

ACCESS_NAMES = {
    "local_read": Access.LOCAL_READ,
    "local_write": Access.LOCAL_WRITE,
    "remote_read": Access.REMOTE_READ,
    "remote_write": Access.REMOTE_WRITE,
}


class ConfigError(RnicError, ValueError):
    """A receive-engine configuration that cannot be used."""


@dataclass(frozen=True)
class AssociationEntry:
    index: int
    local_port: int
    peer_port: int
    peer_ip: str
    tag: int
    ddp: bool = True


@dataclass(frozen=True)
class StreamEntry:
    association: int
    stream_id: int
    pd: int
    first_ssn: int = 1  # DDP-SSN of the session's first DDP segment (RFC 5043 6.1: 0 is its Initiate/Accept)


@dataclass(frozen=True)
class RegionEntry:
    stag: int
    pd: int
    base_to: int
    length: int
    access: Access
    host_address: int
    stream: tuple[int, int] | None = None  # (association, stream_id)


@dataclass(frozen=True)
class BufferEntry:
    association: int
    stream_id: int
    qn: int
    host_address: int
    length: int


@dataclass(frozen=True)
class ReceiveConfig:
    local_mac: bytes
    local_ip: str
    udp_port: int = 9899
    associations: tuple[AssociationEntry, ...] = ()
    streams: tuple[StreamEntry, ...] = ()
    regions: tuple[RegionEntry, ...] = ()
    buffers: tuple[BufferEntry, ...] = field(default=())
    key_bits: int = STAG_KEY_BITS
    """The STag's low bits that hold the key, the rest the region row (the engine's build parameter)."""
    segment_reports: bool = False
    """The configuration bit: a report record for every segment; False (its reset value): per message
    (`abi.rx.report_withheld`)."""

    def __post_init__(self) -> None:
        check_key_bits(self.key_bits, 1)

    @classmethod
    def from_json(cls, text: str) -> ReceiveConfig:
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"not JSON: {error}") from None
        return cls.from_dict(document)

    @classmethod
    def from_dict(cls, document: Any) -> ReceiveConfig:
        top = _Reader(document, "config")
        associations = tuple(_association(entry) for entry in top.entries("associations"))
        indices = [a.index for a in associations]
        if len(set(indices)) != len(indices):
            raise ConfigError("associations: an index is used twice")
        _refuse_shared_endpoints(associations)
        streams = tuple(_stream(entry) for entry in top.entries("streams"))
        keys = [(s.association, s.stream_id) for s in streams]
        if len(set(keys)) != len(keys):
            raise ConfigError("streams: a (association, stream_id) pair is listed twice")
        regions = tuple(_region(entry) for entry in top.entries("regions"))
        stags = [r.stag for r in regions]
        if len(set(stags)) != len(stags):
            raise ConfigError("regions: an STag is registered twice")
        config = cls(
            local_mac=top.mac("local_mac"),
            local_ip=top.ipv4("local_ip"),
            udp_port=top.integer("udp_port", 16, default=9899),
            associations=associations,
            streams=streams,
            regions=regions,
            buffers=tuple(_buffer(entry) for entry in top.entries("buffers")),
            segment_reports=top.boolean("segment_reports", default=False),
        )
        top.done()
        for stream in config.streams:
            if stream.association not in indices:
                raise ConfigError(f"stream {stream.stream_id}: association {stream.association} is not configured")
        for buffer in config.buffers:
            if (buffer.association, buffer.stream_id) not in keys:
                raise ConfigError(
                    f"buffer at 0x{buffer.host_address:x}: stream {buffer.association}/{buffer.stream_id} "
                    "is not configured"
                )
        return config

    def to_dict(self) -> dict:
        return {
            "local_mac": ":".join(f"{b:02x}" for b in self.local_mac),
            "local_ip": self.local_ip,
            "udp_port": self.udp_port,
            "associations": [vars(a) | {"tag": f"0x{a.tag:08x}"} for a in self.associations],
            "streams": [vars(s) for s in self.streams],
            "regions": [
                {
                    "stag": f"0x{r.stag:x}", "pd": r.pd, "base_to": f"0x{r.base_to:x}", "length": r.length,
                    "access": [name for name, flag in ACCESS_NAMES.items() if flag in r.access],
                    "host_address": f"0x{r.host_address:x}",
                    "stream": None if r.stream is None else {"association": r.stream[0], "stream_id": r.stream[1]},
                }
                for r in self.regions
            ],
            "buffers": [vars(b) | {"host_address": f"0x{b.host_address:x}"} for b in self.buffers],
            "segment_reports": self.segment_reports,
        }


class _Reader:
    """Typed access to one JSON object, with errors that name where they are."""

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected an object, got {type(value).__name__}")
        self.value, self.where, self.used = value, where, set()

    def _get(self, key: str, default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.value:
            if default is ...:
                raise ConfigError(f"{self.where}: missing '{key}'")
            return default
        return self.value[key]

    def done(self) -> None:
        unknown = set(self.value) - self.used
        if unknown:
            names = (name if name.isprintable() else repr(name) for name in sorted(unknown))
            raise ConfigError(f"{self.where}: unknown field(s) {', '.join(names)}")

    def integer(self, key: str, bits: int, default: Any = ...) -> int:
        raw = self._get(key, default)
        if isinstance(raw, str):
            try:
                raw = int(raw, 0)
            except ValueError:
                raise ConfigError(f"{self.where}.{key}: {raw!r} is not an integer") from None
        if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw < 1 << bits:
            raise ConfigError(f"{self.where}.{key}: {raw!r} is not an integer of {bits} bits")
        return raw

    def boolean(self, key: str, default: Any = ...) -> bool:
        raw = self._get(key, default)
        if not isinstance(raw, bool):
            raise ConfigError(f"{self.where}.{key}: {raw!r} is not true or false")
        return raw

    def ipv4(self, key: str) -> str:
        raw = self._get(key)
        try:
            return str(ipaddress.IPv4Address(raw))
        except (ValueError, ipaddress.AddressValueError):
            raise ConfigError(f"{self.where}.{key}: {raw!r} is not an IPv4 address") from None

    def mac(self, key: str) -> bytes:
        raw = self._get(key)
        parts = raw.split(":") if isinstance(raw, str) else []
        try:
            if len(parts) != 6:
                raise ValueError
            return bytes(int(part, 16) for part in parts)
        except ValueError:
            raise ConfigError(f"{self.where}.{key}: {raw!r} is not a MAC address like 02:00:00:00:00:01") from None

    def entries(self, key: str) -> list[_Reader]:
        raw = self._get(key, [])
        if not isinstance(raw, list):
            raise ConfigError(f"{self.where}.{key}: expected a list")
        return [_Reader(item, f"{key}[{i}]") for i, item in enumerate(raw)]


def _association(r: _Reader) -> AssociationEntry:
    entry = AssociationEntry(
        index=r.integer("index", 16), local_port=r.integer("local_port", 16),
        peer_port=r.integer("peer_port", 16), peer_ip=r.ipv4("peer_ip"),
        tag=r.integer("tag", 32), ddp=r.boolean("ddp", True),
    )
    r.done()
    return entry


def _stream(r: _Reader) -> StreamEntry:
    entry = StreamEntry(association=r.integer("association", 16), stream_id=r.integer("stream_id", 16),
                        pd=r.integer("pd", 16), first_ssn=r.integer("first_ssn", 16, 1))
    r.done()
    return entry


def _region(r: _Reader) -> RegionEntry:
    names = r._get("access")
    if not isinstance(names, list) or any(name not in ACCESS_NAMES for name in names):
        raise ConfigError(f"{r.where}.access: a list of {', '.join(ACCESS_NAMES)}")
    access = Access(0)
    for name in names:
        access |= ACCESS_NAMES[name]
    stream = r._get("stream", None)
    if stream is not None:
        bound = _Reader(stream, f"{r.where}.stream")
        stream = (bound.integer("association", 16), bound.integer("stream_id", 16))
        bound.done()
    entry = RegionEntry(
        stag=r.integer("stag", 32), pd=r.integer("pd", 16), base_to=r.integer("base_to", 64),
        length=r.integer("length", 64), access=access, host_address=r.integer("host_address", 64), stream=stream,
    )
    if entry.base_to + entry.length > 1 << 64:
        raise ConfigError(f"{r.where}: base_to + length passes 2**64")
    _refuse_host_wrap(r.where, entry.host_address, entry.length)
    r.done()
    return entry


def _buffer(r: _Reader) -> BufferEntry:
    entry = BufferEntry(
        association=r.integer("association", 16), stream_id=r.integer("stream_id", 16),
        qn=r.integer("qn", 32), host_address=r.integer("host_address", 64), length=r.integer("length", 32),
    )
    if entry.qn > 2:
        raise ConfigError(f"{r.where}.qn: RDMAP uses queues 0, 1 and 2 (RFC 5040 4.2), not {entry.qn}")
    _refuse_host_wrap(r.where, entry.host_address, entry.length)
    r.done()
    return entry


def _refuse_host_wrap(where: str, host_address: int, length: int) -> None:
    """Host memory has 64-bit addresses: a range running past 2**64 would wrap to address 0."""
    if host_address + length > 1 << 64:
        raise ConfigError(f"{where}: host_address + length passes 2**64")


def _refuse_shared_endpoints(associations: tuple[AssociationEntry, ...]) -> None:
    """An inbound packet's verification tag names its association's row (`abi.rx.association_row`), whose
    (destination port, source port, source address), the transport addresses that identify an SCTP
    association (RFC 4960 1.4), must be the packet's: an entry whose tag names another row would never be
    found, and two entries with the same transport addresses are two associations between the same
    endpoints, which SCTP does not make (RFC 4960 5.2); such a file is refused."""
    seen: dict[tuple[int, int, str], int] = {}
    for position, entry in enumerate(associations):
        if association_row(entry.tag) != entry.index:
            raise ConfigError(
                f"associations[{position}]: tag {entry.tag:#x} names row {association_row(entry.tag)}, not its "
                f"index {entry.index}: the engine finds an association by its tag's low {ASSOCIATION_BITS} bits")
        endpoints = (entry.local_port, entry.peer_port, entry.peer_ip)
        if endpoints in seen:
            raise ConfigError(
                f"associations[{seen[endpoints]}] and associations[{position}] both have local port "
                f"{entry.local_port}, peer port {entry.peer_port} and peer {entry.peer_ip}: a packet "
                "cannot tell them apart")
        seen[endpoints] = position
