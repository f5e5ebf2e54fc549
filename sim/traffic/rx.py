"""Traffic for the receive engine's differential tests, built from the golden model's codecs only.

* :func:`random_config`: a :class:`~model.engine.config.ReceiveConfig` that fits
  an engine of a given :class:`EngineShape`: every stream armed or not,
  regions at random host alignments and base TOs (some ending just below
  2**64), PD-wide and stream-bound (RFC 5041 8.2), posted buffers on QN 0-2
  (RFC 5040 4.2), all in disjoint host memory.
* :class:`ValidTraffic`: random valid RDMAP traffic for such a config: every
  opcode, tagged and untagged, multi-segment messages, zero-length segments,
  random destination alignment, bundled chunks (RFC 4960 6.10), SCTP over
  IPv4 and over UDP (RFC 6951), with a few control and session-control
  chunks and foreign frames for the host's exception path.
* :data:`MALFORMED`: the catalogue of malformed traffic, one function per
  error kind, and :func:`catalogue_parts`, which gives each kind that
  latches a DDP stream's error (RFC 5041 7.1) a stream of its own.

Every frame is an Ethernet II frame without FCS, as the engine's
``s_axis`` takes it.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from abi.rx import ASSOCIATION_BITS, SEQUENCE_WINDOW, STAG_KEY_BITS, check_key_bits
from model.net.checksum import sctp_checksum, sctp_checksum_to_bytes
from model.ddp.segment import TaggedHeader, UntaggedHeader
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.net.frames import build_frame
from model.ddp.memory import Access
from model.rdmap.messages import Opcode, ReadRequest, Terminate, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.engine.config import AssociationEntry, BufferEntry, ReceiveConfig, RegionEntry, StreamEntry

__all__ = [
    "EngineShape", "ConfigDoesNotFit", "check_config_fits", "LOCAL_MAC", "PEER_MAC", "LOCAL_IP", "random_config", "ValidTraffic", "Catalogue",
    "MalformedCase", "MALFORMED", "catalogue_config", "catalogue_parts", "case_frames", "sctp_packet",
    "data_chunk", "disorder",
]

LOCAL_MAC = bytes.fromhex("020000000002")
PEER_MAC = bytes.fromhex("020000000001")
LOCAL_IP = "10.0.0.2"
UDP_PORT = 9899                      # RFC 6951
PPID_DDP_SEGMENT, PPID_SESSION_CONTROL = 16, 17  # RFC 5043 5.2
FLAG_U, FLAG_B, FLAG_E = 0x04, 0x02, 0x01        # RFC 4960 3.3.1
TO_LIMIT = 1 << 64
HOST_BASE = 0x1_0000                 # host memory below this is never registered
#: Ethernet (14) + IPv4 (20) + UDP (8) around an SCTP packet, at most.
FRAME_OVERHEAD = 42


@dataclass(frozen=True)
class EngineShape:
    """The table sizes and STag key width an :class:`hdl.rx.engine.RxEngine` was built with."""

    associations: int = 2
    stream_ids: int = 4
    regions: int = 16
    buffers_per_queue: int = 8
    key_bits: int = STAG_KEY_BITS

    def __post_init__(self) -> None:
        check_key_bits(self.key_bits, self.regions)

    def stream_row(self, association: int, stream_id: int) -> int:
        return association * self.stream_ids + stream_id

    def stag(self, index: int, key: int) -> int:
        """The STag of region row ``index`` with ``key`` (RFC 5041 8.2 leaves its structure to us)."""
        return index << self.key_bits | key

    def stag_index(self, stag: int) -> int:
        return stag >> self.key_bits

    def stag_key(self, stag: int) -> int:
        return stag & ((1 << self.key_bits) - 1)

    def limits(self, memory_bytes: int) -> str:
        """What a configuration must keep within to fit this engine and a host memory of
        ``memory_bytes`` from address 0, as one line."""
        return (f"association indices below {self.associations}, stream ids below {self.stream_ids}, "
                f"{self.regions} regions (STag index = STag >> {self.key_bits} below {self.regions}, "
                f"one STag per index), {self.buffers_per_queue} buffers per stream and QN, host ranges within "
                f"{_byte_size(memory_bytes)} from address 0")


def _byte_size(count: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return f"{count >> shift} {unit}"
    return f"{count} bytes"


class ConfigDoesNotFit(ValueError):
    """A configuration the engine's tables (or the testbench's host memory) cannot hold."""


def check_config_fits(config: ReceiveConfig, shape: EngineShape, memory_bytes: int) -> None:
    """Raise :class:`ConfigDoesNotFit` for a config the engine's tables cannot hold as the model does.

    The model takes any number of entries; the engine has ``shape``'s tables, finds a region at
    index STag >> key_bits (the low ``shape.key_bits`` bits are its key), and the testbench's memory is ``memory_bytes``
    from address 0."""
    for a in config.associations:
        if a.index >= shape.associations:
            raise ConfigDoesNotFit(f"association index {a.index} >= the engine's {shape.associations}")
    for s in config.streams:
        if s.stream_id >= shape.stream_ids:
            raise ConfigDoesNotFit(f"stream id {s.stream_id} >= the engine's {shape.stream_ids} stream ids")
        if s.pd >> 16:
            raise ConfigDoesNotFit(f"stream {s.association}/{s.stream_id}: PD {s.pd} is wider than 16 bits")
    holders: dict[int, int] = {}
    for r in config.regions:
        index = shape.stag_index(r.stag)
        if index >= shape.regions:
            raise ConfigDoesNotFit(f"STag {r.stag:#x}: index {index} >= the engine's {shape.regions} regions "
                                   f"(STag = index << {shape.key_bits} | key)")
        if index in holders:
            raise ConfigDoesNotFit(f"STags {holders[index]:#x} and {r.stag:#x} share table index {index} "
                                   f"(STag = index << {shape.key_bits} | key): the engine holds one of them")
        holders[index] = r.stag
        if r.stream is not None and (r.stream[0] >= shape.associations or r.stream[1] >= shape.stream_ids):
            raise ConfigDoesNotFit(f"STag {r.stag:#x}: bound to stream {r.stream}, which the engine cannot name")
    queues: dict[tuple[int, int, int], int] = {}
    for b in config.buffers:
        key = (b.association, b.stream_id, b.qn)
        queues[key] = queues.get(key, 0) + 1
        if queues[key] > shape.buffers_per_queue:
            raise ConfigDoesNotFit(f"stream {b.association}/{b.stream_id} QN {b.qn}: more than "
                                   f"{shape.buffers_per_queue} buffers per queue")
        if b.length >> 32:
            raise ConfigDoesNotFit(f"buffer at {b.host_address:#x}: length {b.length} is wider than 32 bits")
    for address, length in [(r.host_address, r.length) for r in config.regions] + \
            [(b.host_address, b.length) for b in config.buffers]:
        if address + length > memory_bytes:
            raise ConfigDoesNotFit(f"host range {address:#x}+{length} is outside the {_byte_size(memory_bytes)} "
                                   "of host memory")


# -- wire helpers ----------------------------------------------------------


def _pad4(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


def data_chunk(tsn: int, stream_id: int, ppid: int, user_data: bytes, *, flags: int = FLAG_U | FLAG_B | FLAG_E,
               length: int | None = None) -> bytes:
    """A DATA chunk (RFC 4960 3.3.1), padded; ``length`` overrides the length field."""
    body = struct.pack("!IHHI", tsn, stream_id, 0, ppid) + user_data
    return _pad4(struct.pack("!BBH", 0, flags, 4 + len(body) if length is None else length) + body)


def segment_chunk(tsn: int, stream_id: int, ddp_ssn: int, segment: bytes, flags: int = FLAG_U | FLAG_B | FLAG_E) -> bytes:
    """A DDP Segment Chunk (RFC 5043 5.2.2): U=1, B=E=1, PPID 16."""
    return data_chunk(tsn, stream_id, PPID_DDP_SEGMENT, DdpSegmentChunkData(ddp_ssn, segment).encode(), flags=flags)


def control_chunk(chunk_type: int, value: bytes, flags: int = 0) -> bytes:
    return _pad4(struct.pack("!BBH", chunk_type, flags, 4 + len(value)) + value)


def sctp_packet(src_port: int, dst_port: int, tag: int, chunks: list[bytes], *, bad_crc: bool = False) -> bytes:
    """Common header + chunks with the CRC32c (RFC 4960 6.8); ``bad_crc`` flips one checksum bit."""
    body = struct.pack("!HHII", src_port, dst_port, tag, 0) + b"".join(chunks)
    crc = sctp_checksum(body) ^ (1 if bad_crc else 0)
    return body[:8] + sctp_checksum_to_bytes(crc) + body[12:]


# -- configuration ---------------------------------------------------------


class HostAllocator:
    """Disjoint host buffers at random alignments, with random gaps."""

    def __init__(self, rng: random.Random, limit: int, base: int = HOST_BASE) -> None:
        self.rng, self.next, self.limit = rng, base, limit

    def take(self, length: int) -> int:
        address = self.next + self.rng.randrange(0, 256)
        if address + length > self.limit:
            raise ValueError(f"host memory of {self.limit:#x} bytes is too small for this config")
        self.next = address + max(length, 1)
        return address


def _associations(rng: random.Random, shape: EngineShape) -> tuple[AssociationEntry, ...]:
    return tuple(
        AssociationEntry(index=i, local_port=5002 + 2 * i, peer_port=5001 + 2 * i, peer_ip=f"10.0.0.{1 + 2 * i}",
                         tag=rng.randrange(0 if i else 1, 1 << 32 - ASSOCIATION_BITS) << ASSOCIATION_BITS | i,
                         ddp=True)   # the tag names the row (abi.rx.association_row)
        for i in range(shape.associations))


def random_config(rng: random.Random, shape: EngineShape, memory_bytes: int, max_message: int) -> ReceiveConfig:
    """A random configuration the engine can hold; ``max_message`` bounds region and buffer sizes."""
    allocator = HostAllocator(rng, memory_bytes)
    pairs = [(a, s) for a in range(shape.associations) for s in range(shape.stream_ids)]
    armed = sorted(rng.sample(pairs, max(2, len(pairs) - 2)))
    streams = tuple(StreamEntry(a, s, pd=rng.choice((1, 2)), first_ssn=rng.randrange(1 << 16)) for a, s in armed)
    regions = []
    for index in rng.sample(range(1, shape.regions), min(shape.regions - 1, 10)):
        stream = rng.choice(streams)
        length = rng.randint(1, 2 * max_message)
        placement = rng.random()
        if placement < 0.25:
            base_to = TO_LIMIT - length - rng.randint(1, 4096)  # near the end of the TO space
        elif placement < 0.5:
            base_to = 0
        else:
            base_to = rng.randrange(0, TO_LIMIT - length)
        access = Access.REMOTE_READ | rng.choice((Access.REMOTE_WRITE, Access.LOCAL_WRITE,
                                                  Access.REMOTE_WRITE | Access.LOCAL_WRITE))
        regions.append(RegionEntry(
            stag=shape.stag(index, rng.randrange(1 << shape.key_bits)), pd=stream.pd, base_to=base_to, length=length,
            access=access,
            host_address=allocator.take(length),
            stream=(stream.association, stream.stream_id) if rng.random() < 0.3 else None))
    buffers = []
    for stream in streams:
        for qn, count, sizes in ((0, rng.randint(1, shape.buffers_per_queue), (1, max_message)),
                                 (1, rng.randint(0, 3), (28, 64)), (2, rng.randint(1, 2), (64, 128))):
            for _ in range(count):
                length = rng.randint(*sizes)
                buffers.append(BufferEntry(stream.association, stream.stream_id, qn, allocator.take(length),
                                           length))
    return ReceiveConfig(local_mac=LOCAL_MAC, local_ip=LOCAL_IP, udp_port=UDP_PORT,
                         associations=_associations(rng, shape), streams=streams, regions=tuple(regions),
                         buffers=tuple(buffers))


# -- valid traffic ---------------------------------------------------------


@dataclass
class _StreamState:
    entry: StreamEntry
    ddp_ssn: int
    buffers: dict[int, list[BufferEntry]] = field(default_factory=dict)  # unused posted buffers by QN
    msn: dict[int, int] = field(default_factory=lambda: {0: 1, 1: 1, 2: 1})


class Sender:
    """Per-association TSNs and per-stream DDP-SSNs; frames around SCTP packets."""

    def __init__(self, rng: random.Random, config: ReceiveConfig) -> None:
        self.rng, self.config = rng, config
        self.tsn = {a.index: rng.randrange(1 << 32) for a in config.associations}
        self.ddp_ssn: dict[tuple[int, int], int] = {}

    def association(self, index: int) -> AssociationEntry:
        return next(a for a in self.config.associations if a.index == index)

    def next_tsn(self, association: int) -> int:
        tsn = self.tsn[association]
        self.tsn[association] = (tsn + 1) & 0xFFFFFFFF
        return tsn

    def next_ddp_ssn(self, association: int, stream_id: int) -> int:
        """The stream's next DDP-SSN: from its configured `first_ssn` (RFC 5043 6.1), or from a random
        one for a stream the engine does not know."""
        key = (association, stream_id)
        if key not in self.ddp_ssn:
            self.restart(association, stream_id)
        ssn = self.ddp_ssn[key]
        self.ddp_ssn[key] = (ssn + 1) & 0xFFFF
        return ssn

    def restart(self, association: int, stream_id: int) -> None:
        """A new session on the stream: its DDP-SSNs start again at the configured `first_ssn`."""
        entry = next((s for s in self.config.streams if (s.association, s.stream_id) == (association, stream_id)),
                     None)
        self.ddp_ssn[(association, stream_id)] = entry.first_ssn if entry else self.rng.randrange(1 << 16)

    def segment(self, association: int, stream_id: int, segment: bytes, flags: int = FLAG_U | FLAG_B | FLAG_E,
                *, lost: bool = False) -> bytes:
        """A DDP Segment Chunk with the stream's next DDP-SSN. A `lost` one (it never reaches the stream:
        a bad CRC, a refused chunk) leaves that DDP-SSN to the next chunk, as the peer's retransmission
        of it would carry it."""
        ssn = self.next_ddp_ssn(association, stream_id)
        if lost:
            self.ddp_ssn[(association, stream_id)] = ssn
        return segment_chunk(self.next_tsn(association), stream_id, ssn, segment, flags)

    def packet(self, association: int, chunks: list[bytes], *, tag: int | None = None, bad_crc: bool = False,
               ports: tuple[int, int] | None = None) -> bytes:
        entry = self.association(association)
        src, dst = ports or (entry.peer_port, entry.local_port)
        return sctp_packet(src, dst, entry.tag if tag is None else tag, chunks, bad_crc=bad_crc)

    def frame(self, association: int, sctp: bytes, *, udp: bool = False) -> bytes:
        entry = self.association(association)
        return build_frame(sctp, PEER_MAC, LOCAL_MAC, entry.peer_ip, self.config.local_ip, udp=udp,
                           src_port=UDP_PORT, dst_port=self.config.udp_port)


class ValidTraffic:
    """Random valid RDMAP traffic for ``config``: placed, delivered, never an error.

    ``max_payload`` caps a message (and so a segment's payload); ``max_packet``
    caps an SCTP packet (chunks are bundled up to it).
    """

    def __init__(self, rng: random.Random, config: ReceiveConfig, *, max_payload: int, max_packet: int = 9000):
        self.rng, self.config = rng, config
        self.max_payload, self.max_packet = max_payload, max_packet
        self.sender = Sender(rng, config)
        self.streams = [_StreamState(s, 0) for s in config.streams]
        for state in self.streams:
            for qn in (0, 1, 2):
                state.buffers[qn] = [b for b in config.buffers if (b.association, b.stream_id, b.qn) ==
                                     (state.entry.association, state.entry.stream_id, qn)]

    def _regions(self, stream: StreamEntry, right: Access) -> list[RegionEntry]:
        return [r for r in self.config.regions
                if r.pd == stream.pd and right in r.access and r.stream in (None, (stream.association, stream.stream_id))]

    def _split(self, length: int) -> list[int]:
        """Segment payload sizes of a message (at least one segment, zero-length allowed)."""
        limit = self.max_packet - 12 - 16 - 2 - 18
        if self.rng.random() < 0.5:
            limit = self.rng.randint(1, min(limit, 1024))  # a small MULPDU: several segments
        sizes = []
        while True:
            size = min(length, limit)
            sizes.append(size)
            length -= size
            if length == 0:
                return sizes

    def _tagged(self, state: _StreamState, opcode: Opcode) -> list[bytes] | None:
        right = Access.LOCAL_WRITE if opcode is Opcode.RDMA_READ_RESPONSE else Access.REMOTE_WRITE
        regions = self._regions(state.entry, right)
        if not regions:
            return None
        region = self.rng.choice(regions)
        length = 0 if self.rng.random() < 0.05 else self.rng.randint(1, min(self.max_payload, region.length))
        to = region.base_to + self.rng.randint(0, region.length - length)
        if to + length >= TO_LIMIT:  # RFC 5041 7.1 tagged item 5: the model refuses TO + length = 2**64
            return None
        payload = self.rng.randbytes(length)
        segments, offset = [], 0
        sizes = self._split(length)
        for i, size in enumerate(sizes):
            header = TaggedHeader(last=i == len(sizes) - 1, rsvd_ulp=tagged_rsvd_ulp(opcode), stag=region.stag,
                                  to=to + offset)
            segments.append(header.encode() + payload[offset : offset + size])
            offset += size
        return segments

    def _untagged(self, state: _StreamState, opcode: Opcode) -> list[bytes] | None:
        qn = {Opcode.RDMA_READ_REQUEST: 1, Opcode.TERMINATE: 2}.get(opcode, 0)
        if not state.buffers[qn]:
            return None
        buffer = state.buffers[qn].pop(0)
        msn = state.msn[qn]
        state.msn[qn] += 1
        if opcode is Opcode.RDMA_READ_REQUEST:
            payload = ReadRequest(self.rng.randrange(1 << 32), self.rng.randrange(1 << 64), self.rng.randrange(1 << 32),
                                  self.rng.randrange(1 << 32), self.rng.randrange(1 << 64)).encode()
        elif opcode is Opcode.TERMINATE:
            payload = Terminate(layer=1, etype=1, code=0, segment_length=self.rng.randrange(1 << 16)).encode()
        else:
            length = 0 if self.rng.random() < 0.05 else self.rng.randint(1, min(self.max_payload, buffer.length))
            payload = self.rng.randbytes(length)
        invalidate = self.rng.randrange(1 << 32) if opcode in (Opcode.SEND_WITH_INVALIDATE,
                                                               Opcode.SEND_WITH_SE_AND_INVALIDATE) else 0
        segments, offset = [], 0
        sizes = self._split(len(payload))
        for i, size in enumerate(sizes):
            header = UntaggedHeader(last=i == len(sizes) - 1, rsvd_ulp=untagged_rsvd_ulp(opcode, invalidate), qn=qn,
                                    msn=msn, mo=offset)
            segments.append(header.encode() + payload[offset : offset + size])
            offset += size
        return segments

    def message(self) -> tuple[StreamEntry, list[bytes]]:
        """One message's DDP segments on a random armed stream."""
        while True:
            state = self.rng.choice(self.streams)
            opcode = self.rng.choices(list(Opcode), weights=(30, 5, 15, 10, 5, 5, 5, 5))[0]
            segments = self._tagged(state, opcode) if opcode.tagged else self._untagged(state, opcode)
            if segments is not None:
                return state.entry, segments

    def _extra_chunk(self, association: int) -> bytes:
        """A chunk the engine passes to the host: SACK (RFC 4960 3.3.4) or DDP session control (PPID 17)."""
        if self.rng.random() < 0.5:
            return control_chunk(3, struct.pack("!IIHH", self.rng.randrange(1 << 32), 65536, 0, 0))
        user = struct.pack("!HH", self.rng.randrange(1 << 16), 4)  # DDP-SSN, Terminate (RFC 5043 5.2.3)
        return data_chunk(self.sender.next_tsn(association), self.rng.randrange(4), PPID_SESSION_CONTROL, user)

    def frames(self, messages: int) -> list[bytes]:
        """About ``messages`` messages in frames, chunks of one association bundled, in stream order."""
        pending: dict[int, list[bytes]] = {}
        frames: list[bytes] = []

        def flush(association: int) -> None:
            chunks = pending.pop(association, [])
            if chunks:
                udp = self.rng.random() < 0.2
                frames.append(self.sender.frame(association, self.sender.packet(association, chunks), udp=udp))

        for _ in range(messages):
            stream, segments = self.message()
            association = stream.association
            for segment in segments:
                chunk = self.sender.segment(association, stream.stream_id, segment)
                queued = pending.setdefault(association, [])
                if 12 + sum(map(len, queued)) + len(chunk) > self.max_packet or self.rng.random() < 0.5:
                    flush(association)
                    queued = pending.setdefault(association, [])
                queued.append(chunk)
                if self.rng.random() < 0.05:
                    queued.append(self._extra_chunk(association))
            if self.rng.random() < 0.03:
                frames.append(build_frame(b"\0" * 16, PEER_MAC, bytes.fromhex("ffffffffffff"), "10.0.0.1",
                                          "10.0.0.255"))
        for association in list(pending):
            flush(association)
        return frames


# -- the malformed catalogue -----------------------------------------------


def disorder(frames: list[bytes], rng: random.Random, *, reorder: float = 0.25, duplicate: float = 0.1,
             retransmit: float = 0.05, distance: int = 3) -> list[bytes]:
    """The frames as a link that loses nothing but keeps no order delivers them: a frame swapped with
    one up to `distance` later (unordered SCTP delivery, RFC 5043 10), a copy arriving up to
    `distance` later (a duplicated packet), a copy at the end (a retransmission whose SACK was lost,
    after its message completed). Keep `distance` frames' segments of a stream within the engine's
    DDP-SSN window."""
    out = list(frames)
    for i in range(len(out) - 1):
        if rng.random() < reorder:
            j = min(len(out) - 1, i + rng.randint(1, distance))
            out[i], out[j] = out[j], out[i]
    result: list[bytes] = []
    late: dict[int, list[bytes]] = {}
    for i, frame in enumerate(out):
        result.append(frame)
        result += late.pop(i, [])
        if rng.random() < duplicate:
            late.setdefault(i + rng.randint(0, distance), []).append(frame)
    result += [frame for copies in late.values() for frame in copies]
    result += [frame for frame in frames if rng.random() < retransmit]
    return result


def catalogue_config(shape: EngineShape) -> ReceiveConfig:
    """Every stream armed in PD 1; regions and buffers the catalogue's cases aim at (STag = index << key_bits | key)."""
    rng = random.Random(5041)
    streams = tuple(StreamEntry(a, s, pd=1) for a in range(shape.associations) for s in range(shape.stream_ids))
    last = (shape.associations - 1, shape.stream_ids - 1)
    rw = Access.REMOTE_READ | Access.REMOTE_WRITE | Access.LOCAL_WRITE
    regions = (
        RegionEntry(shape.stag(*Catalogue.RW), 1, 0x1000, 4096, rw, 0x2_0000),
        RegionEntry(shape.stag(*Catalogue.READ_ONLY), 1, 0, 4096, Access.REMOTE_READ, 0x2_2000),
        RegionEntry(shape.stag(*Catalogue.OTHER_PD), 2, 0, 4096, rw, 0x2_4000),
        RegionEntry(shape.stag(*Catalogue.BOUND), 1, 0, 4096, rw, 0x2_6000, stream=last),
        RegionEntry(shape.stag(*Catalogue.TOP), 1, TO_LIMIT - 4096, 4096, rw, 0x2_8000),
    )
    buffers = []
    address = 0x3_0000
    for stream in streams:
        for qn, length in ((0, 256), (0, 256), (1, 28)):
            buffers.append(BufferEntry(stream.association, stream.stream_id, qn, address, length))
            address += 0x200
    return ReceiveConfig(local_mac=LOCAL_MAC, local_ip=LOCAL_IP, udp_port=UDP_PORT,
                         associations=_associations(rng, shape), streams=streams, regions=regions,
                         buffers=tuple(buffers))


class Catalogue:
    """Builds one malformed case's frames on a given stream of :func:`catalogue_config`."""

    #: The catalogue's regions as (table row, key); their STags are ``shape.stag(row, key)``.
    RW, READ_ONLY, OTHER_PD = (1, 0x11), (2, 0x22), (3, 0x33)
    BOUND, TOP = (4, 0x44), (5, 0x55)
    UNREGISTERED = (9, 0x99)

    def __init__(self, config: ReceiveConfig, shape: EngineShape) -> None:
        self.config, self.shape = config, shape
        self.stag_rw, self.stag_read_only, self.stag_other_pd = (shape.stag(*row) for row in (
            self.RW, self.READ_ONLY, self.OTHER_PD))
        self.stag_bound, self.stag_top, self.stag_unregistered = (shape.stag(*row) for row in (
            self.BOUND, self.TOP, self.UNREGISTERED))
        self.sender = Sender(random.Random(5043), config)
        self.rng = random.Random(6581)
        self.msn: dict[tuple[int, int, int], int] = {}

    def write(self, stag: int | None = None, to: int = 0x1000, length: int = 64, *, dv: int = 1,
              opcode: int = Opcode.RDMA_WRITE) -> bytes:
        """A one-segment RDMA Write (RFC 5040 4.3) DDP segment, to the read-write region by default."""
        stag = self.stag_rw if stag is None else stag
        return TaggedHeader(last=True, rsvd_ulp=0x40 | opcode, stag=stag, to=to, dv=dv).encode() + \
            self.rng.randbytes(length)

    def send(self, association: int, stream_id: int, *, qn: int = 0, msn: int | None = None, mo: int = 0,
             length: int = 32, opcode: int = Opcode.SEND, invalidate_stag: int = 0) -> bytes:
        """A one-segment Send (L=1) taking the stream's next MSN of ``qn`` unless ``msn`` is given; a Send
        with Invalidate carries ``invalidate_stag`` (RFC 5040 4.1)."""
        key = (association, stream_id, qn)
        if msn is None:
            msn = self.msn.get(key, 1)
            self.msn[key] = msn + 1
        header = UntaggedHeader(last=True, rsvd_ulp=(0x40 | opcode) << 32 | invalidate_stag, qn=qn, msn=msn, mo=mo)
        return header.encode() + self.rng.randbytes(length)

    def frame(self, association: int, chunks: list[bytes], **packet) -> bytes:
        return self.sender.frame(association, self.sender.packet(association, chunks, **packet))

    def segment_frame(self, association: int, stream_id: int, segment: bytes) -> bytes:
        return self.frame(association, [self.sender.segment(association, stream_id, segment)])

    def probe(self, association: int, stream_id: int) -> bytes:
        """A valid RDMA Write on the stream: accepted, or dropped silently once the stream is in error."""
        return self.segment_frame(association, stream_id, self.write(to=0x1000 + self.rng.randrange(0, 3000)))


@dataclass(frozen=True)
class MalformedCase:
    name: str
    build: Callable[[Catalogue, int, int], list[bytes]]  # (catalogue, association, stream_id) -> frames
    latches: bool  # the case puts its DDP stream in error (RFC 5041 7.1)


def _bad_crc(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 4960 6.8: a packet whose CRC32c fails is discarded silently."""
    return [c.frame(a, [c.sender.segment(a, s, c.write(), lost=True)], bad_crc=True)]


def _wrong_tag(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 4960 8.5: a packet with the wrong verification tag is discarded silently."""
    return [c.frame(a, [c.sender.segment(a, s, c.write(), lost=True)], tag=c.sender.association(a).tag ^ 0x8000_0000)]


def _unknown_association(c: Catalogue, a: int, s: int) -> list[bytes]:
    """No association for the port pair: the whole frame goes to the host (RFC 4960 8.4 is the host's)."""
    entry = c.sender.association(a)
    return [c.frame(a, [c.sender.segment(a, s, c.write(), lost=True)], ports=(entry.peer_port, entry.local_port + 100))]


def _truncated_packet(c: Catalogue, a: int, s: int) -> list[bytes]:
    """A frame cut short of its IPv4 total length (RFC 791 3.1): dropped (LENGTH)."""
    frame = c.frame(a, [c.sender.segment(a, s, c.write(length=200), lost=True)])
    return [frame[:-40]]


def _chunk_past_packet(c: Catalogue, a: int, s: int) -> list[bytes]:
    """A chunk length running past the packet (RFC 4960 3.2): the rest of the packet is not trusted."""
    chunk = bytearray(c.sender.segment(a, s, c.write(), lost=True))
    struct.pack_into("!H", chunk, 2, len(chunk) + 64)
    return [c.frame(a, [bytes(chunk)])]


def _zero_length_chunk(c: Catalogue, a: int, s: int) -> list[bytes]:
    """Chunk length 0 (below the 4-byte chunk header, RFC 4960 3.2) ends the walk; earlier chunks stand."""
    valid = c.sender.segment(a, s, c.write())
    return [c.frame(a, [valid, struct.pack("!BBH", 0, 0x07, 0) + bytes(12)])]


def _ordered(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5043 10: DDP Segment Chunks are sent unordered; U=0 is an error, not placed."""
    return [c.frame(a, [c.sender.segment(a, s, c.write(), flags=FLAG_B | FLAG_E, lost=True)])]


def _fragmented(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5043 9: DDP Segment Chunks are never fragmented; B without E is an error."""
    return [c.frame(a, [c.sender.segment(a, s, c.write(), flags=FLAG_U | FLAG_B, lost=True)])]


def _chunk_too_short(c: Catalogue, a: int, s: int) -> list[bytes]:
    """A PPID 16 DATA chunk without room for the DDP-SSN (RFC 5043 5.2.2): TOO_SHORT."""
    return [c.frame(a, [data_chunk(c.sender.next_tsn(a), s, PPID_DDP_SEGMENT, b"\x01")])]


def _no_stream(c: Catalogue, a: int, s: int) -> list[bytes]:
    """A stream id the engine has no row for: NO_STREAM, nothing placed, nothing latched."""
    return [c.segment_frame(a, c.shape.stream_ids + 1, c.write())]


def _bad_dv(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 4.1: DV must be 1 (tagged: 0x1/0x04)."""
    return [c.segment_frame(a, s, c.write(dv=2))]


def _unknown_opcode(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5040 4.2: an undefined opcode (0xF) is an unexpected opcode, RDMAP 0x2/0x06."""
    return [c.segment_frame(a, s, c.write(opcode=0xF))]


def _short_segment(c: Catalogue, a: int, s: int) -> list[bytes]:
    """A DDP segment shorter than its tagged header: DDP local catastrophic."""
    return [c.segment_frame(a, s, c.write()[:10])]


def _invalid_stag(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 tagged item 1: an STag that is not registered (0x1/0x00)."""
    return [c.segment_frame(a, s, c.write(stag=c.stag_unregistered))]


def _stale_key(c: Catalogue, a: int, s: int) -> list[bytes]:
    """The right region index with another key: an invalid STag (RFC 5041 7.1 tagged item 1). The keys
    differ in the key's top bit only, so an engine that compares fewer bits than the key has misses it."""
    return [c.segment_frame(a, s, c.write(stag=c.stag_rw ^ 1 << (c.shape.key_bits - 1)))]


def _pd_mismatch(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 8.2: the STag's PD is not the stream's (0x1/0x02)."""
    return [c.segment_frame(a, s, c.write(stag=c.stag_other_pd, to=0))]


def _stream_mismatch(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 8.2: an STag bound to another DDP stream (0x1/0x02)."""
    return [c.segment_frame(a, s, c.write(stag=c.stag_bound, to=0))]


def _access_right(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 tagged item 2: RDMA Write to a region without remote write (RDMAP 0x1/0x02)."""
    return [c.segment_frame(a, s, c.write(stag=c.stag_read_only, to=0))]


def _to_below_base(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 tagged item 3: TO below the region's base (0x1/0x01)."""
    return [c.segment_frame(a, s, c.write(to=0x0FFF))]


def _to_past_end(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 tagged item 4: TO + length past the region's end (0x1/0x01)."""
    return [c.segment_frame(a, s, c.write(to=0x1000 + 4096 - 63, length=64))]


def _to_wrap(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 tagged item 5: TO + length wraps 2**64 (0x1/0x03)."""
    return [c.segment_frame(a, s, c.write(stag=c.stag_top, to=TO_LIMIT - 16, length=16))]


def _bad_qn(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 untagged item 1: QN 3 is no RDMAP queue (0x2/0x01)."""
    return [c.segment_frame(a, s, c.send(a, s, qn=3, msn=1))]


def _no_buffer(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 untagged item 2: a Terminate on QN 2, where no buffer is posted (0x2/0x02)."""
    return [c.segment_frame(a, s, c.send(a, s, qn=2, opcode=Opcode.TERMINATE, length=4))]


def _msn_range(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 untagged item 5: MSN 0, behind the first posted MSN 1 (0x2/0x03)."""
    return [c.segment_frame(a, s, c.send(a, s, msn=0))]


def _mo_range(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 untagged item 3: MO at the buffer's length (0x2/0x04)."""
    return [c.segment_frame(a, s, c.send(a, s, mo=256, length=8))]


def _too_long(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 untagged item 4: MO + length past the buffer (0x2/0x05)."""
    return [c.segment_frame(a, s, c.send(a, s, mo=200, length=100))]


def _duplicate_chunk(c: Catalogue, a: int, s: int) -> list[bytes]:
    """The same DDP Segment Chunk twice (a duplicated packet, or a retransmission after its message
    completed): the second is DUPLICATE, placed and completed once (RFC 5043 10, RFC 5041 5.3)."""
    frame = c.segment_frame(a, s, c.send(a, s, length=40))
    return [frame, frame]


def _ssn_beyond_window(c: Catalogue, a: int, s: int) -> list[bytes]:
    """A DDP-SSN SEQUENCE_WINDOW after the lowest missing one: no unreceived chunks the engine tracks
    explain the gap (RFC 5043 10): INVALID_SSN, nothing placed, the stream ends."""
    ssn = (c.sender.next_ddp_ssn(a, s) + SEQUENCE_WINDOW) & 0xFFFF
    return [c.frame(a, [segment_chunk(c.sender.next_tsn(a), s, ssn, c.write())])]


def _completed_msn_again(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 untagged item 5, 5.3: a Send of MSN 1 completes; the next frame, back to back, names
    MSN 1 again: the message was delivered, its buffer consumed (0x2/0x03), nothing placed twice."""
    return [c.segment_frame(a, s, c.send(a, s, msn=1, length=50)), c.segment_frame(a, s, c.send(a, s, msn=1, length=16))]


def _completed_msn_again_with_invalidate(c: Catalogue, a: int, s: int) -> list[bytes]:
    """As ``completed_msn_again`` with Sends with Invalidate (RFC 5040 4.1; the STag is the host's to
    invalidate, an unregistered one here)."""
    send = Opcode.SEND_WITH_INVALIDATE
    return [c.segment_frame(a, s, c.send(a, s, msn=1, length=50, opcode=send,
                                         invalidate_stag=c.stag_unregistered)),
            c.segment_frame(a, s, c.send(a, s, msn=1, length=16, opcode=send,
                                         invalidate_stag=c.stag_unregistered))]


def _msn_past_posted(c: Catalogue, a: int, s: int) -> list[bytes]:
    """RFC 5041 7.1 untagged item 2: MSNs 1 and 2 complete back to back, then MSN 3, one past the two
    posted buffers (0x2/0x02)."""
    return [c.segment_frame(a, s, c.send(a, s, msn=msn, length=40)) for msn in (1, 2, 3)]


def _completed_msn_across_streams(c: Catalogue, a: int, s: int) -> list[bytes]:
    """MSN 1 completes on this stream, then MSN 1 of another stream (accepted: MSNs are per queue of a
    stream, RFC 5041 5.1), then MSN 1 here again (0x2/0x03), all back to back."""
    other = (c.shape.associations - 1, c.shape.stream_ids - 1)
    return [c.segment_frame(a, s, c.send(a, s, msn=1, length=24)),
            c.segment_frame(*other, c.send(*other, msn=1, length=24)),
            c.segment_frame(a, s, c.send(a, s, msn=1, length=8))]


MALFORMED: tuple[MalformedCase, ...] = (
    MalformedCase("duplicate_chunk", _duplicate_chunk, False),
    MalformedCase("ssn_beyond_window", _ssn_beyond_window, True),
    MalformedCase("bad_crc", _bad_crc, False),
    MalformedCase("wrong_verification_tag", _wrong_tag, False),
    MalformedCase("unknown_association", _unknown_association, False),
    MalformedCase("truncated_packet", _truncated_packet, False),
    MalformedCase("chunk_past_packet", _chunk_past_packet, False),
    MalformedCase("zero_length_chunk", _zero_length_chunk, False),
    MalformedCase("unordered_flag_clear", _ordered, False),
    MalformedCase("fragmented", _fragmented, False),
    MalformedCase("chunk_too_short", _chunk_too_short, False),
    MalformedCase("no_stream", _no_stream, False),
    MalformedCase("bad_dv", _bad_dv, True),
    MalformedCase("unknown_opcode", _unknown_opcode, True),
    MalformedCase("segment_shorter_than_header", _short_segment, True),
    MalformedCase("invalid_stag", _invalid_stag, True),
    MalformedCase("stale_stag_key", _stale_key, True),
    MalformedCase("pd_mismatch", _pd_mismatch, True),
    MalformedCase("stream_mismatch", _stream_mismatch, True),
    MalformedCase("missing_access_right", _access_right, True),
    MalformedCase("to_below_base", _to_below_base, True),
    MalformedCase("to_past_end", _to_past_end, True),
    MalformedCase("to_wrap", _to_wrap, True),
    MalformedCase("bad_qn", _bad_qn, True),
    MalformedCase("no_posted_buffer", _no_buffer, True),
    MalformedCase("msn_out_of_range", _msn_range, True),
    MalformedCase("mo_out_of_range", _mo_range, True),
    MalformedCase("message_too_long", _too_long, True),
    MalformedCase("completed_msn_again", _completed_msn_again, True),
    MalformedCase("completed_msn_again_send_with_invalidate", _completed_msn_again_with_invalidate, True),
    MalformedCase("msn_past_posted_buffers", _msn_past_posted, True),
    MalformedCase("completed_msn_across_streams", _completed_msn_across_streams, True),
)


def catalogue_parts(shape: EngineShape) -> list[list[tuple[MalformedCase, int, int]]]:
    """The catalogue split into parts, each run on an engine configured afresh with :func:`catalogue_config`.

    In a part, every latching case has a DDP stream (association, stream id)
    of its own, so no error hides the next (RFC 5041 7.1: after an error a
    stream drops everything silently); the non-latching cases run first, on
    the stream the part's last latching case will use. The stream bound
    region's stream is never given a case: ``stream_mismatch`` needs it
    healthy elsewhere, and the case's probes show it.
    """
    pairs = [(a, s) for a in range(shape.associations) for s in range(shape.stream_ids)]
    pairs.remove((shape.associations - 1, shape.stream_ids - 1))
    latching = [case for case in MALFORMED if case.latches]
    others = [case for case in MALFORMED if not case.latches]
    parts = [latching[i : i + len(pairs)] for i in range(0, len(latching), len(pairs))]
    result = []
    for number, cases in enumerate(parts):
        assigned = [(case, *pairs[i]) for i, case in enumerate(cases)]
        healthy = pairs[len(cases) - 1]
        share = others[number::len(parts)]
        result.append([(case, *healthy) for case in share] + assigned)
    return result


def case_frames(catalogue: Catalogue, case: MalformedCase, association: int, stream_id: int) -> list[bytes]:
    """The case's frames, then a probe on the same stream (accepted, or dropped once in error) and one on
    the stream no case uses (always accepted: an error must not disturb another stream's placement)."""
    shape = catalogue.shape
    return case.build(catalogue, association, stream_id) + [
        catalogue.probe(association, stream_id), catalogue.probe(shape.associations - 1, shape.stream_ids - 1)]
