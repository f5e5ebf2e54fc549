"""Reference model of the receive offload engine: frames in, placed bytes and reports out.

The golden model of what the gateware receive path (`hdl/`) must do with every
frame, independent of the RTL. It is the scoreboard of the differential tests
and the engine behind `rnic replay --model`. Every field it reads comes from
the model's own codecs: `model.net.frames` (Ethernet, IPv4, UDP, and the
fields a receiver checks before the whole header has arrived),
`model.sctp.packet` (`CommonHeader`, the CRC32c check `checksum_ok`, the lenient
`walk_chunks`, `DataChunk`), `model.ddp.sctp_adaptation` (DDP-SSN),
`model.ddp.segment` and `model.rdmap.messages` (DDP and RDMAP headers), and
`model.ddp.sink` places and checks the segments.

Sans-I/O: `receive(frame, now)` takes one frame; `next_events()` drains one
`FrameResult` per frame received, carrying the frame's index and time.
`overflow(frame, now)` stands for a frame the engine had no room for (its
receive buffer full): dropped whole and counted. The host's commands act
between frames: `revoke_buffer`, `reset_queue` (posted buffers taken back),
`rearm_stream` (the stream's row rewritten after an error), and the table
writes a host driver makes while it runs (`write_association`,
`write_region`, `write_stream`); `refuse_writes`
makes a range of host memory answer writes with an error (AXI SLVERR): its
bytes are not written, and a segment placing any byte there is reported
with the DDP Local Catastrophic Error (`abi.rx.DMA_ERROR`) and latches its
stream's error, as the engine does when a write response is not OKAY.

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
   association for (dst port, src port, src address) in the row the
   verification tag's low ASSOCIATION_BITS bits name (`abi.rx.association_row`:
   the host draws its Initiate Tags so, RFC 4960 5.3.1) -> exception
   NO_ASSOCIATION, verification tag not that association's -> drop TAG
   (RFC 4960 8.5); else the packet is delivered to the chunk stage.

Chunk stage: DATA with PPID 16 on a DDP association, U=1 (RFC 5043 10) and
B=E=1 (RFC 5043 9) is a DDP segment; every other chunk goes to the host
intact (session control, other PPIDs, DATA of a non-DDP association, control
chunks); a PPID 16 chunk with U=0 (ORDERED) or without B and E
(FRAGMENTED), or a DATA chunk shorter than its headers (TOO_SHORT: below the
16-byte DATA header, or no room for the DDP-SSN), is an error reported with
the chunk's TSN (0 when the chunk is too short to hold one) and the walk
goes on; a chunk header or length past the packet (PAST_END) or a length
below 4 (TOO_SHORT) is an error with TSN 0 and ends the packet, the chunks
before it still count.

Every DATA chunk whose 16-byte DATA header lies whole in the packet (RFC
4960 3.3.1) also yields a `ChunkAck` (association, TSN, user data length and
where it went: DDP segment, to the host, or refused), in chunk order, for the
host's SACKs (RFC 4960 6.2); shorter DATA chunks and broken ones do not.

DDP stage, per configured stream: `DdpSink` with queues 0-2, the RDMAP
header check (RFC 5040 4.1/4.2), the placement rights of RDMA Write and
Read Response, and the DDP-SSN as its sequence number (RFC 5043 6.1, 10) in
a window of `abi.rx.SEQUENCE_WINDOW` from the stream's `first_ssn`. Per
segment a verdict on arrival: ACCEPTED (placed), ERROR (the stream's first
error, RFC 5041 7.1), DROPPED (stream already in error), NO_STREAM (not a
configured stream), DUPLICATE (DDP-SSN seen before: nothing placed) or
INVALID_SSN (beyond the window: nothing placed, the stream ends as after an
error). A frame's `arrivals` are those verdicts; its `segments` are the
report records in the order the engine emits them: every verdict but
ACCEPTED at once, ACCEPTED ones when the sink delivers them, in DDP-SSN
order (RFC 5041 5.3, 5.4), so the record with L = 1 completes its message
after all its segments were placed. A stream's error strands the records
still waiting; rewriting its row (`rearm_stream`) drops them and restarts
delivery at `first_ssn`. Per-message reports (`segment_reports` False, the
engine's reset value) then leave out of `segments` the ACCEPTED records
`abi.rx.report_withheld` names (a message's middle segments), counted in
`reports_withheld`; `arrivals` keeps every verdict.

Read responder (`read_responder`, the engine's elaboration-time option, off by
default): an RDMA Read Request (untagged, QN 1, opcode 1, RFC 5040 4.4) needs
no posted buffer and is never placed. After the header checks above it must
be one whole 28-byte message (L = 1, MO = 0), else RDMAP Remote Operation
Error, unspecified (0x2/0xFF, as the host's endpoint answers a request it
cannot decode); then its Data Source (SrcSTag, SrcTO, RDMA Read Message Size)
is checked as a tagged access needing REMOTE_READ in the stream's PD and
binding (`MemoryTable.check_tagged`, RFC 5041 7.1, 8.2; RFC 5040 5.2), a
refusal being the RDMAP Remote Protection Error of the fault (RFC 5040 7.2:
0x1/0x00 invalid STag, 0x1/0x03 not associated, 0x1/0x02 access, 0x1/0x01
bounds, 0x1/0x04 wrap), which latches the stream's error like any other. The
verdict of such a segment carries the request's SinkSTag and SinkTO as `stag`
and `to`; accepted, also the Message Size as `message_length` and the
translated Data Source as `host_address` (0 for size 0). Its QN 1 MSN is not
checked (no buffers; the transmit engine's IRD bounds the requests). An
accepted request leaves, in DDP-SSN order with its stream's records, as a
`ReadResponseRequest` (`abi.tx.read_response_layout`) in `read_responses`
instead of `segments`: the transmit engine answers it (RFC 5040 5.5).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from enum import Enum

from abi.rx import (ASSOCIATION_BITS, SEQUENCE_WINDOW, STAG_KEY_BITS, AckDisposition, ChunkError, ChunkException,
                    FrameDrop, FrameException, ReportKind, SegmentStatus, association_row, check_key_bits,
                    report_withheld)
from model.engine.sack import SackRecord, SackUnit, tick_time, ticks_at
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import UNTAGGED_HEADER_LENGTH, DdpSegment, decode_header
from model.ddp.sink import DdpSink, OutOfWindow, Placed, SinkError
from model.engine.config import AssociationEntry, ReceiveConfig, RegionEntry, StreamEntry
from model.engine.tx import ReadResponseRequest
from model.errors import DecodeError, ErrorNumber, RdmapError
from model.net.frames import (
    ETHERTYPE_IPV4,
    IP_PROTOCOL_SCTP,
    IP_PROTOCOL_UDP,
    EthernetHeader,
    Ipv4Header,
    UdpHeader,
    ethernet_destination,
    ipv4_version_and_ihl,
    udp_destination_port,
)
from model.rdmap.messages import (READ_REQUEST_LENGTH, Opcode, QueueNumber, ReadRequest, header_error,
                                  invalidate_stag_of, placement_access, rdmap_control_of)
from model.sctp.packet import (
    COMMON_HEADER_LENGTH,
    FLAG_T,
    PPID_DDP_SEGMENT,
    PPID_DDP_SESSION_CONTROL,
    BrokenChunk,
    ChunkType,
    ChunkWalkStop,
    CommonHeader,
    DataChunk,
    SackChunk,
    checksum_ok,
    walk_chunks,
)

#: How the chunk walk's early end is reported (RFC 4960 3.2).
_WALK_STOP_ERROR = {
    ChunkWalkStop.HEADER_PAST_END: ChunkError.PAST_END,
    ChunkWalkStop.LENGTH_BELOW_HEADER: ChunkError.TOO_SHORT,
    ChunkWalkStop.LENGTH_PAST_END: ChunkError.PAST_END,
}


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
    stag: int = 0             # tagged (RFC 5041 4.2)
    to: int = 0
    qn: int = 0               # untagged (RFC 5041 4.3)
    msn: int = 0
    mo: int = 0
    invalidate_stag: int = 0  # untagged (RFC 5040 4.1)
    dma_error: bool = False   # the host memory refused a write of its payload (status ERROR)


@dataclass(frozen=True)
class ChunkToHost:
    association: int
    reason: ChunkException
    chunk: bytes


@dataclass(frozen=True)
class PeerSack:
    """A SACK chunk of the peer for the transmit engine's transport unit (`abi.tx.peer_sack_layout`): the
    association's SACK row says ``peer_sacks``, so it does not reach the host."""
    association: int
    sack: SackChunk


@dataclass(frozen=True)
class ChunkAck:
    """A DATA chunk taken by the engine, for the host's SACKs (RFC 4960 6.2)."""

    association: int
    tsn: int
    disposition: AckDisposition
    length: int  # user data bytes
    packet_end: bool = False  # the chunk, padded, ends its packet (RFC 4960 3.2)
    immediate: bool = False   # the chunk's I bit: its sender asks for the SACK without delay (RFC 9260 3.3.1)


@dataclass(frozen=True)
class ChunkFault:
    association: int
    tsn: int
    kind: ChunkError


@dataclass
class FrameResult:
    """The event `ReceiveEngineModel.receive` queues for each frame: what the engine did with it.

    `index` numbers the frames from 0 in the order they were received and
    `time` is the `now` they were received at, so a result is paired with
    its frame however many results a caller drains at once.
    """

    index: int
    time: float
    action: FrameAction
    reason: FrameException | FrameDrop | None = None
    association: int | None = None
    chunks_to_host: list[ChunkToHost] = field(default_factory=list)
    chunk_faults: list[ChunkFault] = field(default_factory=list)
    segments: list[SegmentVerdict] = field(default_factory=list)  # report records, in emission order
    acks: list[ChunkAck] = field(default_factory=list)  # of the associations the host SACKs
    arrivals: list[SegmentVerdict] = field(default_factory=list)  # every segment's verdict, in arrival order
    sacks: list[SackRecord] = field(default_factory=list)  # the acknowledgement unit's, for this frame's packet
    peer_sacks: list[PeerSack] = field(default_factory=list)  # the peer's SACK chunks for the transport unit
    read_responses: list[ReadResponseRequest] = field(default_factory=list)  # accepted Read Requests (read responder)


@dataclass
class Counters:
    frames: int = 0
    delivered: int = 0
    exceptions: int = 0
    ip_checksum_errors: int = 0
    crc_errors: int = 0
    tag_errors: int = 0
    length_errors: int = 0
    overflow: int = 0
    peer_sacks_malformed: int = 0
    """SACK chunks for the transport unit whose length is not 16 + 4 * (blocks + duplicates), dropped."""


_DROP_COUNTER = {
    FrameDrop.OVERFLOW: "overflow",
    FrameDrop.IP_CHECKSUM: "ip_checksum_errors",
    FrameDrop.CRC: "crc_errors",
    FrameDrop.TAG: "tag_errors",
    FrameDrop.LENGTH: "length_errors",
}


class ReceiveEngineModel:
    """The receive engine configured by a `ReceiveConfig`, placing into `memory`.

    Sans-I/O, like every object of the model: `receive(frame, now)` takes a
    frame, `next_events()` drains the `FrameResult` of every frame received
    since the last call, in order. The engine sends nothing on the wire and
    sends nothing on the wire (`data_to_send` is always empty): the SACKs of
    its acknowledgement unit (`write_sack`, `model.engine.sack`) go to the
    transmit engine, drained with `next_sacks`, those of a frame's packet also
    in its `FrameResult`. Its one timer is the unit's delayed SACK, in ticks of
    `TICK_SECONDS` (tick n is reached at n * TICK_SECONDS): `next_timeout`,
    `handle_timeout`.
    """

    def __init__(self, config: ReceiveConfig, memory: SparseMemory | None = None, *,
                 read_responder: bool = False) -> None:
        self.config = config
        self.read_responder = read_responder  # the engine's option: Read Requests checked and answered here
        self.memory = memory if memory is not None else SparseMemory()
        self.counters = Counters()
        self._events: list[FrameResult] = []
        self.sack = SackUnit(1 << ASSOCIATION_BITS)
        self._engine_sacks: set[int] = set()
        self._peer_sack_rows: set[int] = set()
        self._sacks: list[SackRecord] = []
        self._local_ip = ipaddress.IPv4Address(config.local_ip)
        self._associations: dict[int, AssociationEntry] = {}  # by row
        self._endpoints: dict[int, tuple[int, int, ipaddress.IPv4Address]] = {}  # a row's transport addresses
        for association in config.associations:
            self.write_association(association)
        self.table = MemoryTable()
        self._region_rows: dict[int, int] = {}  # row index -> the STag it holds
        for region in config.regions:  # as configured (a file may give two STags one index; the RTL refuses it)
            self.table.register(MemoryRegion(region.stag, ProtectionDomain(region.pd), region.base_to, region.length,
                                             region.access, region.host_address, stream=region.stream))
        self._bus = _HostBus(self.memory)
        self.sinks: dict[tuple[int, int], DdpSink] = {}
        self._armed: set[tuple[int, int]] = set()
        self._first_ssn: dict[tuple[int, int], int] = {}
        self.reports_discarded = 0  # waiting records dropped by `rearm_stream`
        self.segment_reports = config.segment_reports  # the configuration bit: a record per segment, not message
        self.reports_withheld = 0     # records of accepted middle segments left out (per-message reports)
        self._waiting: dict[tuple[int, int], dict[int, SegmentVerdict]] = {}  # accepted, not yet delivered
        for stream in config.streams:
            self.write_stream(stream)
        for buffer in config.buffers:
            self.sinks[(buffer.association, buffer.stream_id)].post_buffer(buffer.qn, buffer.host_address,
                                                                            buffer.length)

    # -- sans-I/O interface -------------------------------------------------

    def receive(self, frame: bytes, now: float) -> None:
        """Process one Ethernet frame (no FCS) received at `now`; queues its `FrameResult`."""
        self.handle_timeout(now)
        result = FrameResult(self.counters.frames, now, FrameAction.DROP)
        self.counters.frames += 1
        sctp = self._classify(bytes(frame), result)
        if result.action is FrameAction.DROP:
            setattr(self.counters, _DROP_COUNTER[result.reason],
                    getattr(self.counters, _DROP_COUNTER[result.reason]) + 1)
        elif result.action is FrameAction.EXCEPTION:
            self.counters.exceptions += 1
        else:
            self.counters.delivered += 1
            self._walk_chunks(sctp, result)
        self._events.append(result)

    def overflow(self, frame: bytes, now: float) -> None:
        """A frame the engine had no room for (receive buffer full): dropped whole, counted; queues its
        `FrameResult` (DROP, OVERFLOW) like `receive`."""
        self.counters.frames += 1
        self.counters.overflow += 1
        self._events.append(FrameResult(self.counters.frames - 1, now, FrameAction.DROP, FrameDrop.OVERFLOW))

    # -- the host's commands ------------------------------------------------

    def revoke_buffer(self, association: int, stream_id: int, qn: int, msn: int) -> bool:
        """Take back the buffer posted with `msn`; False when it is no longer posted."""
        return self.sinks[(association, stream_id)].revoke_buffer(qn, msn) is not None

    def reset_queue(self, association: int, stream_id: int, qn: int) -> None:
        """Take back every buffer of the queue; its next post takes MSN 1."""
        self.sinks[(association, stream_id)].reset_queue(qn)

    def post_buffer(self, association: int, stream_id: int, qn: int, host_address: int, length: int) -> int:
        """Post a buffer on the queue; returns its MSN."""
        return self.sinks[(association, stream_id)].post_buffer(qn, host_address, length)

    def rearm_stream(self, association: int, stream_id: int, first_ssn: int | None = None) -> None:
        """The stream's row is written again: its error is cleared, its buffers stay posted, the
        records still waiting are dropped and delivery restarts at `first_ssn` (default: the
        configured one)."""
        key = (association, stream_id)
        first = self._first_ssn[key] if first_ssn is None else first_ssn
        self._first_ssn[key] = first
        self.sinks[key].rearm(first)
        self.reports_discarded += len(self._waiting[key])
        self._waiting[key].clear()

    def write_sack(self, association: int, cumulative_tsn: int, delay_ticks: int, window: int, held_bytes: int,
                   enabled: bool, peer_sacks: bool = False) -> None:
        """The host writes the acknowledgement unit's row (`abi.rx.sack_row_layout`): with `enabled` the engine
        SACKs the association's DATA from now on (its ack records no longer reach the host); with `peer_sacks`
        the peer's SACK chunks go to the transmit engine's transport unit (`FrameResult.peer_sacks`)."""
        self.sack.reset(association, cumulative_tsn, delay_ticks, window=window, held_bytes=held_bytes,
                        enabled=enabled)
        if peer_sacks:
            self._peer_sack_rows.add(association)
        else:
            self._peer_sack_rows.discard(association)
        if enabled:
            self._engine_sacks.add(association)
        else:
            self._engine_sacks.discard(association)

    def flush_sack(self, association: int) -> None:
        """The host's flush write of the SACK row (`abi.rx.sack_row_layout` ``flush``): the SACK the
        association owes goes to the transmit engine now (`next_sacks`); nothing else of the row changes."""
        self._sacks += self.sack.flush(association)

    def next_sacks(self) -> list[SackRecord]:
        """The SACKs the unit sent since the last call (by frames and timers), in order."""
        sacks, self._sacks = self._sacks, []
        return sacks

    def write_association(self, entry: AssociationEntry, valid: bool = True) -> None:
        """The host writes association row ``entry.index``: ``entry`` from now on, or no association when
        not ``valid`` (inbound packets for it then go to the host as NO_ASSOCIATION)."""
        self._associations.pop(entry.index, None)
        self._endpoints.pop(entry.index, None)
        if valid:
            self._associations[entry.index] = entry
            self._endpoints[entry.index] = (entry.local_port, entry.peer_port, ipaddress.IPv4Address(entry.peer_ip))

    def write_region(self, index: int, entry: RegionEntry | None) -> None:
        """The host writes region row ``index`` (STag = index << ``config.key_bits`` | key): ``entry``, or
        None to revoke the STag the row held (RFC 5041 8.2). An entry whose STag names another row is refused
        (ValueError): the engine's row keeps only the key."""
        if entry is not None and entry.stag >> self.config.key_bits != index:
            raise ValueError(f"STag {entry.stag:#x} is not of region row {index} "
                             f"(STag = row << {self.config.key_bits} | key)")
        held = self._region_rows.pop(index, None)
        if held is not None:
            self.table.deregister(held)
        if entry is not None:
            self._region_rows[index] = entry.stag
            self.table.register(MemoryRegion(entry.stag, ProtectionDomain(entry.pd), entry.base_to, entry.length,
                                             entry.access, entry.host_address, stream=entry.stream))

    def write_stream(self, entry: StreamEntry, valid: bool = True) -> None:
        """The host writes the stream row: armed in ``entry.pd`` from ``entry.first_ssn`` (its error cleared,
        its waiting records dropped, its posted buffers kept, as `rearm_stream`), or not armed when not
        ``valid`` (its segments are NO_STREAM; its buffers stay posted until revoked)."""
        key = (entry.association, entry.stream_id)
        if key not in self.sinks:
            self.sinks[key] = DdpSink(pd=ProtectionDomain(entry.pd), memory_table=self.table, host_memory=self._bus,
                                      stream_id=key, queues=(0, 1, 2), tagged_access=placement_access,
                                      ulp_check=self._read_request_check(key) if self.read_responder else _rdmap_check,
                                      first_sequence=entry.first_ssn, window=SEQUENCE_WINDOW,
                                      unbuffered_queues=(QueueNumber.READ_REQUEST,) if self.read_responder else ())
            self._first_ssn[key] = entry.first_ssn
            self._waiting[key] = {}
        else:
            self.sinks[key].pd = ProtectionDomain(entry.pd)
            self.rearm_stream(entry.association, entry.stream_id, entry.first_ssn)
        if valid:
            self._armed.add(key)
        else:
            self._armed.discard(key)

    def refuse_writes(self, address: int, length: int) -> None:
        """From now on host memory answers writes to [address, address + length) with an error."""
        self._bus.refused.append((address, address + length))

    @property
    def reports_waiting(self) -> int:
        """Records of accepted segments waiting for an earlier DDP-SSN of their stream."""
        return sum(len(waiting) for waiting in self._waiting.values())

    def next_events(self) -> list[FrameResult]:
        """The results of the frames received since the last call, in frame order."""
        events, self._events = self._events, []
        return events

    def data_to_send(self, now: float) -> list[bytes]:
        """Nothing: the receive engine passes frames to the host, it never transmits."""
        return []

    def next_timeout(self) -> float | None:
        """When the next delayed SACK is due (its tick's time), or None."""
        deadline = self.sack.next_deadline()
        return None if deadline is None else tick_time(deadline)

    def handle_timeout(self, now: float) -> None:
        """The delayed SACKs due by `now` (`next_sacks`)."""
        self._sacks += self.sack.tick(ticks_at(now))

    def set_addresses(self, local_mac: bytes, local_ip: str) -> None:
        """The engine's own MAC and IPv4 address, as the host writes its configuration words."""
        self.config = replace(self.config, local_mac=local_mac, local_ip=local_ip)
        self._local_ip = ipaddress.IPv4Address(local_ip)

    # -- frame stage ------------------------------------------------------

    def _classify(self, frame: bytes, result: FrameResult) -> bytes:
        """Apply the frame-stage rules in order (module docstring); fills in `result` and
        returns the SCTP packet of a delivered frame."""
        def decide(action: FrameAction, reason: FrameException | FrameDrop) -> bytes:
            result.action, result.reason = action, reason
            return b""

        destination = ethernet_destination(frame)
        if destination is not None and destination != self.config.local_mac:
            return decide(FrameAction.EXCEPTION, FrameException.NOT_LOCAL_MAC)
        try:
            ethernet = EthernetHeader.decode(frame)
        except DecodeError:
            return decide(FrameAction.EXCEPTION, FrameException.NOT_IPV4)
        if ethernet.ethertype != ETHERTYPE_IPV4:
            return decide(FrameAction.EXCEPTION, FrameException.NOT_IPV4)
        datagram = frame[EthernetHeader.LENGTH :]
        version_ihl = ipv4_version_and_ihl(datagram)
        if version_ihl is not None and version_ihl[0] != 4:
            return decide(FrameAction.EXCEPTION, FrameException.NOT_IPV4)
        if len(datagram) < Ipv4Header.MIN_LENGTH:
            return decide(FrameAction.DROP, FrameDrop.LENGTH)
        if version_ihl[1] * 4 != Ipv4Header.MIN_LENGTH:
            return decide(FrameAction.EXCEPTION, FrameException.IP_OPTIONS)
        ip = Ipv4Header.decode(datagram, verify=False, check_total_length=False)
        if not ip.checksum_ok:
            return decide(FrameAction.DROP, FrameDrop.IP_CHECKSUM)
        if ip.is_fragment:
            return decide(FrameAction.EXCEPTION, FrameException.FRAGMENT)
        if ip.dst != self._local_ip:
            return decide(FrameAction.EXCEPTION, FrameException.NOT_LOCAL_IP)
        try:
            payload = ip.payload_of(datagram)
        except DecodeError:
            return decide(FrameAction.DROP, FrameDrop.LENGTH)
        if ip.protocol == IP_PROTOCOL_UDP and udp_destination_port(payload) == self.config.udp_port:
            try:
                udp = UdpHeader.decode(payload, ip.src, ip.dst, verify=False)  # RFC 6951: the CRC32c protects
            except DecodeError:
                return decide(FrameAction.DROP, FrameDrop.LENGTH)
            sctp = payload[UdpHeader.LENGTH : udp.length]
        elif ip.protocol != IP_PROTOCOL_SCTP:
            return decide(FrameAction.EXCEPTION, FrameException.NOT_SCTP)
        else:
            sctp = payload
        try:
            header = CommonHeader.decode(sctp)
        except DecodeError:
            return decide(FrameAction.DROP, FrameDrop.LENGTH)
        if not checksum_ok(sctp):  # RFC 4960 6.8
            return decide(FrameAction.DROP, FrameDrop.CRC)
        # RFC 4960 8.5.1: the first chunk's type and flags, as far as the packet holds them.
        first = next(walk_chunks(sctp[COMMON_HEADER_LENGTH:]), None)
        first_type = first.chunk_type if first is not None else None
        first_flags = (first.flags or 0) if first is not None else 0
        if first_type == ChunkType.INIT and header.verification_tag == 0:
            return decide(FrameAction.EXCEPTION, FrameException.INIT)
        if first_type in (ChunkType.ABORT, ChunkType.SHUTDOWN_COMPLETE) and first_flags & FLAG_T:
            return decide(FrameAction.EXCEPTION, FrameException.TAG_REFLECTED)
        row = association_row(header.verification_tag)
        association = self._associations.get(row)
        if association is None or self._endpoints[row] != (header.dst_port, header.src_port, ip.src):
            return decide(FrameAction.EXCEPTION, FrameException.NO_ASSOCIATION)
        if header.verification_tag != association.tag:
            return decide(FrameAction.DROP, FrameDrop.TAG)
        result.action, result.association = FrameAction.DELIVER, association.index
        return sctp

    # -- chunk stage --------------------------------------------------------

    def _walk_chunks(self, sctp: bytes, result: FrameResult) -> None:
        index = result.association
        ddp = self._associations[index].ddp

        def to_host(reason: ChunkException, chunk) -> None:
            result.chunks_to_host.append(ChunkToHost(index, reason, chunk.data))

        def fault(kind: ChunkError, tsn: int) -> None:
            result.chunk_faults.append(ChunkFault(index, tsn, kind))

        def ack(chunk, disposition: AckDisposition) -> None:
            user_data = len(chunk.data) - DataChunk.HEADER_LENGTH
            if user_data >= 0:  # RFC 4960 3.3.1: the whole DATA header, TSN included
                end = chunk.offset + (len(chunk.data) + 3) // 4 * 4
                immediate = bool(chunk.data[1] & DataChunk.FLAG_I)
                if index in self._engine_sacks:   # RFC 4960 6.2: the engine's own SACKs
                    sacks = self.sack.chunk(index, chunk.data_tsn, ticks_at(result.time), end >= len(sctp), immediate)
                    result.sacks += sacks
                    self._sacks += sacks
                else:
                    result.acks.append(ChunkAck(index, chunk.data_tsn, disposition, user_data, end >= len(sctp),
                                                immediate))

        for chunk in walk_chunks(sctp[COMMON_HEADER_LENGTH:], COMMON_HEADER_LENGTH):
            if isinstance(chunk, BrokenChunk):
                return fault(_WALK_STOP_ERROR[chunk.reason], 0)
            if chunk.chunk_type == ChunkType.SACK and index in self._peer_sack_rows:
                try:
                    sack = chunk.decode()
                except DecodeError:   # RFC 4960 3.3.4: length 16 + 4 * (blocks + duplicates)
                    self.counters.peer_sacks_malformed += 1
                    continue
                result.peer_sacks.append(PeerSack(index, sack))
                continue
            if chunk.chunk_type != ChunkType.DATA:
                to_host(ChunkException.CONTROL, chunk)
                continue
            if not ddp:
                to_host(ChunkException.NOT_DDP, chunk)
                ack(chunk, AckDisposition.TO_HOST)
                continue
            try:
                data = chunk.decode()
            except DecodeError:  # shorter than the DATA header (RFC 4960 3.3.1)
                fault(ChunkError.TOO_SHORT, chunk.data_tsn or 0)
                continue
            assert isinstance(data, DataChunk)
            if data.ppid == PPID_DDP_SESSION_CONTROL:
                to_host(ChunkException.SESSION_CONTROL, chunk)
                ack(chunk, AckDisposition.TO_HOST)
                continue
            if data.ppid != PPID_DDP_SEGMENT:
                to_host(ChunkException.OTHER_PPID, chunk)
                ack(chunk, AckDisposition.TO_HOST)
                continue
            try:
                user_data = DdpSegmentChunkData.decode(data.user_data)
            except DecodeError:  # no room for the DDP-SSN (RFC 5043 5.2.2)
                fault(ChunkError.TOO_SHORT, data.tsn)
                ack(chunk, AckDisposition.REFUSED)
                continue
            if not data.unordered:
                fault(ChunkError.ORDERED, data.tsn)  # RFC 5043 10
                ack(chunk, AckDisposition.REFUSED)
            elif not (data.beginning and data.ending):
                fault(ChunkError.FRAGMENTED, data.tsn)  # RFC 5043 9
                ack(chunk, AckDisposition.REFUSED)
            else:
                ack(chunk, AckDisposition.SEGMENT)
                self._segment(index, data.stream_id, data.tsn, user_data.ddp_ssn, user_data.segment, result)

    # -- DDP stage --------------------------------------------------------------

    def _segment(self, association: int, stream_id: int, tsn: int, ddp_ssn: int, raw: bytes,
                 result: FrameResult) -> None:
        """Decide one segment: its verdict joins `result.arrivals`; the records it releases (itself
        unless ACCEPTED, then the ACCEPTED ones delivered in DDP-SSN order) join `result.segments`."""
        verdict = self._decide(association, stream_id, tsn, ddp_ssn, raw)
        result.arrivals.append(verdict)
        key = (association, stream_id)
        if verdict.status is not SegmentStatus.ACCEPTED:
            result.segments.append(verdict)
            return
        sink, waiting = self.sinks[key], self._waiting[key]
        waiting[ddp_ssn] = verdict
        # Every waiting DDP-SSN now behind the delivery point was delivered, in DDP-SSN order.
        point = sink.delivery_point
        delivered = sorted((s for s in waiting if (point - 1 - s) & 0xFFFF < 0x8000),
                           key=lambda s: (s - point) & 0xFFFF)
        for ssn in delivered:
            record = waiting.pop(ssn)
            if self.read_responder and _is_read_request(record):   # RFC 5040 5.5: answered in request order
                result.read_responses.append(ReadResponseRequest(
                    record.association, record.stream_id, record.host_address or 0, record.message_length,
                    record.stag, record.to, record.msn))
                continue
            if report_withheld(ReportKind.SEGMENT, record.status.value, record.tagged, record.last, record.qn,
                               self.segment_reports):
                self.reports_withheld += 1
            else:
                result.segments.append(record)

    def _read_request_check(self, key: tuple[int, int]):
        """The stream's ULP check with the read responder: the RDMAP header (RFC 5040 4.1, 4.2), then a Read
        Request's form and Data Source (module docstring; RFC 5040 4.4, 5.2, 7.2)."""
        def check(segment: DdpSegment):
            problem = header_error(segment.header)
            if problem is not None or not _read_request_header(segment.header):
                return problem
            header = segment.header
            if not header.last or header.mo != 0 or len(segment.payload) != READ_REQUEST_LENGTH:
                return RdmapError.OPERATION_UNSPECIFIED
            request = ReadRequest.decode(segment.payload)
            fault = self.table.check_tagged(request.source_stag, request.source_to, request.size, key,
                                            self.sinks[key].pd, Access.REMOTE_READ)
            return None if fault is None else fault.rdmap_error
        return check

    def _decide(self, association: int, stream_id: int, tsn: int, ddp_ssn: int, raw: bytes) -> SegmentVerdict:
        fields = _header_fields(raw, self.read_responder)
        common = dict(association=association, stream_id=stream_id, tsn=tsn, ddp_ssn=ddp_ssn, **fields)
        sink = self.sinks.get((association, stream_id))
        if sink is None or (association, stream_id) not in self._armed:
            return SegmentVerdict(status=SegmentStatus.NO_STREAM, **common)
        if sink.failed:
            return SegmentVerdict(status=SegmentStatus.DROPPED, **common)
        if sink.sequence_seen(ddp_ssn):
            return SegmentVerdict(status=SegmentStatus.DUPLICATE, **common)
        self._bus.failed = False
        events = sink.receive(raw, ddp_ssn)
        address = None
        for event in events:
            if isinstance(event, OutOfWindow):
                return SegmentVerdict(status=SegmentStatus.INVALID_SSN, **common)
            if isinstance(event, SinkError):
                return SegmentVerdict(status=SegmentStatus.ERROR, error=event.number, **common)
            if isinstance(event, Placed):
                address = event.address
        # RFC 5041 5.4: an untagged message's length is MO + the payload length of its last segment.
        message_length = (fields["mo"] + fields["payload_length"]
                          if not fields["tagged"] and fields["last"] else None)
        if self.read_responder and _read_request_fields(fields):
            # RFC 5040 4.4: the Data Source, checked by the sink's ULP check, translated for the response.
            request = ReadRequest.decode(raw[UNTAGGED_HEADER_LENGTH:])
            message_length, address = request.size, None
            if request.size:
                address = self.table.lookup(request.source_stag).host_address(request.source_to)
        if self._bus.failed:
            failure = sink.local_failure(raw)
            return SegmentVerdict(status=SegmentStatus.ERROR, error=failure.number, dma_error=True,
                                  host_address=address, message_length=message_length, **common)
        return SegmentVerdict(status=SegmentStatus.ACCEPTED, host_address=address,
                              message_length=message_length, **common)


class _HostBus:
    """Host memory as the engine's bus sees it: writes into a refused range are not done and
    mark the write as failed (an AXI write response other than OKAY)."""

    def __init__(self, memory: SparseMemory) -> None:
        self.memory = memory
        self.refused: list[tuple[int, int]] = []
        self.failed = False

    def write(self, address: int, data: bytes) -> None:
        end = address + len(data)
        cuts = sorted({address, end} | {edge for start, stop in self.refused for edge in (start, stop)
                                         if address < edge < end})
        for start, stop in zip(cuts, cuts[1:]):
            if any(low <= start and stop <= high for low, high in self.refused):
                self.failed = True
            else:
                self.memory.write(start, data[start - address : stop - address])

    def read(self, address: int, length: int) -> bytes:
        return self.memory.read(address, length)


def _rdmap_check(segment: DdpSegment):
    return header_error(segment.header)


def _read_request_header(header) -> bool:
    """Untagged, QN 1, RDMAP opcode Read Request (RFC 5040 4.2, 4.4): whatever else the header says."""
    return (not header.tagged and header.qn == QueueNumber.READ_REQUEST
            and rdmap_control_of(header).opcode == Opcode.RDMA_READ_REQUEST)


def _read_request_fields(fields: dict) -> bool:
    return (not fields["tagged"] and fields["qn"] == QueueNumber.READ_REQUEST
            and fields["opcode"] == Opcode.RDMA_READ_REQUEST)


def _is_read_request(record: SegmentVerdict) -> bool:
    return record.status is SegmentStatus.ACCEPTED and not record.tagged and record.qn == QueueNumber.READ_REQUEST \
        and record.opcode == Opcode.RDMA_READ_REQUEST


def _header_fields(raw: bytes, read_responder: bool = False) -> dict:
    """The verdict's header fields (RFC 5041 4.1-4.3, RFC 5040 4.1). A segment shorter than its
    header reports the fields the bytes hold, the missing bytes read as zero, and no payload. With the
    read responder a Read Request's `stag` and `to` are its SinkSTag and SinkTO (RFC 5040 4.4), as far as
    the segment holds them."""
    header = decode_header(raw.ljust(UNTAGGED_HEADER_LENGTH, b"\0"))
    fields = {"tagged": header.tagged, "last": header.last, "opcode": rdmap_control_of(header).opcode,
              "payload_length": max(len(raw) - header.length, 0), "invalidate_stag": invalidate_stag_of(header)}
    if header.tagged:
        return fields | {"stag": header.stag, "to": header.to}
    fields |= {"qn": header.qn, "msn": header.msn, "mo": header.mo}
    if read_responder and _read_request_header(header):
        body = raw[UNTAGGED_HEADER_LENGTH:UNTAGGED_HEADER_LENGTH + READ_REQUEST_LENGTH]
        body = body.ljust(READ_REQUEST_LENGTH, b"\0")
        request = ReadRequest.decode(body)
        fields |= {"stag": request.sink_stag, "to": request.sink_to}
    return fields
