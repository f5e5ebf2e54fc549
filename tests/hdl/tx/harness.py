"""The transmit engine in Amaranth's simulator, and the frames the golden model sends for the same work.

:func:`model_frames` builds the expected frames from the model only:
``model.ddp.source.DdpSource`` segments each local message (RFC 5041 5.2) with
the RDMAP control field from ``model.rdmap.messages``; a Read Response comes
from the model's responder (:class:`ModelResponder`: an ``RdmapEndpoint``
that receives the Read Request, checks the Data Source region and IRD, and
hands over its response's segments); a control request's packet is the
model's ``SctpPacket`` of the chunks the test wrote into memory, or of one
``DataChunk`` (PPID 17) of its session-control message; each segment goes into a
``DdpSegmentChunkData`` (DDP-SSN), a ``DataChunk`` (U = 1, PPID 16), an
``SctpPacket`` (CRC32c) and ``build_frame`` (Ethernet, IPv4, optionally UDP
with checksum 0, RFC 6951 5). :func:`simulate` runs :class:`hdl.tx.engine.TxEngine`
on the same work and Read Requests against
:class:`~tests.hdl.tx.axi_read_memory.ReadMemory`.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass, field
from itertools import accumulate

from amaranth.sim import Simulator
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.sctp import SCTP, SCTPChunkData

from hdl.abi import (
    ControlOpcode, TsnOpcode, WorkOpcode, completion_layout, control_request_layout, read_response_layout,
    tsn_request_layout, work_request_layout,
)
from hdl.stream.simulation import Pace, stream_put
from hdl.tx.engine import TxEngine
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment, UntaggedHeader
from model.ddp.source import DdpSource
from model.net.frames import build_frame
from model.rdmap.endpoint import RdmapEndpoint
from model.rdmap.messages import Opcode, QueueNumber, ReadRequest, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL, DataChunk, SctpPacket, encode_chunks
from tests.hdl.tx.axi_read_memory import ReadMemory

LOCAL_MAC = bytes.fromhex("02000000000a")
LOCAL_IP = ipaddress.IPv4Address("10.0.0.2")
UDP_PORT = 9899
STREAM_IDS = 4
PAGE_END = 0x1_0000_0000   # payloads around a 4 GiB boundary: 64-bit addresses, 4 KiB crossings


@dataclass
class Association:
    index: int
    mulpdu: int
    next_tsn: int
    peer_mac: bytes = bytes.fromhex("02000000000b")
    peer_ip: str = "10.0.0.1"
    local_port: int = 5000
    peer_port: int = 6000
    tag: int = 0x1234ABCD
    udp: bool = False
    peer_udp_port: int = 9899


@dataclass
class Work:
    opcode: WorkOpcode
    association: int
    stream_id: int
    host_address: int
    length: int
    stag: int = 0
    to: int = 0
    sink_stag: int = 0
    sink_to: int = 0
    invalidate_stag: int = 0
    wr_id: int = 0


@dataclass(frozen=True)
class TsnRequest:
    """A record on ``s_axis_tsn`` (or back on ``m_axis_tsn_refused``)."""
    opcode: TsnOpcode
    association: int
    tsn: int


def data_tsn(frame: bytes) -> tuple[int, int] | None:
    """(SCTP source port, TSN) of a frame whose first chunk is DATA, as a peer reads it (RFC 4960 3.3.1)."""
    start = 14 + 20 + (8 if frame[23] == 17 else 0)
    if frame[start + 12] != 0:
        return None
    return int.from_bytes(frame[start:start + 2], "big"), int.from_bytes(frame[start + 16:start + 20], "big")


@dataclass
class ReadResponse:
    """An inbound RDMA Read Request to answer (a record on ``s_axis_rr``), its Data Source at ``host_address``."""
    association: int
    stream_id: int
    host_address: int
    length: int
    sink_stag: int = 0
    sink_to: int = 0
    msn: int = 1

    def record(self) -> dict:
        return {"association": self.association, "stream_id": self.stream_id, "host_address": self.host_address,
                "length": self.length, "sink_stag": self.sink_stag, "sink_to": self.sink_to, "msn": self.msn}


@dataclass
class Control:
    """A control request (a record on ``s_axis_ctl``): PACKET with ``chunks`` (model chunk objects) and
    verification tag ``tag``, or SESSION_CONTROL with ``message``, both read from ``host_address``."""
    opcode: ControlOpcode
    association: int
    host_address: int
    chunks: tuple = ()
    tag: int = 0
    message: bytes = b""
    stream_id: int = 0
    wr_id: int = 0

    @property
    def body(self) -> bytes:
        """The bytes the engine reads: the chunks as the model bundles them, or the message."""
        return encode_chunks(self.chunks) if self.opcode is ControlOpcode.PACKET else self.message

    @property
    def length(self) -> int:
        return len(self.body)

    def record(self) -> dict:
        return {"opcode": int(self.opcode), "wr_id": self.wr_id, "association": self.association,
                "stream_id": self.stream_id,
                "tag": self.tag, "host_address": self.host_address, "length": self.length}


def place(memory: ReadMemory, controls: list) -> None:
    """Write each control request's bytes into ``memory`` at its ``host_address``."""
    data = bytearray(memory.data)
    for control in controls:
        start = control.host_address - memory.base
        data[start:start + control.length] = control.body
    memory.data = bytes(data)


#: The test memory as one region at the model's responder: the STag and TO its Read Requests name.
SOURCE_STAG = 0x00C0FF01
SOURCE_BASE_TO = 0x7000_0000_0000


class ModelResponder:
    """The model's responder of one DDP stream: a ``model.rdmap.endpoint.RdmapEndpoint`` whose host memory
    is ``memory``, registered whole as one REMOTE_READ region. :meth:`request` delivers the Read Request
    a record stands for (the Data Source named by STag and TO, the endpoint translates it) and returns
    the endpoint's events (a Terminate past IRD); :meth:`handed_over` takes the segments it queued."""

    def __init__(self, mulpdu: int, stream_id: int, memory: ReadMemory, ird: int = 4):
        pd, table, host = ProtectionDomain(1), MemoryTable(), SparseMemory()
        host.write(memory.base, memory.data)
        table.register(MemoryRegion(SOURCE_STAG, pd, SOURCE_BASE_TO, len(memory.data), Access.REMOTE_READ,
                                    memory.base))
        self.endpoint = RdmapEndpoint(pd=pd, memory_table=table, host_memory=host, stream_id=stream_id,
                                      mulpdu=mulpdu, ird=ird)
        self.base, self.msn = memory.base, 1

    def request(self, response: ReadResponse) -> list:
        request = ReadRequest(response.sink_stag, response.sink_to, response.length, SOURCE_STAG,
                              SOURCE_BASE_TO + response.host_address - self.base)
        header = UntaggedHeader(True, untagged_rsvd_ulp(Opcode.RDMA_READ_REQUEST), QueueNumber.READ_REQUEST,
                                self.msn, 0)
        self.endpoint.receive(DdpSegment(header, request.encode()).encode(), self.msn - 1)
        self.msn += 1
        return self.endpoint.next_events()

    def handed_over(self) -> list[bytes]:
        return self.endpoint.data_to_send()


def model_messages(associations: list[Association], first_ssn: dict, messages: list, memory: ReadMemory) -> list:
    """The frames the model sends for each of ``messages`` (``Work``, ``ReadResponse`` or ``Control``, in the
    order they go out); ``first_ssn`` maps (association, stream id) to its first DDP-SSN."""
    by_index = {a.index: a for a in associations}
    sources, responders, ssn = {}, {}, dict(first_ssn)
    tsn = {a.index: a.next_tsn for a in associations}
    out = []
    for message in messages:
        association = by_index[message.association]
        key = (message.association, message.stream_id)
        if isinstance(message, Control):
            if message.opcode is ControlOpcode.PACKET:
                packet = SctpPacket(association.local_port, association.peer_port, message.tag, message.chunks)
            else:
                chunk = DataChunk(tsn[message.association], message.stream_id, 0, PPID_DDP_SESSION_CONTROL,
                                  message.message, unordered=True)
                tsn[message.association] = (tsn[message.association] + 1) & 0xFFFFFFFF
                packet = SctpPacket(association.local_port, association.peer_port, association.tag, [chunk])
            out.append([frame_of(packet.encode(), association)])
            continue
        if isinstance(message, ReadResponse):
            responder = responders.setdefault(key, ModelResponder(association.mulpdu, message.stream_id, memory))
            assert responder.request(message) == [], "the model refused a Read Request"
            segments = responder.handed_over()
        else:
            segments = [segment.encode() for segment in
                        local_segments(sources.setdefault(key, DdpSource(association.mulpdu)), message, memory)]
        frames = []
        for segment in segments:
            user_data = DdpSegmentChunkData(ssn[key], segment).encode()
            ssn[key] = (ssn[key] + 1) & 0xFFFF
            chunk = DataChunk(tsn[message.association], message.stream_id, 0, PPID_DDP_SEGMENT, user_data,
                              unordered=True)
            tsn[message.association] = (tsn[message.association] + 1) & 0xFFFFFFFF
            packet = SctpPacket(association.local_port, association.peer_port, association.tag, [chunk]).encode()
            frames.append(frame_of(packet, association))
        out.append(frames)
    return out


def frame_of(packet: bytes, association: Association) -> bytes:
    """The model's Ethernet frame of an SCTP packet: IPv4, or UDP with checksum 0 (RFC 6951 5)."""
    return build_frame(packet, LOCAL_MAC, association.peer_mac, LOCAL_IP, association.peer_ip, udp=association.udp,
                       src_port=UDP_PORT, dst_port=association.peer_udp_port, udp_checksum=False)


def local_segments(source: DdpSource, work: Work, memory: ReadMemory) -> list:
    """The DDP segments of a local work request (RFC 5041 5.2) with its RDMAP control field (RFC 5040 4.1)."""
    opcode = Opcode(int(work.opcode))
    start = work.host_address - memory.base
    payload = memory.data[start:start + work.length]
    if opcode is Opcode.RDMA_WRITE:
        return source.tagged_message(payload, work.stag, work.to, tagged_rsvd_ulp(opcode))
    if opcode is Opcode.RDMA_READ_REQUEST:
        request = ReadRequest(work.sink_stag, work.sink_to, work.length, work.stag, work.to).encode()
        return source.untagged_message(request, QueueNumber.READ_REQUEST, untagged_rsvd_ulp(opcode))
    invalidate = work.invalidate_stag if opcode.carries_invalidate_stag else 0
    return source.untagged_message(payload, QueueNumber.SEND, untagged_rsvd_ulp(opcode, invalidate))


def model_frames(associations: list[Association], first_ssn: dict, messages: list, memory: ReadMemory) -> list[bytes]:
    """:func:`model_messages`, one list of frames."""
    return [frame for frames in model_messages(associations, first_ssn, messages, memory) for frame in frames]


@dataclass
class Run:
    frames: list            # bytes of each frame on m_axis
    beat_cycles: list       # cycle of each m_axis beat
    first_work_cycle: int   # cycle the first work request was taken
    refused: list           # ReadResponse of each record on m_axis_rr_refused
    tsn_refused: list = field(default_factory=list)    # TsnRequest of each record on m_axis_tsn_refused
    completions: list = field(default_factory=list)    # (wr_id, opcode, association, status, ACKs taken before)
    most_unacknowledged: int = 0   # the most DATA chunks of a row on the wire above the last ACK taken
    acks_taken: int = 0


def simulate(width: int, associations: list[Association], first_ssn: dict, works: list[Work], memory: ReadMemory,
             frame_count: int, *, responses: list = (), controls: list = (), ird: int = 4, out_stall: float = 0.0, work_gap: float = 0.0,
             response_gap: float = 0.0, seed: int = 0, buffer_bytes: int = 8192, network_hold: int = 0,
             peer_delay: int = 0, response_after_frames: list | None = None, refused_count: int = 0,
             refused_ready: float = 1.0, control_after_frames: list | None = None,
             work_after_frames: list | None = None, ring_tsns: int = 64, tsn_requests: list = (),
             tsn_after_frames: list | None = None, acknowledge_after: int | None = 0,
             completion_count: int = 0) -> Run:
    """Run the engine until ``frame_count`` frames and ``refused_count`` refusals left (or a cycle budget ran
    out), then 30 cycles more.

    Work requests go to ``s_axis_wr`` once the tables are written, each (with ``work_after_frames``) once
    that many frames have left, ``responses`` (Read Requests) to
    ``s_axis_rr`` ``peer_delay`` cycles later, each (with ``response_after_frames``) once that many frames
    have left; ``controls`` go to ``s_axis_ctl`` as soon as the tables are written, each (with
    ``control_after_frames``) once that many frames have left. The network takes nothing for the first ``network_hold`` cycles; ``m_axis_rr_refused`` is
    ready on a random ``refused_ready`` of the cycles. ``tsn_requests`` go to ``s_axis_tsn``, each (with
    ``tsn_after_frames``) once that many frames have left; unless ``acknowledge_after`` is None the peer
    also ACKs each DATA chunk that many cycles after it left (between those requests), the ACKs due at once
    taken together as one (cumulative, RFC 4960 6.2.1).
    """
    dut = TxEngine(width, associations=2, stream_ids=STREAM_IDS, ird=ird, buffer_bytes=buffer_bytes,
                   ring_tsns=ring_tsns)
    rng = random.Random(seed)
    layout, record_layout, control_layout = work_request_layout(), read_response_layout(), control_request_layout()
    run = Run([], [], -1, [])
    clock = [0]
    tables_written = [False]

    async def offer(ctx, port, bits, pace):
        ctx.set(port.tdata, bits)
        ctx.set(port.tlast, 1)
        ctx.set(port.tkeep, -1)
        for _ in range(pace.cycles()):
            ctx.set(port.tvalid, 0)
            await ctx.tick()
        ctx.set(port.tvalid, 1)
        while True:
            _, _, ready = await ctx.tick().sample(port.tready)
            if ready:
                break

    async def host(ctx):
        ctx.set(dut.local_mac, int.from_bytes(LOCAL_MAC, "big"))
        ctx.set(dut.local_ip, int(LOCAL_IP))
        ctx.set(dut.udp_port, UDP_PORT)
        for a in associations:
            await stream_put(ctx, dut.association_write, {
                "index": a.index, "peer_mac": int.from_bytes(a.peer_mac, "big"),
                "peer_ip": int(ipaddress.IPv4Address(a.peer_ip)), "local_port": a.local_port,
                "peer_port": a.peer_port, "tag": a.tag, "udp": a.udp, "peer_udp_port": a.peer_udp_port,
                "mulpdu": a.mulpdu, "next_tsn": a.next_tsn})
        for (association, stream_id), ssn in first_ssn.items():
            await stream_put(ctx, dut.stream_write, {"index": association * STREAM_IDS + stream_id,
                                                     "first_ssn": ssn})
        await ctx.tick().repeat(8)   # the IPv4 sums of the rows settle
        tables_written[0] = True
        pace = Pace(work_gap, seed=rng)
        for index, work in enumerate(works):
            while work_after_frames and len(run.frames) < work_after_frames[index]:
                ctx.set(dut.s_axis_wr.tvalid, 0)
                await ctx.tick()
            bits = layout.const({
                "opcode": int(work.opcode), "association": work.association, "stream_id": work.stream_id,
                "host_address": work.host_address, "length": work.length, "stag": work.stag, "to": work.to,
                "sink_stag": work.sink_stag, "sink_to": work.sink_to,
                "invalidate_stag": work.invalidate_stag, "wr_id": work.wr_id}).as_bits()
            await offer(ctx, dut.s_axis_wr, bits, pace)
            if index == 0:
                run.first_work_cycle = clock[0]
        ctx.set(dut.s_axis_wr.tvalid, 0)

    async def peer(ctx):
        while not tables_written[0]:
            await ctx.tick()
        await ctx.tick().repeat(peer_delay + 1)
        pace = Pace(response_gap, seed=random.Random(seed + 1))
        for index, response in enumerate(responses):
            while response_after_frames and len(run.frames) < response_after_frames[index]:
                ctx.set(dut.s_axis_rr.tvalid, 0)
                await ctx.tick()
            await offer(ctx, dut.s_axis_rr, record_layout.const(response.record()).as_bits(), pace)
        ctx.set(dut.s_axis_rr.tvalid, 0)

    async def controller(ctx):
        while not tables_written[0]:
            await ctx.tick()
        for index, control in enumerate(controls):
            while control_after_frames and len(run.frames) < control_after_frames[index]:
                ctx.set(dut.s_axis_ctl.tvalid, 0)
                await ctx.tick()
            await offer(ctx, dut.s_axis_ctl, control_layout.const(control.record()).as_bits(), Pace(0))
        ctx.set(dut.s_axis_ctl.tvalid, 0)

    by_port = {a.local_port: a.index for a in associations}
    acks = []            # (cycle due, TsnRequest)
    acked = {}           # association: TSN of the last ACK taken
    sent_tsns = {}       # association: TSNs seen on the wire

    async def sacker(ctx):
        port = dut.s_axis_tsn
        requests = list(tsn_requests)
        while True:
            if requests and len(run.frames) >= (tsn_after_frames[0] if tsn_after_frames else 0):
                request = requests.pop(0)
                if tsn_after_frames:
                    tsn_after_frames.pop(0)
            elif acks and acks[0][0] <= clock[0]:
                request = acks.pop(0)[1]
                while acks and acks[0][0] <= clock[0] and acks[0][1].association == request.association:
                    request = acks.pop(0)[1]
            else:
                ctx.set(port.tvalid, 0)
                await ctx.tick()
                continue
            await offer(ctx, port, tsn_request_layout().const(
                {"opcode": int(request.opcode), "association": request.association, "tsn": request.tsn}).as_bits(),
                Pace(0))
            ctx.set(port.tvalid, 0)
            if request.opcode is TsnOpcode.ACK:
                acked[request.association] = request.tsn
                run.acks_taken += 1

    async def tsn_outputs(ctx):
        layouts = {"refused": tsn_request_layout(), "completion": completion_layout()}
        for port in (dut.m_axis_tsn_refused, dut.m_axis_completion):
            ctx.set(port.tready, 1)
        while True:
            _, _, refused_valid, refused_bits, done_valid, done_bits = await ctx.tick().sample(
                dut.m_axis_tsn_refused.tvalid, dut.m_axis_tsn_refused.tdata,
                dut.m_axis_completion.tvalid, dut.m_axis_completion.tdata)
            if refused_valid:
                record = layouts["refused"].from_bits(refused_bits)
                run.tsn_refused.append(TsnRequest(TsnOpcode(int(record.opcode)), int(record.association),
                                                  int(record.tsn)))
            if done_valid:
                record = layouts["completion"].from_bits(done_bits)
                run.completions.append((int(record.wr_id), int(record.opcode), int(record.association),
                                        int(record.status), run.acks_taken))

    def on_frame(frame: bytes) -> None:
        found = data_tsn(frame)
        if found is None or found[0] not in by_port:
            return
        association, tsn = by_port[found[0]], found[1]
        seen = sent_tsns.setdefault(association, set())
        seen.add(tsn)
        if association in acked:
            run.most_unacknowledged = max(run.most_unacknowledged,
                                          sum((t - acked[association] - 1) % (1 << 32) < (1 << 31) for t in seen))
        else:
            run.most_unacknowledged = max(run.most_unacknowledged, len(seen))
        if acknowledge_after is not None:
            acks.append((clock[0] + acknowledge_after, TsnRequest(TsnOpcode.ACK, association, tsn)))

    async def refusals(ctx):
        port = dut.m_axis_rr_refused
        pace = random.Random(seed + 2)
        while True:
            ready = pace.random() < refused_ready
            ctx.set(port.tready, ready)
            _, _, valid, bits, last = await ctx.tick().sample(port.tvalid, port.tdata, port.tlast)
            if valid and ready:
                assert last, "a refused record is one beat"
                record = record_layout.from_bits(bits)
                run.refused.append(ReadResponse(**{name: int(getattr(record, name)) for name in record_layout.members}))

    async def network(ctx):
        current = b""
        axis = dut.m_axis
        while True:
            ready = clock[0] >= network_hold and not (out_stall and rng.random() < out_stall)
            ctx.set(axis.tready, ready)
            _, _, valid, data, keep, last = await ctx.tick().sample(axis.tvalid, axis.tdata, axis.tkeep, axis.tlast)
            clock[0] += 1
            if valid and ready:
                count = bin(keep).count("1")
                assert keep == (1 << count) - 1 and count, f"tkeep {keep:#x}"
                assert last or count == width, "a partial beat before tlast"
                run.beat_cycles.append(clock[0])
                current += data.to_bytes(width, "little")[:count]
                if last:
                    run.frames.append(current)
                    on_frame(current)
                    current = b""

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for process in (host, peer, controller, sacker, tsn_outputs, refusals, network,
                    *memory.processes(dut.m_axi)):
        sim.add_testbench(process, background=True)

    async def watch(ctx):
        messages = [*works, *responses, *controls]
        budget = (2000 + network_hold + peer_delay + 8 * sum(w.length // width + 40 for w in messages)
                  + 200 * frame_count)
        for _ in range(budget):
            if (len(run.frames) >= frame_count and len(run.refused) >= refused_count
                    and len(run.completions) >= completion_count):
                break
            await ctx.tick()
        await ctx.tick().repeat(30)

    sim.add_testbench(watch)
    sim.run()
    return run


def run_against_model(width: int, associations: list[Association], first_ssn: dict, works: list[Work],
                      memory: ReadMemory, *, responses: list = (), controls: list = (), order: list | None = None,
                      peer_window: int | None = None, one_at_a_time: bool = False, extra_frames: int = 0,
                      **options) -> tuple[Run, list[bytes], list]:
    """Simulate ``works``, ``responses`` and ``controls`` and return the run with the model's frames for them,
    the messages going out in ``order`` (needed when there are several kinds). With ``peer_window`` the peer keeps at most that
    many Read Requests of a stream unanswered (its ORD, RFC 6581 9): it sends the next one once the
    frames of the response that many requests back on the stream have left. ``one_at_a_time`` offers each
    work and control request once the frames of every message before it in ``order`` have left; the run
    waits for ``extra_frames`` more frames than the model sends (retransmissions). The third
    list names the message of each expected frame."""
    assert order is not None or sum(map(bool, (works, responses, controls))) <= 1, "the order of the messages"
    order = order if order is not None else [*works, *responses, *controls]
    place(memory, controls)
    per_message = model_messages(associations, first_ssn, order, memory)
    expected = [frame for frames in per_message for frame in frames]
    sources = [message for message, frames in zip(order, per_message) for _ in frames]
    if one_at_a_time:
        for requests in (works, controls):
            ids = set(map(id, requests))
            assert [id(m) for m in order if id(m) in ids] == list(map(id, requests)), "a port's requests in order"
        before = dict(zip(map(id, order), accumulate([0, *map(len, per_message)])))
        options["work_after_frames"] = [before[id(work)] for work in works]
        options["control_after_frames"] = [before[id(control)] for control in controls]
    if peer_window is not None:
        end_of = {id(message): end for message, end in zip(order, accumulate(map(len, per_message)))}
        after, answered = [], {}
        for response in responses:
            earlier = answered.setdefault((response.association, response.stream_id), [])
            after.append(end_of[id(earlier[-peer_window])] if len(earlier) >= peer_window else 0)
            earlier.append(response)
        options["response_after_frames"] = after
    return simulate(width, associations, first_ssn, works, memory, len(expected) + extra_frames, responses=responses,
                    controls=controls, **options), expected, sources


def random_memory(rng: random.Random, width: int, **pace) -> ReadMemory:
    return ReadMemory(PAGE_END - 0x4000, rng.randbytes(0x8000), width, seed=rng.getrandbits(32), **pace)


def scapy_check(frame: bytes, association: Association, tsn: int | None, *, ppid: int = PPID_DDP_SEGMENT,
                tag: int | None = None, chunk_types: tuple = ()) -> None:
    """scapy's own reading of the frame: addresses, checksums, and one unordered unfragmented DATA chunk of
    TSN ``tsn`` and PPID ``ppid`` with the row's tag, or (``tsn`` None) the ``chunk_types`` with ``tag``."""
    ether = Ether(frame)
    ip = ether[IP]
    assert ip.dst == association.peer_ip and ip.flags == "DF" and ip.ihl == 5
    rebuilt = IP(bytes(ip))
    rebuilt.chksum = None
    assert IP(bytes(rebuilt)).chksum == ip.chksum, "IPv4 header checksum"
    assert ip.len == len(frame) - 14
    if association.udp:
        datagram = ether[UDP]
        assert (datagram.dport, datagram.chksum, datagram.len) == (association.peer_udp_port, 0, ip.len - 20)
        raw = bytes(datagram.payload)
    else:
        assert ip.proto == 132
        raw = bytes(ip.payload)
    recomputed = SCTP(raw)
    recomputed.chksum = None
    assert bytes(recomputed)[8:12] == raw[8:12], "SCTP CRC32c"
    sctp = SCTP(raw)
    assert (sctp.sport, sctp.dport, sctp.tag) == (association.local_port, association.peer_port,
                                                   association.tag if tag is None else tag)
    if tsn is None:
        types, layer = [], sctp.payload
        while layer and hasattr(layer, "type"):
            types.append(layer.type)
            layer = layer.payload
        assert tuple(types) == tuple(chunk_types), f"chunks {types}"
        return
    chunk = sctp[SCTPChunkData]
    assert (chunk.unordered, chunk.beginning, chunk.ending, chunk.proto_id, chunk.tsn) == (1, 1, 1, ppid, tsn)


def check(width, associations, first_ssn, works, memory, *, refused=(), **options) -> Run:
    """Run against the model: the same frames byte for byte, each read by scapy with its TSN in sequence,
    and exactly the ``refused`` Read Requests back on ``m_axis_rr_refused``."""
    run, expected, sources = run_against_model(width, associations, first_ssn, works, memory,
                                               refused_count=len(refused), **options)
    assert len(run.frames) == len(expected)
    for index, (frame, model) in enumerate(zip(run.frames, expected)):
        assert frame == model, f"frame {index}: {frame.hex()} != {model.hex()}"
    tsn = {a.index: a.next_tsn for a in associations}
    by_index = {a.index: a for a in associations}
    for frame, message in zip(run.frames, sources):
        association = by_index[message.association]
        if isinstance(message, Control) and message.opcode is ControlOpcode.PACKET:
            scapy_check(frame, association, None, tag=message.tag,
                        chunk_types=tuple(int(chunk.CHUNK_TYPE) for chunk in message.chunks))
            continue
        session = isinstance(message, Control)
        scapy_check(frame, association, tsn[association.index],
                    ppid=PPID_DDP_SESSION_CONTROL if session else PPID_DDP_SEGMENT)
        tsn[association.index] = (tsn[association.index] + 1) & 0xFFFFFFFF
    assert run.refused == list(refused)
    return run
