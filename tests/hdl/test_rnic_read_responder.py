"""The RNIC top with its read responder (``Rnic(read_responder=True)``, issue 29 item 3) in Amaranth's simulator.

Its transmit side is looped back into its receive side (tests/hdl/test_rnic.py's ``Loopback``): the host posts an
RDMA Read Request work request; its frame goes out of ``m_axis`` and back in on ``s_axis``; the receive engine
checks the request's Data Source in its region table (RFC 5040 4.4, 5.2) and hands it to the transmit engine with
no host action; the Read Response leaves on ``m_axis`` and comes back to be placed in the Data Sink (RFC 5040 4.5).

Expected values come from the models only: the receive engine's model with the read responder turns the Read
Request frame into the ``s_axis_rr`` record, the model's responder (``sim.traffic.tx.model_frames``: an RDMAP
endpoint) turns that record into the Read Response frames, and the receive engine's model places those.
"""

import ipaddress
import random

import pytest

from amaranth.sim import Simulator

from abi.rx import ReportKind, register_map, report_layout
from abi.tx import TX_REGISTER_BASE, WorkOpcode, read_response_layout, tx_register_map, work_request_layout
from hdl.rnic import Rnic
from model.ddp.memory import Access, SparseMemory
from model.engine.config import AssociationEntry, RegionEntry, StreamEntry
from model.engine.tx import ReadResponseRequest
from model.rnic.offload import AssociationRow, FrameIn, ModelEngine, RegionRow, StreamRow
from sim.tb.axi_lite import axil_write
from sim.tb.axi_read_memory import ReadMemory
from sim.tb.axi_write_memory import WriteMemory
from sim.tb.rx_engine_tb import ReportRecord, _compare_segments, _fields
from sim.tb.tx_engine import LOCAL_IP, LOCAL_MAC, Association, Work
from sim.traffic.tx import model_frames
from tests.hdl.test_rnic import (FIRST_TSN, LOCAL_PORT, MULPDU, PD, PEER_PORT, SINK_BASE, SINK_BYTES, SOURCE_BASE,
                                 TAG, WIDTH, Loopback, write_table)

SINK_STAG, SOURCE_STAG = 0x0133, 0x0244           # rows 1 and 2 (STag = row << 8 | key)
SINK_TO, SOURCE_TO = 0x1000, 0x7000_0000_0000
READ_OFFSET, READ_BYTES = 0x123, 2500              # RFC 5041 5.2: two tagged segments at MULPDU 1434


def rx_rows():
    """The association whose packets the transmit side sends (ports swapped, our own address as the peer's), the
    Data Sink (LOCAL_WRITE: a Read Response's placement) and the Data Source (REMOTE_READ), an armed stream. No
    QN 1 buffer: the read responder needs none."""
    return [
        AssociationRow(AssociationEntry(0, PEER_PORT, LOCAL_PORT, str(LOCAL_IP), TAG)),
        RegionRow(1, RegionEntry(SINK_STAG, PD, SINK_TO, SINK_BYTES, Access.LOCAL_WRITE, SINK_BASE)),
        RegionRow(2, RegionEntry(SOURCE_STAG, PD, SOURCE_TO, 0x4000, Access.REMOTE_READ, SOURCE_BASE)),
        StreamRow(StreamEntry(0, 0, PD, 1)),
    ]


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
                "valid": 1, "key": region.stag & 0xFF, "pd": region.pd,
                "local_write": int(Access.LOCAL_WRITE in region.access),
                "remote_read": int(Access.REMOTE_READ in region.access),
                "base_to": region.base_to, "length": region.length, "host_address": region.host_address}})
        else:
            await write_table(ctx, bus, tables["stream"], {"index": 0, "entry": {"valid": 1, "pd": PD},
                                                           "first_ssn": command.entry.first_ssn})
    await write_table(ctx, bus, tx_map.tables["tx_association"], {
        "index": 0, "peer_mac": mac, "peer_ip": int(LOCAL_IP), "local_port": LOCAL_PORT, "peer_port": PEER_PORT,
        "tag": TAG, "mulpdu": MULPDU, "next_tsn": FIRST_TSN}, base=TX_REGISTER_BASE)
    await write_table(ctx, bus, tx_map.tables["tx_stream"], {"index": 0, "first_ssn": 1}, base=TX_REGISTER_BASE)


# 20 bits: the top narrowed to a memory of 1 MiB, below every address here (the request's record then crosses the
# top at that width and is widened to the transmit engine's 64-bit s_axis_rr record and back).
@pytest.mark.parametrize("address_bits", [64, 20])
def test_loopback_read_request_is_answered_by_the_engines_rfc5040_4_4(address_bits):
    rng = random.Random(29)
    source = ReadMemory(SOURCE_BASE, rng.randbytes(0x4000), WIDTH, seed=29)
    sink = WriteMemory(SINK_BASE, SINK_BYTES, WIDTH)
    association = Association(0, MULPDU, FIRST_TSN, peer_mac=LOCAL_MAC, peer_ip=str(LOCAL_IP),
                              local_port=LOCAL_PORT, peer_port=PEER_PORT, tag=TAG)
    read = Work(WorkOpcode.RDMA_READ_REQUEST, 0, 0, 0, READ_BYTES, stag=SOURCE_STAG, to=SOURCE_TO + READ_OFFSET,
                sink_stag=SINK_STAG, sink_to=SINK_TO + 0x10, wr_id=21)

    # The models: the Read Request frame, the receive engine's record for it, the responder's frames.
    (request_frame,) = model_frames([association], {(0, 0): 1}, [read], source)
    model = ModelEngine(LOCAL_MAC, str(LOCAL_IP), SparseMemory(), read_responder=True)
    for command in rx_rows():
        model.execute(command)
    output = model.execute(FrameIn(request_frame, 0.0))
    assert output.reports == []   # the host does not see the request
    assert output.read_responses == [ReadResponseRequest(0, 0, SOURCE_BASE + READ_OFFSET, READ_BYTES, SINK_STAG,
                                                         SINK_TO + 0x10, 1)]
    frames = model_frames([association], {(0, 0): 1}, [read, *output.read_responses], source)
    assert frames[0] == request_frame and len(frames) == 1 + 2
    verdicts = []
    for frame in frames[1:]:
        verdicts += model.execute(FrameIn(frame, 0.0)).reports

    top = Loopback(read_responder=True, address_bits=address_bits)
    rnic = top.rnic
    got = {"frames": [], "reports": []}

    async def host(ctx):
        await configure(ctx, rnic)
        ctx.set(rnic.s_axis_wr.tdata, work_request_layout().pack({
            "opcode": int(read.opcode), "association": 0, "stream_id": 0, "host_address": 0, "length": read.length,
            "stag": read.stag, "to": read.to, "sink_stag": read.sink_stag, "sink_to": read.sink_to,
            "wr_id": read.wr_id}))
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
        for port in (rnic.m_axis_report, rnic.m_axis_ack, rnic.m_axis_completion, rnic.m_axis_rr_refused):
            ctx.set(port.tready, 1)
        while True:
            _, _, valid, report = await ctx.tick().sample(rnic.m_axis_report.tvalid, rnic.m_axis_report.tdata)
            if valid:
                got["reports"].append(ReportRecord(_fields(report_layout(), report)))

    async def watch(ctx):
        for _ in range(20000):
            if len(got["reports"]) >= len(verdicts):
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

    assert got["frames"] == frames, "the Read Request and the Read Response on the wire are the models'"
    segments = [record for record in got["reports"] if record.kind == ReportKind.SEGMENT]
    assert _compare_segments(segments, verdicts) == []   # the response's placement: no record of the request
    assert sink.read(SINK_BASE + 0x10, READ_BYTES) == source.data[READ_OFFSET:READ_OFFSET + READ_BYTES]
    allowed = [(a, a + n) for a, n in model.memory.writes if n]
    assert all(any(lo <= a and a + len(d) <= hi for lo, hi in allowed) for a, d in sink.writes)


def test_host_read_response_port_still_answers_with_the_option():
    """With the option the host's own ``s_axis_rr`` records still reach the transmit engine (arbitrated after the
    receive engine's): a record written there is answered, its frames the model responder's."""
    rng = random.Random(30)
    source = ReadMemory(SOURCE_BASE, rng.randbytes(0x4000), WIDTH, seed=30)
    association = Association(0, MULPDU, FIRST_TSN, peer_mac=LOCAL_MAC, peer_ip=str(LOCAL_IP),
                              local_port=LOCAL_PORT, peer_port=PEER_PORT, tag=TAG)
    response = ReadResponseRequest(0, 0, SOURCE_BASE + 0x40, 300, SINK_STAG, SINK_TO, 1)
    frames = model_frames([association], {(0, 0): 1}, [response], source)
    rnic = Rnic(WIDTH, read_responder=True)
    got = []

    async def host(ctx):
        await configure(ctx, rnic)
        ctx.set(rnic.s_axis_rr.tdata, read_response_layout().pack(vars(response)))
        ctx.set(rnic.s_axis_rr.tvalid, 1)
        await ctx.tick().until(rnic.s_axis_rr.tready)
        ctx.set(rnic.s_axis_rr.tvalid, 0)

    async def wire(ctx):
        ctx.set(rnic.m_axis.tready, 1)
        current = b""
        for _ in range(20000):
            _, _, valid, data, keep, last = await ctx.tick().sample(
                rnic.m_axis.tvalid, rnic.m_axis.tdata, rnic.m_axis.tkeep, rnic.m_axis.tlast)
            if valid:
                current += data.to_bytes(WIDTH, "little")[:bin(keep).count("1")]
                if last:
                    got.append(current)
                    current = b""
                    if len(got) == len(frames):
                        return

    sim = Simulator(rnic)
    sim.add_clock(1e-8)
    for process in source.processes(rnic.m_axi):
        sim.add_testbench(process, background=True)
    sim.add_testbench(host, background=True)
    sim.add_testbench(wire)
    sim.run()
    assert got == frames
