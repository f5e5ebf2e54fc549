"""Reference model of the receive offload engine: frames in, placed bytes and reports out.

The golden model of what the gateware receive path (`hdl/`) must do with every
frame, built from the model's own codecs and DDP sink, independent of the
RTL. It is the scoreboard of the differential tests and the engine behind
`rnic replay --model`.

Frame stage (the SCTP receiver), first rule that applies decides:

1. runt, ethertype not IPv4 or IP version not 4 -> exception NOT_IPV4; but a
   destination MAC other than ours (broadcast and multicast too) is checked
   first -> exception NOT_LOCAL_MAC;
2. no room for a 20-byte IPv4 header -> drop LENGTH;
3. IHL not 5 -> exception IP_OPTIONS; 4. header checksum -> drop
   IP_CHECKSUM (RFC 791 3.1); 5. fragment -> exception FRAGMENT; 6.
   destination not ours -> exception NOT_LOCAL_IP; 7. total length below 20
   or past the frame -> drop LENGTH; 8. neither SCTP (132) nor UDP to our
   SCTP-over-UDP port (RFC 6951) -> exception NOT_SCTP; 9. UDP length bad or
   SCTP packet shorter than 12 bytes -> drop LENGTH;
10.-14. then the CRC32c (RFC 4960 6.8): a failure drops (CRC); otherwise a
   first chunk INIT -> exception INIT, a first chunk ABORT / SHUTDOWN
   COMPLETE with T=1 -> exception TAG_REFLECTED (RFC 4960 8.5.1), no
   association for (dst port, src port, src address) -> exception
   NO_ASSOCIATION, verification tag not the association's -> drop TAG
   (RFC 4960 8.5); else the packet is delivered to the chunk stage.

Chunk stage: DATA with PPID 16 on a DDP association, U=1 (RFC 5043 10) and
B=E=1 (RFC 5043 9) is a DDP segment; every other chunk goes to the host
intact (session control, other PPIDs, DATA of a non-DDP association, control
chunks); a PPID 16 chunk with U=0 or without B and E, or shorter than its
headers, is an error and the walk goes on; a chunk length below 4 or past
the packet is an error and ends the packet.

DDP stage, per configured stream: `DdpSink` with queues 0-2, the RDMAP
header check (RFC 5040 4.1/4.2) and the placement rights of RDMA Write and
Read Response, segments in arrival order (the engine places and reports; the
host orders delivery by DDP-SSN). Per segment a verdict: ACCEPTED (placed),
ERROR (the stream's first error, RFC 5041 7.1), DROPPED (stream already in
error) or NO_STREAM (not a configured stream).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field
from enum import Enum

from hdl.abi import ChunkError, ChunkException, FrameDrop, FrameException, SegmentStatus
from model.ddp.memory import MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.sink import DdpSink, Delivered, Placed, SinkError
from model.engine.config import ReceiveConfig
from model.errors import DecodeError, ErrorNumber
from model.net.checksum import internet_checksum, sctp_checksum, sctp_checksum_from_bytes
from model.rdmap.messages import header_error, placement_access, rdmap_control_of

ETHERTYPE_IPV4 = 0x0800
PROTOCOL_SCTP, PROTOCOL_UDP = 132, 17
CHUNK_DATA, CHUNK_INIT, CHUNK_ABORT, CHUNK_SHUTDOWN_COMPLETE = 0, 1, 6, 14
PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL = 16, 17


class FrameAction(Enum):
    DELIVER = 0
    EXCEPTION = 1
    DROP = 2


@dataclass(frozen=True)
class SegmentVerdict:
    """What the engine did with one DDP segment."""

    association: int
    stream_id: int
    tsn: int
    ddp_ssn: int
    status: SegmentStatus
    error: ErrorNumber | None = None
    tagged: bool = False
    last: bool = False
    opcode: int = 0
    payload_length: int = 0
    host_address: int | None = None   # where the payload went (ACCEPTED with payload)
    message_length: int | None = None  # untagged L=1 accepted: MO + payload length (RFC 5041 5.4)


@dataclass(frozen=True)
class ChunkToHost:
    association: int
    reason: ChunkException
    chunk: bytes


@dataclass(frozen=True)
class ChunkFault:
    association: int
    tsn: int
    kind: ChunkError


@dataclass
class FrameResult:
    action: FrameAction
    reason: FrameException | FrameDrop | None = None
    association: int | None = None
    chunks_to_host: list[ChunkToHost] = field(default_factory=list)
    chunk_faults: list[ChunkFault] = field(default_factory=list)
    segments: list[SegmentVerdict] = field(default_factory=list)


@dataclass
class Counters:
    frames: int = 0
    delivered: int = 0
    exceptions: int = 0
    ip_checksum_errors: int = 0
    crc_errors: int = 0
    tag_errors: int = 0
    length_errors: int = 0


_DROP_COUNTER = {
    FrameDrop.IP_CHECKSUM: "ip_checksum_errors",
    FrameDrop.CRC: "crc_errors",
    FrameDrop.TAG: "tag_errors",
    FrameDrop.LENGTH: "length_errors",
}


class ReceiveEngineModel:
    """The receive engine configured by a `ReceiveConfig`, placing into `memory`."""

    def __init__(self, config: ReceiveConfig, memory: SparseMemory | None = None) -> None:
        self.config = config
        self.memory = memory if memory is not None else SparseMemory()
        self.counters = Counters()
        self._local_ip = int(ipaddress.IPv4Address(config.local_ip))
        self._associations = {
            (a.local_port, a.peer_port, int(ipaddress.IPv4Address(a.peer_ip))): a for a in config.associations
        }
        self.table = MemoryTable()
        pds = {pd: ProtectionDomain(pd) for pd in {s.pd for s in config.streams} | {r.pd for r in config.regions}}
        for region in config.regions:
            self.table.register(MemoryRegion(region.stag, pds[region.pd], region.base_to, region.length,
                                             region.access, region.host_address, stream=region.stream))
        self.sinks: dict[tuple[int, int], DdpSink] = {}
        for stream in config.streams:
            key = (stream.association, stream.stream_id)
            self.sinks[key] = DdpSink(pd=pds[stream.pd], memory_table=self.table, host_memory=self.memory,
                                      stream_id=key, queues=(0, 1, 2), tagged_access=placement_access,
                                      ulp_check=_rdmap_check)
        for buffer in config.buffers:
            self.sinks[(buffer.association, buffer.stream_id)].post_buffer(buffer.qn, buffer.host_address,
                                                                            buffer.length)

    def receive_frame(self, frame: bytes) -> FrameResult:
        """Process one Ethernet frame (no FCS)."""
        self.counters.frames += 1
        result, sctp = self._classify(bytes(frame))
        if result.action is FrameAction.DROP:
            setattr(self.counters, _DROP_COUNTER[result.reason],
                    getattr(self.counters, _DROP_COUNTER[result.reason]) + 1)
        elif result.action is FrameAction.EXCEPTION:
            self.counters.exceptions += 1
        else:
            self.counters.delivered += 1
            self._walk_chunks(sctp, result)
        return result

    # -- frame stage ------------------------------------------------------

    def _classify(self, frame: bytes) -> tuple[FrameResult, bytes]:
        def exception(reason: FrameException) -> tuple[FrameResult, bytes]:
            return FrameResult(FrameAction.EXCEPTION, reason), b""

        def drop(reason: FrameDrop) -> tuple[FrameResult, bytes]:
            return FrameResult(FrameAction.DROP, reason), b""

        if len(frame) >= 6 and frame[:6] != self.config.local_mac:
            return exception(FrameException.NOT_LOCAL_MAC)
        if len(frame) < 14 or frame[12:14] != ETHERTYPE_IPV4.to_bytes(2, "big"):
            return exception(FrameException.NOT_IPV4)
        if len(frame) >= 15 and frame[14] >> 4 != 4:
            return exception(FrameException.NOT_IPV4)
        if len(frame) < 34:
            return drop(FrameDrop.LENGTH)
        ip = frame[14:34]
        if ip[0] & 0x0F != 5:
            return exception(FrameException.IP_OPTIONS)
        if internet_checksum(ip) != 0:
            return drop(FrameDrop.IP_CHECKSUM)
        flags_fragment = struct.unpack_from("!H", ip, 6)[0]
        if flags_fragment & 0x2000 or flags_fragment & 0x1FFF:
            return exception(FrameException.FRAGMENT)
        if struct.unpack_from("!I", ip, 16)[0] != self._local_ip:
            return exception(FrameException.NOT_LOCAL_IP)
        total_length = struct.unpack_from("!H", ip, 2)[0]
        if total_length < 20 or 14 + total_length > len(frame):
            return drop(FrameDrop.LENGTH)
        protocol = ip[9]
        payload = frame[34 : 14 + total_length]
        udp = False
        if protocol == PROTOCOL_UDP and len(payload) >= 4 and \
                struct.unpack_from("!H", payload, 2)[0] == self.config.udp_port:
            udp = True
        elif protocol != PROTOCOL_SCTP:
            return exception(FrameException.NOT_SCTP)
        if udp:
            udp_length = struct.unpack_from("!H", payload, 4)[0] if len(payload) >= 8 else 0
            if udp_length < 8 or udp_length > len(payload):
                return drop(FrameDrop.LENGTH)
            sctp = payload[8:udp_length]
        else:
            sctp = payload
        if len(sctp) < 12:
            return drop(FrameDrop.LENGTH)
        if sctp_checksum_from_bytes(sctp[8:12]) != sctp_checksum(sctp):
            return drop(FrameDrop.CRC)
        src_port, dst_port, tag = struct.unpack_from("!HHI", sctp)
        first_type = sctp[12] if len(sctp) > 12 else None
        first_flags = sctp[13] if len(sctp) > 13 else 0
        if first_type == CHUNK_INIT and tag == 0:
            return exception(FrameException.INIT)
        if first_type in (CHUNK_ABORT, CHUNK_SHUTDOWN_COMPLETE) and first_flags & 0x01:
            return exception(FrameException.TAG_REFLECTED)
        src_ip = struct.unpack_from("!I", ip, 12)[0]
        association = self._associations.get((dst_port, src_port, src_ip))
        if association is None:
            return exception(FrameException.NO_ASSOCIATION)
        if tag != association.tag:
            return drop(FrameDrop.TAG)
        return FrameResult(FrameAction.DELIVER, association=association.index), sctp

    # -- chunk stage --------------------------------------------------------

    def _walk_chunks(self, sctp: bytes, result: FrameResult) -> None:
        index = result.association
        ddp = next(a.ddp for a in self.config.associations if a.index == index)
        offset = 12
        while offset < len(sctp):
            if offset + 4 > len(sctp):
                result.chunk_faults.append(ChunkFault(index, 0, ChunkError.PAST_END))
                return
            chunk_type, flags, length = struct.unpack_from("!BBH", sctp, offset)
            tsn = struct.unpack_from("!I", sctp, offset + 4)[0] if length >= 8 and offset + 8 <= len(sctp) else 0
            if length < 4:
                result.chunk_faults.append(ChunkFault(index, 0, ChunkError.TOO_SHORT))
                return
            if offset + length > len(sctp):
                result.chunk_faults.append(ChunkFault(index, 0, ChunkError.PAST_END))
                return
            chunk = sctp[offset : offset + length]
            offset += (length + 3) & ~3
            if chunk_type != CHUNK_DATA:
                result.chunks_to_host.append(ChunkToHost(index, ChunkException.CONTROL, chunk))
                continue
            if not ddp:
                result.chunks_to_host.append(ChunkToHost(index, ChunkException.NOT_DDP, chunk))
                continue
            if length < 16:
                result.chunk_faults.append(ChunkFault(index, tsn, ChunkError.TOO_SHORT))
                continue
            ppid = struct.unpack_from("!I", chunk, 12)[0]
            if ppid == PPID_DDP_SESSION_CONTROL:
                result.chunks_to_host.append(ChunkToHost(index, ChunkException.SESSION_CONTROL, chunk))
            elif ppid != PPID_DDP_SEGMENT:
                result.chunks_to_host.append(ChunkToHost(index, ChunkException.OTHER_PPID, chunk))
            elif length < 18:
                result.chunk_faults.append(ChunkFault(index, tsn, ChunkError.TOO_SHORT))
            elif not flags & 0x04:
                result.chunk_faults.append(ChunkFault(index, tsn, ChunkError.ORDERED))
            elif flags & 0x03 != 0x03:
                result.chunk_faults.append(ChunkFault(index, tsn, ChunkError.FRAGMENTED))
            else:
                stream_id = struct.unpack_from("!H", chunk, 8)[0]
                ddp_ssn = struct.unpack_from("!H", chunk, 16)[0]
                result.segments.append(self._segment(index, stream_id, tsn, ddp_ssn, chunk[18:]))

    # -- DDP stage --------------------------------------------------------------

    def _segment(self, association: int, stream_id: int, tsn: int, ddp_ssn: int, raw: bytes) -> SegmentVerdict:
        fields = _header_fields(raw)
        common = dict(association=association, stream_id=stream_id, tsn=tsn, ddp_ssn=ddp_ssn, **fields)
        sink = self.sinks.get((association, stream_id))
        if sink is None:
            return SegmentVerdict(status=SegmentStatus.NO_STREAM, **common)
        if sink.error is not None:
            return SegmentVerdict(status=SegmentStatus.DROPPED, **common)
        events = sink.receive(raw)
        address = message_length = None
        for event in events:
            if isinstance(event, SinkError):
                return SegmentVerdict(status=SegmentStatus.ERROR, error=event.number, **common)
            if isinstance(event, Placed):
                address = event.address
            if isinstance(event, Delivered) and not event.tagged:
                message_length = event.length
        return SegmentVerdict(status=SegmentStatus.ACCEPTED, host_address=address,
                              message_length=message_length, **common)


def _rdmap_check(segment: DdpSegment):
    return header_error(segment.header)


def _header_fields(raw: bytes) -> dict:
    """The verdict's header fields, as far as the bytes hold a header."""
    try:
        segment = DdpSegment.decode(raw)
    except DecodeError:
        return {"tagged": bool(raw and raw[0] & 0x80), "last": bool(raw and raw[0] & 0x40),
                "opcode": raw[1] & 0x0F if len(raw) > 1 else 0, "payload_length": 0}
    header = segment.header
    assert isinstance(header, (TaggedHeader, UntaggedHeader))
    return {"tagged": header.tagged, "last": header.last, "opcode": rdmap_control_of(header).opcode,
            "payload_length": len(segment.payload)}
