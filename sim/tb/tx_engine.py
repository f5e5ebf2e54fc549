"""The transmit engine (:class:`hdl.tx.engine.TxEngine`) in Amaranth's simulator, driven through its ports.

:func:`simulate` writes the association and stream rows, offers work requests
(``s_axis_wr``), inbound Read Requests to answer (``s_axis_rr``), control
requests (``s_axis_ctl``) and the host SCTP's ACKs and RESENDs
(``s_axis_tsn``) as a test or bench paces them, serves ``m_axi`` from a
:class:`~sim.tb.axi_read_memory.ReadMemory`, and records every frame on
``m_axis`` with the cycle of each beat (:class:`Run`). The records
(:class:`Work` and :class:`ReadResponse`, the transmit engine model's
``WorkRequest`` and ``ReadResponseRequest``; :class:`Control`,
:class:`TsnRequest`) are the ABI's (``abi``) as Python values. The tests
(``tests/hdl/tx/harness.py``) compare the frames with the model's;
``rnic bench tx`` (``sim/commands/bench_tx.py``) counts the cycles.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import asdict, dataclass, field

from amaranth.sim import Simulator

from abi.rx import ADDRESS_BITS
from abi.tx import (ControlOpcode, TsnOpcode, completion_layout, control_request_layout, read_response_layout,
                    tsn_request_layout, work_request_layout)
from hdl.layout import struct_layout
from hdl.rx.sack_unit import sack_record_layout
from hdl.stream.simulation import Pace, stream_put
from hdl.tx.engine import TxEngine
from model.engine.tx import ReadResponseRequest as ReadResponse
from model.engine.tx import WorkRequest as Work
from model.sctp.packet import encode_chunks
from sim.tb.axi_read_memory import ReadMemory

LOCAL_MAC = bytes.fromhex("02000000000a")
LOCAL_IP = ipaddress.IPv4Address("10.0.0.2")
UDP_PORT = 9899
STREAM_IDS = 4


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


@dataclass(frozen=True)
class TsnRequest:
    """A record on ``s_axis_tsn`` (or back on ``m_axis_tsn_refused``)."""
    opcode: TsnOpcode
    association: int
    tsn: int


def sack_record(record) -> dict:
    """A :class:`model.engine.sack.SackRecord` as :func:`hdl.rx.sack_unit.sack_record_layout`'s fields (4 Gap
    Ack Blocks, 4 duplicates: unused slots 0)."""
    gaps = list(record.gap_blocks) + [(0, 0)] * (4 - len(record.gap_blocks))
    duplicates = list(record.duplicate_tsns) + [0] * (4 - len(record.duplicate_tsns))
    return {"association": record.association, "cumulative_tsn_ack": record.cumulative_tsn_ack,
            "gap_count": len(record.gap_blocks), "gaps": [{"start": s, "end": e} for s, e in gaps],
            "duplicate_count": len(record.duplicate_tsns), "duplicates": duplicates, "a_rwnd": record.a_rwnd}


def data_tsn(frame: bytes) -> tuple[int, int] | None:
    """(SCTP source port, TSN) of a frame whose first chunk is DATA, as a peer reads it (RFC 4960 3.3.1)."""
    start = 14 + 20 + (8 if frame[23] == 17 else 0)
    if frame[start + 12] != 0:
        return None
    return int.from_bytes(frame[start:start + 2], "big"), int.from_bytes(frame[start + 16:start + 20], "big")


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
    first_response_cycle: int = -1   # cycle the first Read Request record was taken
    frame_cycles: list = field(default_factory=list)   # cycle of each frame's first beat
    tsn_taken: list = field(default_factory=list)      # (cycle, TsnRequest) of each record s_axis_tsn took
    sacks_sent: int = -1       # the engine's counters at the end
    request_frames: int = -1


def simulate(width: int, associations: list[Association], first_ssn: dict, works: list[Work], memory: ReadMemory,
             frame_count: int, *, responses: list = (), controls: list = (), ird: int = 4, out_stall: float = 0.0, work_gap: float = 0.0,
             response_gap: float = 0.0, seed: int = 0, buffer_bytes: int = 8192, network_hold: int = 0,
             peer_delay: int = 0, response_after_frames: list | None = None, refused_count: int = 0,
             refused_ready: float = 1.0, control_after_frames: list | None = None,
             work_after_frames: list | None = None, ring_tsns: int = 64, tsn_requests: list = (),
             tsn_after_frames: list | None = None, acknowledge_after: int | None = 0,
             completion_count: int = 0, work_delay: int = 0, sacks: list = (),
             sack_after_frames: list | None = None, table_associations: int = 2,
             stream_ids: int = STREAM_IDS, address_bits: int = ADDRESS_BITS) -> Run:
    """Run the engine until ``frame_count`` frames and ``refused_count`` refusals left (or a cycle budget ran
    out), then 30 cycles more.

    Work requests go to ``s_axis_wr`` ``work_delay`` cycles after the tables are written, each (with ``work_after_frames``) once
    that many frames have left, ``responses`` (Read Requests) to
    ``s_axis_rr`` ``peer_delay`` cycles later, each (with ``response_after_frames``) once that many frames
    have left; ``controls`` go to ``s_axis_ctl`` as soon as the tables are written, each (with
    ``control_after_frames``) once that many frames have left, and so do ``sacks`` (SACK records,
    :class:`model.engine.sack.SackRecord`) to the ``sacks`` port (with ``sack_after_frames``). The network takes nothing for the first ``network_hold`` cycles; ``m_axis_rr_refused`` is
    ready on a random ``refused_ready`` of the cycles. ``tsn_requests`` go to ``s_axis_tsn``, each (with
    ``tsn_after_frames``) once that many frames have left; unless ``acknowledge_after`` is None the peer
    also ACKs each DATA chunk that many cycles after it left (between those requests), the ACKs due at once
    taken together as one (cumulative, RFC 4960 6.2.1). ``table_associations`` and ``stream_ids`` are the
    engine's tables (``TxEngine``'s ``associations`` and ``stream_ids``); ``address_bits`` its host addresses.
    """
    dut = TxEngine(width, associations=table_associations, stream_ids=stream_ids, ird=ird, buffer_bytes=buffer_bytes,
                   ring_tsns=ring_tsns, address_bits=address_bits)
    rng = random.Random(seed)
    layout, record_layout, control_layout = (struct_layout(work_request_layout()), struct_layout(read_response_layout()),
                                             struct_layout(control_request_layout()))
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
            await stream_put(ctx, dut.stream_write, {"index": association * stream_ids + stream_id,
                                                     "first_ssn": ssn})
        await ctx.tick().repeat(8)   # the IPv4 sums of the rows settle
        tables_written[0] = True
        if work_delay:
            await ctx.tick().repeat(work_delay)
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
            await offer(ctx, dut.s_axis_rr, record_layout.const(asdict(response)).as_bits(), pace)
            if index == 0:
                run.first_response_cycle = clock[0]
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

    async def receive_engine(ctx):
        while not tables_written[0]:
            await ctx.tick()
        for index, record in enumerate(sacks):
            while sack_after_frames and len(run.frames) < sack_after_frames[index]:
                await ctx.tick()
            bits = sack_record_layout().const(sack_record(record)).as_bits()
            await offer(ctx, dut.s_axis_sack, bits, Pace(0))
            ctx.set(dut.s_axis_sack.tvalid, 0)

    by_port = {a.local_port: a.index for a in associations}
    acks = []            # (cycle due, TsnRequest)
    acked = {}           # association: TSN of the last ACK taken
    sent_tsns = {}       # association: TSNs seen on the wire

    async def sacker(ctx):
        port = dut.s_axis_tsn
        requests = list(tsn_requests)
        while not tables_written[0]:
            await ctx.tick()
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
            await offer(ctx, port, struct_layout(tsn_request_layout()).const(
                {"opcode": int(request.opcode), "association": request.association, "tsn": request.tsn}).as_bits(),
                Pace(0))
            ctx.set(port.tvalid, 0)
            run.tsn_taken.append((clock[0], request))
            if request.opcode is TsnOpcode.ACK:
                acked[request.association] = request.tsn
                run.acks_taken += 1

    async def tsn_outputs(ctx):
        layouts = {"refused": struct_layout(tsn_request_layout()), "completion": struct_layout(completion_layout())}
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
                if not current:
                    run.frame_cycles.append(clock[0])
                current += data.to_bytes(width, "little")[:count]
                if last:
                    run.frames.append(current)
                    on_frame(current)
                    current = b""

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for process in (host, peer, controller, receive_engine, sacker, tsn_outputs, refusals, network,
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
        run.sacks_sent, run.request_frames = ctx.get(dut.sacks_sent), ctx.get(dut.request_frames)

    sim.add_testbench(watch)
    sim.run()
    return run
