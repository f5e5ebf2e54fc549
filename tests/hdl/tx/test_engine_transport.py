"""hdl.tx.engine.TxEngine with the transport unit (s_axis_transport, s_axis_peer_sack, tick,
m_axis_transport_stopped) against the transmit engine model holding the unit's model (model/engine/tx.py
``write_transport``, ``peer_sack``, ``tick``): over a path that loses frames, the same frames byte for byte
(new chunks as the window allows, T3-rtx and fast retransmissions, RFC 4960 6.1, 6.3.3, 7.2.4), the same
completions when a SACK's Cumulative TSN Ack covers a message's last chunk (RFC 5041 5.4), and when the
peer falls silent the same stop past Association.Max.Retrans (8.1). The host's own ACK, RESEND and LIMIT
for the row are refused.

Both run step by step: after each input the engine is left until it is quiet, and the frames it sent are
compared with what the model sends for the same input, so the order of inputs is the model's."""

import ipaddress
import random

import pytest
from amaranth.sim import Simulator

from abi.tx import (TransportOpcode, TsnOpcode, WorkOpcode, completion_layout, peer_sack_layout,
                    transport_record_layout, transport_write_layout, tsn_request_layout, work_request_layout)
from hdl.layout import struct_layout
from hdl.stream.simulation import stream_put
from hdl.tx.engine import TxEngine
from model.engine.transport import AssociationFailure
from model.engine.tx import (Completion, RefusedTsn, TransmitConfig, TransmitEngineModel, TransportStopped,
                             TxAssociationRow)
from model.sctp.packet import SackChunk
from sim.tb.tx_engine import LOCAL_IP, LOCAL_MAC, STREAM_IDS, UDP_PORT
from sim.traffic.tx import MemoryReader
from tests.hdl.tx.harness import PAGE_END, Association, Work, data_tsn, random_memory
from tests.hdl.tx.test_transport_unit import Peer

QUIET = 300          # cycles without a frame beat or a record, the transport unit idle: the last input is done


def transport_parameters(rng: random.Random) -> dict:
    return dict(mtu=rng.choice([400, 1480]), rto_initial=3, rto_min=1, rto_max=16, max_retrans=3,
                max_burst=rng.choice([2, 4]))


# W = 8 in the default suite, W = 64 (a frame's headers and payload in few beats) in the slow set.
@pytest.mark.parametrize("width", [8, pytest.param(64, marks=pytest.mark.slow)])
def test_engine_transport_matches_the_model(width):
    rng = random.Random(7)
    ring_tsns = 16
    association = Association(0, 300, 0xFFFFFFF0, tag=rng.getrandbits(32))     # the TSNs wrap
    memory = random_memory(rng, width, ar_ready=0.8, latency=(1, 6), r_gap=0.1)
    works = [Work(rng.choice([WorkOpcode.RDMA_WRITE, WorkOpcode.SEND]), 0, 0, PAGE_END - rng.randrange(3000),
                  rng.choice([1, 200, 700, 1500]), stag=5, to=64, wr_id=index + 1) for index in range(12)]
    parameters = transport_parameters(rng)
    parameters["chunk_bytes"] = association.mulpdu + 2 + 18         # the DDP-SSN and an untagged header
    peer_a_rwnd = 6000

    model = TransmitEngineModel(TransmitConfig(LOCAL_MAC, str(LOCAL_IP), UDP_PORT, stream_ids=STREAM_IDS,
                                               ring_tsns=ring_tsns), MemoryReader(memory))
    model.write_association(TxAssociationRow(0, association.peer_mac, association.peer_ip, association.local_port,
                                             association.peer_port, association.tag, association.mulpdu,
                                             association.next_tsn))
    model.write_stream(0, 0, 1)
    model.write_transport(0, peer_a_rwnd, **parameters)
    for work in works:
        model.post_work(work)

    dut = TxEngine(width, associations=2, stream_ids=STREAM_IDS, ring_tsns=ring_tsns, transport=True)
    peer = Peer(rng, association.next_tsn, loss=0.15)
    log = []

    frames, completions, stops, refused = [], [], [], []

    async def network(ctx):
        current = b""
        ctx.set(dut.m_axis.tready, 1)
        for port in (dut.m_axis_completion, dut.m_axis_transport_stopped, dut.m_axis_tsn_refused):
            ctx.set(port.tready, 1)
        while True:
            _, _, valid, data, keep, last, *outputs = await ctx.tick().sample(
                dut.m_axis.tvalid, dut.m_axis.tdata, dut.m_axis.tkeep, dut.m_axis.tlast,
                dut.m_axis_completion.tvalid, dut.m_axis_completion.tdata,
                dut.m_axis_transport_stopped.tvalid, dut.m_axis_transport_stopped.tdata,
                dut.m_axis_tsn_refused.tvalid, dut.m_axis_tsn_refused.tdata)
            activity[0] += 1
            if valid:
                activity[0] = 0
                current += data.to_bytes(width, "little")[:bin(keep).count("1")]
                if last:
                    frames.append(current)
                    current = b""
            for (out_valid, bits), layout, into in zip(zip(outputs[::2], outputs[1::2]),
                                                       (struct_layout(completion_layout()),
                                                        struct_layout(transport_record_layout()),
                                                        struct_layout(tsn_request_layout())),
                                                       (completions, stops, refused)):
                if out_valid:
                    activity[0] = 0
                    into.append(layout.from_bits(bits))

    activity = [0]
    posted = []

    async def work_port(ctx):
        while True:
            if not posted:
                await ctx.tick()
                continue
            work = posted.pop(0)
            await offer(ctx, dut.s_axis_wr, work_request_layout().pack({
                "opcode": int(work.opcode), "association": 0, "stream_id": 0, "host_address": work.host_address,
                "length": work.length, "stag": work.stag, "to": work.to, "wr_id": work.wr_id}))

    async def offer(ctx, port, bits):
        ctx.set(port.tdata, bits)
        ctx.set(port.tlast, 1)
        ctx.set(port.tkeep, -1)
        ctx.set(port.tvalid, 1)
        while True:
            _, _, ready = await ctx.tick().sample(port.tready)
            if ready:
                break
        ctx.set(port.tvalid, 0)

    async def quiet(ctx):
        activity[0] = 0
        cycles = 0
        while activity[0] < QUIET or not ctx.get(dut.transport.idle):
            await ctx.tick()
            cycles += 1
            assert cycles < 20000, "the engine never goes quiet"

    async def host(ctx):
        ctx.set(dut.local_mac, int.from_bytes(LOCAL_MAC, "big"))
        ctx.set(dut.local_ip, int(LOCAL_IP))
        ctx.set(dut.udp_port, UDP_PORT)
        await stream_put(ctx, dut.association_write, {
            "index": 0, "peer_mac": int.from_bytes(association.peer_mac, "big"),
            "peer_ip": int(ipaddress.IPv4Address(association.peer_ip)), "local_port": association.local_port,
            "peer_port": association.peer_port, "tag": association.tag, "udp": 0, "peer_udp_port": 0,
            "mulpdu": association.mulpdu, "next_tsn": association.next_tsn})
        await stream_put(ctx, dut.stream_write, {"index": 0, "first_ssn": 1})
        await ctx.tick().repeat(8)
        await offer(ctx, dut.s_axis_transport, transport_write_layout().pack(
            {"association": 0, "peer_a_rwnd": peer_a_rwnd, **parameters}))
        posted.extend(works)    # taken as the engine has room: the model queues them all at once
        now, step, seen, model_completions, model_stops = 0, 0, 0, [], []
        silent = False
        while step < 400:
            await quiet(ctx)
            expected = model.data_to_send(now=now)
            got, seen = frames[seen:], len(frames)
            assert got == expected, f"step {step}: {len(got)} frames against the model's {len(expected)}"
            for event in model.next_events():
                if isinstance(event, Completion):
                    model_completions.append((event.wr_id, int(event.opcode)))
                elif isinstance(event, TransportStopped):
                    model_stops.append(event.record)
            assert [(int(c.wr_id), int(c.opcode)) for c in completions] == model_completions, f"step {step}"
            if model_stops:
                break
            for frame in got:
                found = data_tsn(frame)
                if found is not None and not silent:
                    peer.receive(found[1])
            if len(model_completions) == len(works) and not silent:
                silent = True          # every message done: the peer goes silent, new chunks only time out
                for work in works[:3]:
                    model.post_work(work)
                posted.extend(works[:3])
            elif not silent and rng.random() < 0.6:
                cumulative, blocks, duplicates = peer.sack()
                a_rwnd = max(0, peer_a_rwnd - 300 * len(blocks))
                model.peer_sack(0, SackChunk(cumulative, a_rwnd, blocks, duplicates), now)
                gaps = [{"start": s, "end": e} for s, e in blocks[:4]] + [{"start": 0, "end": 0}] * (4 - min(4, len(blocks)))
                await offer(ctx, dut.s_axis_peer_sack, peer_sack_layout().pack({
                    "association": 0, "cumulative_tsn_ack": cumulative, "a_rwnd": a_rwnd,
                    "gap_count": len(blocks), "gaps": gaps, "duplicate_count": len(duplicates)}))
            else:
                now += 1
                model.tick(now)
                ctx.set(dut.tick, 1)
                await ctx.tick()
                ctx.set(dut.tick, 0)
            step += 1
        assert model_stops and isinstance(model_stops[0], AssociationFailure)
        failure = model_stops[0]
        assert [(TransportOpcode(int(s.opcode)), int(s.tsn), int(s.first_tsn), int(s.error_count)) for s in stops] == [
            (TransportOpcode.FAILURE, failure.highest_tsn_sent, failure.cumulative_tsn_ack, failure.error_count)]
        # The row is the unit's: the host's ACK is refused, as the model refuses it.
        model.tsn_request(TsnOpcode.ACK, 0, failure.highest_tsn_sent)
        await offer(ctx, dut.s_axis_tsn, tsn_request_layout().pack(
            {"opcode": int(TsnOpcode.ACK), "association": 0, "tsn": failure.highest_tsn_sent}))
        await quiet(ctx)
        assert [event for event in model.next_events() if isinstance(event, RefusedTsn)]
        assert [(int(r.opcode), int(r.tsn)) for r in refused] == [(int(TsnOpcode.ACK), failure.highest_tsn_sent)]
        log.append(("transport resends", model.transport_resends))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for process in (network, work_port, *memory.processes(dut.m_axi)):
        sim.add_testbench(process, background=True)
    sim.add_testbench(host)
    sim.run()
    assert log and log[0][1] > 0         # the run retransmitted
