"""The RNIC top level (hdl/rnic.py) in Amaranth's simulator: both engines behind one register space and one
memory port, its transmit side looped back into its own receive side.

The host's part is played here: the tables go in over ``s_axil`` (the
receive engine's at 0, the transmit engine's at ``TX_REGISTER_BASE``), and
each ack record the receive engine emits becomes an ACK on ``s_axis_tsn``,
as the driver's SCTP turns received TSNs into a SACK and the SACK into a
Cumulative TSN Ack (RFC 4960 6.2). Expected values come from the model
only: the frames of the model's data source (``sim/traffic/tx``), the
records and placements of the model's receive engine for those frames, the
completions RFC 5041 5.4 asks for (one per request once its last chunk is
acknowledged).
"""

import ipaddress
import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.sim import Simulator

from abi.rx import ReportKind, ack_layout, register_map, report_layout
from abi.register_file import PARAMS_OFFSET
from abi.tx import (TX_PARAMS, TX_REGISTER_BASE, CompletionStatus, TsnOpcode, WorkOpcode, completion_layout,
                    tsn_request_layout, tx_register_map, work_request_layout)
from hdl.rnic import Rnic
from model.ddp.memory import Access, SparseMemory
from model.engine.sack import SackUnit
from model.engine.config import AssociationEntry, BufferEntry, RegionEntry, StreamEntry
from model.rnic.offload import AssociationRow, BufferPost, FrameIn, ModelEngine, RegionRow, StreamRow
from sim.tb.axi_lite import axil_read, axil_write
from sim.tb.axi_read_memory import ReadMemory
from sim.tb.axi_write_memory import WriteMemory
from sim.tb.rx_engine_tb import ReportRecord, _compare_acks, _compare_segments, _fields
from sim.tb.tx_engine import LOCAL_IP, LOCAL_MAC, Association, Work
from model.net.frames import Frame
from model.sctp.packet import SctpPacket, decode_chunks
from sim.traffic.tx import model_frames

WIDTH = 8
TAG, MULPDU, FIRST_TSN = 0x1234ABC0, 1434, 0xFFFFFFFE   # the TSN wraps (RFC 4960 1.6) during the run
LOCAL_PORT, PEER_PORT = 5001, 5002
SOURCE_BASE, SINK_BASE, SINK_BYTES = 0x20000, 0x80000, 0x10000
STAG, REGION_INDEX, PD = 0x0133, 1, 7
SEND_BUFFER = SINK_BASE + 0x8000


class Loopback(Elaboratable):
    """The RNIC with its network output wired to its input."""

    def __init__(self, **options):
        self.rnic = Rnic(WIDTH, **options)

    def elaborate(self, platform):
        m = Module()
        m.submodules.rnic = rnic = self.rnic
        for name in ("tdata", "tkeep", "tlast", "tvalid"):
            m.d.comb += getattr(rnic.s_axis, name).eq(getattr(rnic.m_axis, name))
        m.d.comb += rnic.m_axis.tready.eq(rnic.s_axis.tready)
        return m


def rx_rows():
    """The receive side's rows, as the model's commands: the association whose packets the transmit side
    sends (ports swapped, our own address as the peer's), a region, an armed stream, a Send buffer."""
    return [
        AssociationRow(AssociationEntry(0, PEER_PORT, LOCAL_PORT, str(LOCAL_IP), TAG)),
        RegionRow(REGION_INDEX, RegionEntry(STAG, PD, 0x1000, SINK_BYTES // 2, Access.REMOTE_WRITE, SINK_BASE)),
        StreamRow(StreamEntry(0, 0, PD, 1)),
        BufferPost(BufferEntry(0, 0, 0, SEND_BUFFER, 4096)),
    ]


async def write_table(ctx, bus, window, fields, base=0):
    for i, word in enumerate(window.encode(fields)):
        await axil_write(ctx, bus, base + window.base + 4 * i, word)
    await axil_write(ctx, bus, base + window.commit, 1)
    for _ in range(50):
        if not await axil_read(ctx, bus, base + window.commit):
            return
    raise AssertionError(f"{window.name}: the write was never taken")


async def configure(ctx, rnic):
    bus, rx_map, tx_map = rnic.s_axil, register_map(), tx_register_map()
    mac = int.from_bytes(LOCAL_MAC, "big")
    for name, value in (("local_mac_low", mac & 0xFFFFFFFF), ("local_mac_high", mac >> 32),
                        ("local_ip", int(LOCAL_IP)), ("udp_port", 9899)):
        await axil_write(ctx, bus, rx_map.config_offset(name), value)
    tables = rx_map.tables
    for command in rx_rows():
        if isinstance(command, AssociationRow):
            entry = command.entry
            await write_table(ctx, bus, tables["association"], {
                "index": entry.index, "valid": 1, "ddp": 1, "local_port": entry.local_port,
                "peer_port": entry.peer_port, "peer_ip": int(ipaddress.IPv4Address(entry.peer_ip)), "tag": entry.tag})
        elif isinstance(command, RegionRow):
            region = command.entry
            await write_table(ctx, bus, tables["region"], {"index": command.index, "entry": {
                "valid": 1, "key": region.stag & 0xFF, "pd": region.pd, "remote_write": 1,
                "base_to": region.base_to, "length": region.length, "host_address": region.host_address}})
        elif isinstance(command, StreamRow):
            await write_table(ctx, bus, tables["stream"], {"index": 0, "entry": {"valid": 1, "pd": PD},
                                                           "first_ssn": command.entry.first_ssn})
        else:
            entry = command.entry
            await write_table(ctx, bus, tables["buffer"], {"stream": 0, "qn": entry.qn, "address": entry.host_address,
                                                           "length": entry.length})
    await write_table(ctx, bus, tx_map.tables["tx_association"], {
        "index": 0, "peer_mac": mac, "peer_ip": int(LOCAL_IP), "local_port": LOCAL_PORT, "peer_port": PEER_PORT,
        "tag": TAG, "mulpdu": MULPDU, "next_tsn": FIRST_TSN}, base=TX_REGISTER_BASE)
    await write_table(ctx, bus, tx_map.tables["tx_stream"], {"index": 0, "first_ssn": 1}, base=TX_REGISTER_BASE)


def test_register_space_reads_both_engines_and_their_params():
    rnic = Rnic(WIDTH)
    seen = {}

    async def testbench(ctx):
        seen["rx_id"] = await axil_read(ctx, rnic.s_axil, 0x000)
        seen["tx_id"] = await axil_read(ctx, rnic.s_axil, TX_REGISTER_BASE)
        seen["tx_params"] = await axil_read(ctx, rnic.s_axil, TX_REGISTER_BASE + 4)
        await axil_write(ctx, rnic.s_axil, register_map().config_offset("local_ip"), 0x0A000002)
        seen["ip"] = await axil_read(ctx, rnic.s_axil, register_map().config_offset("local_ip"))
        seen["tx_ip"] = ctx.get(rnic.tx.local_ip)

    sim = Simulator(rnic)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert seen["rx_id"] == seen["tx_id"] == 0x524E4943     # "RNIC" at both bases
    assert seen["tx_params"] == WIDTH | (4 << 8) | (64 << 16)
    assert seen["ip"] == seen["tx_ip"] == 0x0A000002


# 20 bits: the top narrowed to a memory of 1 MiB (the ECPIX-5's keeps 16 for its 64 KiB), below every address here.
@pytest.mark.parametrize("seed, address_bits", [(1, 64), (2, 20)])
def test_loopback_write_and_send_are_placed_reported_and_completed(seed, address_bits):
    rng = random.Random(seed)
    source = ReadMemory(SOURCE_BASE, rng.randbytes(0x4000), WIDTH, seed=seed)
    sink = WriteMemory(SINK_BASE, SINK_BYTES, WIDTH)
    works = [Work(WorkOpcode.RDMA_WRITE, 0, 0, SOURCE_BASE + 5, 3000, stag=STAG, to=0x1003, wr_id=11),
             Work(WorkOpcode.SEND, 0, 0, SOURCE_BASE + 0x2001, 700, wr_id=12),
             Work(WorkOpcode.RDMA_WRITE, 0, 0, SOURCE_BASE + 0x3000, 0, stag=STAG, to=0x1000, wr_id=13)]
    association = Association(0, MULPDU, FIRST_TSN, peer_mac=LOCAL_MAC, peer_ip=str(LOCAL_IP),
                              local_port=LOCAL_PORT, peer_port=PEER_PORT, tag=TAG)
    frames = model_frames([association], {(0, 0): 1}, works, source)

    model = ModelEngine(LOCAL_MAC, str(LOCAL_IP), SparseMemory())
    for command in rx_rows():
        model.execute(command)
    verdicts, acks = [], []
    for frame in frames:
        model.execute(FrameIn(frame, 0.0))
        verdicts += model.last_result.segments
        acks += model.last_result.acks

    top = Loopback(address_bits=address_bits)
    rnic = top.rnic
    got = {"frames": [], "reports": [], "acks": [], "completions": []}

    async def host(ctx):
        await configure(ctx, rnic)
        layout = work_request_layout()
        for work in works:
            ctx.set(rnic.s_axis_wr.tdata, layout.pack({
                "opcode": int(work.opcode), "association": 0, "stream_id": 0, "host_address": work.host_address,
                "length": work.length, "stag": work.stag, "to": work.to, "wr_id": work.wr_id}))
            ctx.set(rnic.s_axis_wr.tvalid, 1)
            await ctx.tick().until(rnic.s_axis_wr.tready)
        ctx.set(rnic.s_axis_wr.tvalid, 0)

    async def wire(ctx):
        current = b""
        while True:
            _, _, valid, ready, data, keep, last = await ctx.tick().sample(
                rnic.m_axis.tvalid, rnic.m_axis.tready, rnic.m_axis.tdata, rnic.m_axis.tkeep, rnic.m_axis.tlast)
            if valid and ready:
                current += data.to_bytes(WIDTH, "little")[:bin(keep).count("1")]
                if last:
                    got["frames"].append(current)
                    current = b""

    async def records(ctx):
        """Reports and completions taken; each ack record answered with an ACK of its TSN."""
        for port in (rnic.m_axis_report, rnic.m_axis_ack, rnic.m_axis_completion):
            ctx.set(port.tready, 1)
        pending = []
        while True:
            if pending:
                ctx.set(rnic.s_axis_tsn.tdata, tsn_request_layout().pack(
                    {"opcode": int(TsnOpcode.ACK), "association": 0, "tsn": pending[0]}))
            ctx.set(rnic.s_axis_tsn.tvalid, bool(pending))
            _, _, report_valid, report, ack_valid, ack, done_valid, done, tsn_ready = await ctx.tick().sample(
                rnic.m_axis_report.tvalid, rnic.m_axis_report.tdata, rnic.m_axis_ack.tvalid, rnic.m_axis_ack.tdata,
                rnic.m_axis_completion.tvalid, rnic.m_axis_completion.tdata, rnic.s_axis_tsn.tready)
            if pending and tsn_ready:
                pending.pop(0)
            if report_valid:
                got["reports"].append(ReportRecord(_fields(report_layout(), report)))
            if ack_valid:
                record = ReportRecord(_fields(ack_layout(), ack))
                got["acks"].append(record)
                pending.append(record.tsn)
            if done_valid:
                got["completions"].append(_fields(completion_layout(), done))

    async def watch(ctx):
        for _ in range(20000):
            if len(got["completions"]) >= len(works):
                break
            await ctx.tick()
        await ctx.tick().repeat(50)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    for process in (wire, records, *source.processes(rnic.m_axi), *sink.processes(rnic.m_axi)):
        sim.add_testbench(process, background=True)
    sim.add_testbench(host, background=True)
    sim.add_testbench(watch)
    sim.run()

    assert got["frames"] == frames, "the frames on the wire are the model's"
    assert len(frames) == 3 + 1 + 1   # RFC 5041 5.2: 3000 B at MULPDU 1434 take three tagged segments
    segments = [record for record in got["reports"] if record.kind == ReportKind.SEGMENT]
    assert _compare_segments(segments, verdicts) == []
    assert _compare_acks(got["acks"], acks) == []
    # Placement: exactly the model's bytes, written only where the model wrote.
    for address, length in model.memory.writes:
        assert sink.read(address, length) == model.memory.read(address, length)
    assert sink.read(SINK_BASE + 3, 3000) == source.data[5:3005]
    assert sink.read(SEND_BUFFER, 700) == source.data[0x2001:0x2001 + 700]
    allowed = [(a, a + n) for a, n in model.memory.writes if n]
    assert all(any(lo <= a and a + len(d) <= hi for lo, hi in allowed) for a, d in sink.writes)
    # RFC 5041 5.4: each request completes once its last chunk is acknowledged, in order.
    assert [(c["wr_id"], c["status"]) for c in got["completions"]] == [
        (11, CompletionStatus.SUCCESS), (12, CompletionStatus.SUCCESS), (13, CompletionStatus.SUCCESS)]


def test_loopback_engine_sacks_acknowledge_the_data_rfc4960_6_2():
    """With the acknowledgement unit's row written enabled, the receive side SACKs the DATA it takes itself:
    no ack record reaches the host, and the SACKs, sent through the transmit side and looped back, are the
    model's (model.engine.sack: every second packet, the last one on the delayed-SACK timer, RFC 4960 6.2)
    byte for byte. The host turns each SACK's Cumulative TSN Ack into an ACK, and every request completes."""
    rng = random.Random(5)
    source = ReadMemory(SOURCE_BASE, rng.randbytes(0x4000), WIDTH, seed=5)
    sink = WriteMemory(SINK_BASE, SINK_BYTES, WIDTH)
    works = [Work(WorkOpcode.RDMA_WRITE, 0, 0, SOURCE_BASE + 5, 4000, stag=STAG, to=0x1003, wr_id=21),
             Work(WorkOpcode.SEND, 0, 0, SOURCE_BASE + 0x2001, 700, wr_id=22),
             Work(WorkOpcode.RDMA_WRITE, 0, 0, SOURCE_BASE + 0x3000, 0, stag=STAG, to=0x1000, wr_id=23)]
    association = Association(0, MULPDU, FIRST_TSN, peer_mac=LOCAL_MAC, peer_ip=str(LOCAL_IP),
                              local_port=LOCAL_PORT, peer_port=PEER_PORT, tag=TAG)
    data_frames = model_frames([association], {(0, 0): 1}, works, source)
    window, held_bytes, delay = 20000, 1452, 40     # 40 ticks of 64 cycles: longer than any gap in the traffic
    unit = SackUnit(1)
    unit.reset(0, (FIRST_TSN - 1) & 0xFFFFFFFF, delay, window=window, held_bytes=held_bytes)
    # Each request's last DATA chunk carries the I bit (RFC 9260 3.3.1): its packet is SACKed at once (6.2).
    immediate = [SctpPacket.decode(Frame.decode(frame).sctp).chunks[0].immediate for frame in data_frames]
    assert immediate == [False, False, True, True, True]
    expected = [record for index, flag in enumerate(immediate)
                for record in unit.chunk(0, (FIRST_TSN + index) & 0xFFFFFFFF, 0, True, flag)] + unit.tick(delay)
    assert len(expected) == 4            # after packet 2 (the second), and after packets 3, 4 and 5 (the I bit)

    top = Loopback(tick_cycles=64)
    rnic = top.rnic
    got = {"frames": [], "sacks": [], "acks": 0, "completions": []}

    async def host(ctx):
        await configure(ctx, rnic)
        await write_table(ctx, rnic.s_axil, register_map().tables["sack"], {
            "association": 0, "cumulative_tsn": (FIRST_TSN - 1) & 0xFFFFFFFF, "delay": delay, "window": window,
            "held_bytes": held_bytes, "enabled": 1})
        layout = work_request_layout()
        for work in works:
            ctx.set(rnic.s_axis_wr.tdata, layout.pack({
                "opcode": int(work.opcode), "association": 0, "stream_id": 0, "host_address": work.host_address,
                "length": work.length, "stag": work.stag, "to": work.to, "wr_id": work.wr_id}))
            ctx.set(rnic.s_axis_wr.tvalid, 1)
            await ctx.tick().until(rnic.s_axis_wr.tready)
        ctx.set(rnic.s_axis_wr.tvalid, 0)

    async def wire(ctx):
        current = b""
        while True:
            _, _, valid, ready, data, keep, last = await ctx.tick().sample(
                rnic.m_axis.tvalid, rnic.m_axis.tready, rnic.m_axis.tdata, rnic.m_axis.tkeep, rnic.m_axis.tlast)
            if valid and ready:
                current += data.to_bytes(WIDTH, "little")[:bin(keep).count("1")]
                if last:
                    got["frames"].append(current)
                    current = b""

    async def records(ctx):
        """The looped-back SACK chunks (chunk exceptions) become ACKs of their Cumulative TSN Ack."""
        for port in (rnic.m_axis_report, rnic.m_axis_ack, rnic.m_axis_completion, rnic.m_axis_exc):
            ctx.set(port.tready, 1)
        pending, packet = [], b""
        while True:
            if pending:
                ctx.set(rnic.s_axis_tsn.tdata, tsn_request_layout().pack(
                    {"opcode": int(TsnOpcode.ACK), "association": 0, "tsn": pending[0]}))
            ctx.set(rnic.s_axis_tsn.tvalid, bool(pending))
            _, _, ack_valid, done_valid, done, tsn_ready, exc_valid, exc_data, exc_keep, exc_last = \
                await ctx.tick().sample(rnic.m_axis_ack.tvalid, rnic.m_axis_completion.tvalid,
                                        rnic.m_axis_completion.tdata, rnic.s_axis_tsn.tready, rnic.m_axis_exc.tvalid,
                                        rnic.m_axis_exc.tdata, rnic.m_axis_exc.tkeep, rnic.m_axis_exc.tlast)
            if pending and tsn_ready:
                pending.pop(0)
            got["acks"] += ack_valid
            if done_valid:
                got["completions"].append(_fields(completion_layout(), done))
            if exc_valid:
                packet += exc_data.to_bytes(WIDTH, "little")[:bin(exc_keep).count("1")]
                if exc_last:
                    (chunk,) = decode_chunks(packet)
                    got["sacks"].append(chunk)
                    pending.append(chunk.cumulative_tsn_ack)
                    packet = b""

    async def watch(ctx):
        for _ in range(40000):
            if len(got["completions"]) >= len(works) and len(got["sacks"]) >= len(expected):
                break
            await ctx.tick()
        await ctx.tick().repeat(50)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    for process in (wire, records, *source.processes(rnic.m_axi), *sink.processes(rnic.m_axi)):
        sim.add_testbench(process, background=True)
    sim.add_testbench(host, background=True)
    sim.add_testbench(watch)
    sim.run()

    assert [frame for frame in got["frames"] if frame in data_frames] == data_frames
    assert got["sacks"] == [record.chunk() for record in expected]
    sack_frames = [frame for frame in got["frames"] if frame not in data_frames]
    assert len(sack_frames) == len(expected) and got["acks"] == 0
    assert sorted(c["wr_id"] for c in got["completions"]) == [21, 22, 23]
    assert sink.read(SINK_BASE + 3, 4000) == source.data[5:4005]


@pytest.mark.slow   # a minute each in Amaranth's simulator: the default suite keeps the engine-level runs
@pytest.mark.parametrize("drops", [(), (2, 3, 8, 13)], ids=["clean", "lossy"])
def test_loopback_transport_in_gateware_completes_every_request_without_the_host(drops):
    """The SCTP data transfer of the association in gateware (RFC 4960 6, 7): the receive side SACKs the DATA
    it takes (6.2), the SACKs leave through the transmit side, come back, and the receive side hands them to
    the transmit side's transport unit (its SACK row says ``peer_sacks``), which retires the ring, completes
    the requests and resends what the wire lost (``drops``: the frames the wire loses, by their order on it;
    T3-rtx and fast retransmit, 6.3.3, 7.2.4). The host writes
    the rows and the requests and reads the completions: no ack record, no chunk, no TSN request passes
    through it. The bytes placed are the source's, exactly."""
    rng = random.Random(11)
    source = ReadMemory(SOURCE_BASE, rng.randbytes(0x4000), WIDTH, seed=11)
    sink = WriteMemory(SINK_BASE, SINK_BYTES, WIDTH)
    works = [Work(WorkOpcode.RDMA_WRITE, 0, 0, SOURCE_BASE + 0x800 * index + 3, 2500, stag=STAG,
                  to=0x1000 + 0x1000 * index, wr_id=40 + index) for index in range(6)]
    top = rnic = Rnic(WIDTH, tick_cycles=64, transport=True)   # output to input by the wire below, less its losses
    got = {"frames": [], "completions": [], "host_records": 0}

    async def host(ctx):
        await configure(ctx, rnic)
        await write_table(ctx, rnic.s_axil, register_map().tables["sack"], {
            "association": 0, "cumulative_tsn": (FIRST_TSN - 1) & 0xFFFFFFFF, "delay": 4, "window": 60000,
            "held_bytes": 1452, "enabled": 1, "peer_sacks": 1})
        await write_table(ctx, rnic.s_axil, rnic.tx_map.tables["tx_transport"], {
            "association": 0, "peer_a_rwnd": 60000, "mtu": 1480, "chunk_bytes": 1452, "rto_initial": 40,
            "rto_min": 20, "rto_max": 400, "max_retrans": 10, "max_burst": 4}, base=TX_REGISTER_BASE)
        layout = work_request_layout()
        for work in works:
            ctx.set(rnic.s_axis_wr.tdata, layout.pack({
                "opcode": int(work.opcode), "association": 0, "stream_id": 0, "host_address": work.host_address,
                "length": work.length, "stag": work.stag, "to": work.to, "wr_id": work.wr_id}))
            ctx.set(rnic.s_axis_wr.tvalid, 1)
            await ctx.tick().until(rnic.s_axis_wr.tready)
        ctx.set(rnic.s_axis_wr.tvalid, 0)

    wire_frames = []

    async def wire_out(ctx):
        ctx.set(rnic.m_axis.tready, 1)
        current = b""
        while True:
            _, _, valid, data, keep, last = await ctx.tick().sample(
                rnic.m_axis.tvalid, rnic.m_axis.tdata, rnic.m_axis.tkeep, rnic.m_axis.tlast)
            if valid:
                current += data.to_bytes(WIDTH, "little")[:bin(keep).count("1")]
                if last:
                    if len(got["frames"]) not in drops:
                        wire_frames.append(current)
                    got["frames"].append(current)
                    current = b""

    async def wire_in(ctx):
        while True:
            if not wire_frames:
                await ctx.tick()
                continue
            frame = wire_frames.pop(0)
            for start in range(0, len(frame), WIDTH):
                beat = frame[start:start + WIDTH]
                ctx.set(rnic.s_axis.tdata, int.from_bytes(beat, "little"))
                ctx.set(rnic.s_axis.tkeep, (1 << len(beat)) - 1)
                ctx.set(rnic.s_axis.tlast, start + WIDTH >= len(frame))
                ctx.set(rnic.s_axis.tvalid, 1)
                await ctx.tick().until(rnic.s_axis.tready)
            ctx.set(rnic.s_axis.tvalid, 0)

    async def records(ctx):
        ports = (rnic.m_axis_report, rnic.m_axis_ack, rnic.m_axis_completion, rnic.m_axis_exc,
                 rnic.m_axis_tsn_refused, rnic.m_axis_transport_stopped)
        for port in ports:
            ctx.set(port.tready, 1)
        while True:
            _, _, ack_valid, exc_valid, refused_valid, stopped_valid, done_valid, done = await ctx.tick().sample(
                rnic.m_axis_ack.tvalid, rnic.m_axis_exc.tvalid, rnic.m_axis_tsn_refused.tvalid,
                rnic.m_axis_transport_stopped.tvalid, rnic.m_axis_completion.tvalid, rnic.m_axis_completion.tdata)
            got["host_records"] += ack_valid + exc_valid + refused_valid + stopped_valid
            if done_valid:
                got["completions"].append(_fields(completion_layout(), done))

    async def watch(ctx):
        for _ in range(400000):
            if len(got["completions"]) >= len(works):
                break
            await ctx.tick()
        await ctx.tick().repeat(50)
        # What a board host pushing one request a message reads (driver/backends/board_transport.py).
        for name in ("messages_started", "cumulative_tsn_ack_0"):
            got[name] = await axil_read(ctx, rnic.s_axil, TX_REGISTER_BASE + rnic.tx_map.counters[name])
        got["params"] = TX_PARAMS.unpack(await axil_read(ctx, rnic.s_axil, TX_REGISTER_BASE + PARAMS_OFFSET))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    for process in (wire_out, wire_in, records, *source.processes(rnic.m_axi), *sink.processes(rnic.m_axi)):
        sim.add_testbench(process, background=True)
    sim.add_testbench(host, background=True)
    sim.add_testbench(watch)
    sim.run()

    # RFC 5041 5.4: each request completes once its last chunk is acknowledged, in order, exactly once.
    assert [(c["wr_id"], c["status"]) for c in got["completions"]] == [
        (work.wr_id, CompletionStatus.SUCCESS) for work in works]
    for work in works:
        assert sink.read(SINK_BASE + work.to - 0x1000, work.length) == \
            source.data[work.host_address - SOURCE_BASE:work.host_address - SOURCE_BASE + work.length]
    assert got["host_records"] == 0
    # Six messages started; the last of their 12 chunks retired (RFC 4960 6.2.1 D); the build says it has the unit.
    assert got["messages_started"] == 6 and got["cumulative_tsn_ack_0"] == (FIRST_TSN + 11) & 0xFFFFFFFF
    assert got["params"]["transport"] == 1
    chunks = [decode_chunks(frame[14 + 20 + 12:])[0] for frame in got["frames"]]
    data_tsns = [chunk.tsn for chunk in chunks if chunk.CHUNK_TYPE == 0]
    assert any(chunk.CHUNK_TYPE == 3 for chunk in chunks)           # the receive side's SACKs went out
    if drops:
        assert len(data_tsns) > len(set(data_tsns))                  # lost chunks were sent again
    else:
        assert len(data_tsns) == len(set(data_tsns)) == 6 * 2        # 2500 B at MULPDU 1434: two segments each


@pytest.mark.parametrize("address_bits", [11, 65])
def test_host_address_width_outside_12_to_64_bits_is_refused(address_bits):
    """Fewer than 12 bits would let a DMA burst's 4 KiB boundary (AXI4 A3.4.1) wrap; the host's records hold 64."""
    with pytest.raises(ValueError, match=f"host addresses of {address_bits} bits"):
        Rnic(WIDTH, address_bits=address_bits)
