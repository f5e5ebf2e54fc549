"""The transmit engine in Amaranth's simulator, and the frames the golden model sends for the same work.

:func:`model_frames` builds the expected frames from the model only:
``model.ddp.source.DdpSource`` segments each message (RFC 5041 5.2) with the
RDMAP control field from ``model.rdmap.messages``; each segment goes into a
``DdpSegmentChunkData`` (DDP-SSN), a ``DataChunk`` (U = 1, PPID 16), an
``SctpPacket`` (CRC32c) and ``build_frame`` (Ethernet, IPv4, optionally UDP
with checksum 0, RFC 6951 5). :func:`simulate` runs :class:`hdl.tx.engine.TxEngine`
on the same work against :class:`~tests.hdl.tx.axi_read_memory.ReadMemory`.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass

from amaranth.sim import Simulator

from hdl.abi import WorkOpcode, work_request_layout
from hdl.stream.simulation import Pace, stream_put
from hdl.tx.engine import TxEngine
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.source import DdpSource
from model.net.frames import build_frame
from model.rdmap.messages import Opcode, QueueNumber, ReadRequest, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import PPID_DDP_SEGMENT, DataChunk, SctpPacket
from tests.hdl.tx.axi_read_memory import ReadMemory

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


def model_frames(associations: list[Association], first_ssn: dict, works: list[Work], memory: ReadMemory) -> list[bytes]:
    """The frames the model sends for ``works``; ``first_ssn`` maps (association, stream id) to its first DDP-SSN."""
    by_index = {a.index: a for a in associations}
    sources, ssn, tsn = {}, dict(first_ssn), {a.index: a.next_tsn for a in associations}
    frames = []
    for work in works:
        association = by_index[work.association]
        key = (work.association, work.stream_id)
        source = sources.setdefault(key, DdpSource(association.mulpdu))
        opcode = Opcode(int(work.opcode))
        start = work.host_address - memory.base
        payload = memory.data[start:start + work.length]
        if opcode is Opcode.RDMA_WRITE:
            segments = source.tagged_message(payload, work.stag, work.to, tagged_rsvd_ulp(opcode))
        elif opcode is Opcode.RDMA_READ_REQUEST:
            request = ReadRequest(work.sink_stag, work.sink_to, work.length, work.stag, work.to).encode()
            segments = source.untagged_message(request, QueueNumber.READ_REQUEST, untagged_rsvd_ulp(opcode))
        else:
            invalidate = work.invalidate_stag if opcode.carries_invalidate_stag else 0
            segments = source.untagged_message(payload, QueueNumber.SEND, untagged_rsvd_ulp(opcode, invalidate))
        for segment in segments:
            user_data = DdpSegmentChunkData(ssn[key], segment.encode()).encode()
            ssn[key] = (ssn[key] + 1) & 0xFFFF
            chunk = DataChunk(tsn[work.association], work.stream_id, 0, PPID_DDP_SEGMENT, user_data, unordered=True)
            tsn[work.association] = (tsn[work.association] + 1) & 0xFFFFFFFF
            packet = SctpPacket(association.local_port, association.peer_port, association.tag, [chunk]).encode()
            frames.append(build_frame(packet, LOCAL_MAC, association.peer_mac, LOCAL_IP, association.peer_ip,
                                      udp=association.udp, src_port=UDP_PORT, dst_port=association.peer_udp_port,
                                      udp_checksum=False))
    return frames


@dataclass
class Run:
    frames: list            # bytes of each frame on m_axis
    beat_cycles: list       # cycle of each m_axis beat
    first_work_cycle: int   # cycle the first work request was taken


def simulate(width: int, associations: list[Association], first_ssn: dict, works: list[Work], memory: ReadMemory,
             frame_count: int, *, out_stall: float = 0.0, work_gap: float = 0.0, seed: int = 0,
             buffer_bytes: int = 8192) -> Run:
    """Run the engine until ``frame_count`` frames left (or a cycle budget ran out), then 30 cycles more."""
    dut = TxEngine(width, associations=2, stream_ids=STREAM_IDS, buffer_bytes=buffer_bytes)
    rng = random.Random(seed)
    layout = work_request_layout()
    run = Run([], [], -1)
    beats: list = []
    clock = [0]

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
        pace = Pace(work_gap, seed=rng)
        for index, work in enumerate(works):
            bits = layout.const({
                "opcode": int(work.opcode), "association": work.association, "stream_id": work.stream_id,
                "host_address": work.host_address, "length": work.length, "stag": work.stag, "to": work.to,
                "sink_stag": work.sink_stag, "sink_to": work.sink_to,
                "invalidate_stag": work.invalidate_stag}).as_bits()
            ctx.set(dut.s_axis_wr.tdata, bits)
            ctx.set(dut.s_axis_wr.tlast, 1)
            ctx.set(dut.s_axis_wr.tkeep, -1)
            for _ in range(pace.cycles()):
                ctx.set(dut.s_axis_wr.tvalid, 0)
                await ctx.tick()
            ctx.set(dut.s_axis_wr.tvalid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.s_axis_wr.tready)
                if ready:
                    break
            if index == 0:
                run.first_work_cycle = clock[0]
        ctx.set(dut.s_axis_wr.tvalid, 0)

    async def network(ctx):
        current = b""
        axis = dut.m_axis
        while True:
            ready = not (out_stall and rng.random() < out_stall)
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
                    current = b""

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host, background=True)
    sim.add_testbench(network, background=True)
    for process in memory.processes(dut.m_axi):
        sim.add_testbench(process, background=True)

    async def watch(ctx):
        budget = 2000 + 8 * sum(w.length // width + 40 for w in works) + 200 * frame_count
        for _ in range(budget):
            if len(run.frames) >= frame_count:
                break
            await ctx.tick()
        await ctx.tick().repeat(30)

    sim.add_testbench(watch)
    sim.run()
    return run


def run_against_model(width: int, associations: list[Association], first_ssn: dict, works: list[Work],
                      memory: ReadMemory, **options) -> tuple[Run, list[bytes]]:
    """Simulate ``works`` and return the run with the model's frames for them."""
    expected = model_frames(associations, first_ssn, works, memory)
    return simulate(width, associations, first_ssn, works, memory, len(expected), **options), expected
