"""hdl.tx.segmenter.Segmenter in Amaranth's simulator: RFC 5041 5.2 segmentation and the counters.

The worked example of RFC 5041 5.2 (a 2048-octet untagged message at MULPDU
1500: MO 0 with 1482 octets, then MO 1482 with 566) is checked with the RFC's
numbers; random messages against the model's ``DdpSource`` (TO, MO, MSN, L,
payload lengths); TSN per association and DDP-SSN per stream wrap; a Read
Request is one segment that reads nothing; the segments with ``fetch`` name each payload's bytes.
"""

import random

from amaranth.sim import Simulator

from abi.tx import WorkOpcode
from hdl.stream.simulation import Pace, collector, stream_put
from hdl.tx.segmenter import Segmenter
from model.ddp.source import DdpSource
from model.rdmap.messages import QueueNumber


def fields(payload) -> dict:
    return {name: int(getattr(payload, name)) for name in payload.shape().members}


def segment(works, rows, streams, expected_segments, *, stall=0.0, seed=0):
    """Run ``works`` (dicts of work request fields) after writing ``rows`` and ``streams``."""
    dut = Segmenter(associations=2, stream_ids=4)
    rng = random.Random(seed)
    segments = []

    async def host(ctx):
        for row in rows:
            await stream_put(ctx, dut.association_write, row)
        for index, first_ssn in streams.items():
            await stream_put(ctx, dut.stream_write, {"index": index, "first_ssn": first_ssn})
        for work in works:
            await stream_put(ctx, dut.work, work, pace=Pace(stall, seed=rng))

    async def wait(ctx):
        for _ in range(50 * expected_segments + 200):
            if len(segments) >= expected_segments:
                break
            await ctx.tick()
        await ctx.tick().repeat(20)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(host, background=True)
    simulator.add_testbench(collector(dut.segments, segments, pace=Pace(stall, seed=rng)), background=True)
    simulator.add_testbench(wait)
    simulator.run()
    segments = [fields(s) for s in segments]
    return segments, [{"address": s["address"], "length": s["payload_length"]} for s in segments if s["fetch"]]


def row(index, mulpdu, next_tsn=0):
    return {"index": index, "mulpdu": mulpdu, "next_tsn": next_tsn}


def test_rfc5041_worked_example():
    """RFC 5041 5.2: 2048 octets untagged at MULPDU 1500 -> MO 0 (1482 octets), MO 1482 (566 octets);
    tagged, the header is 14 octets (4.2): 1486 then 562, TO advancing from the message's TO."""
    works = [{"opcode": WorkOpcode.SEND, "association": 0, "stream_id": 0, "host_address": 0x1000, "length": 2048},
             {"opcode": WorkOpcode.RDMA_WRITE, "association": 0, "stream_id": 0, "host_address": 0x9000,
              "length": 2048, "stag": 0x77, "to": 0x100}]
    segments, fetches = segment(works, [row(0, 1500)], {0: 1}, 4)
    assert [(s["mo"], s["payload_length"], s["last"]) for s in segments[:2]] == [(0, 1482, 0), (1482, 566, 1)]
    assert [(s["to"], s["payload_length"], s["last"]) for s in segments[2:]] == [(0x100, 1486, 0), (0x100 + 1486, 562, 1)]
    assert [(f["address"], f["length"]) for f in fetches] == [(0x1000, 1482), (0x1000 + 1482, 566),
                                                               (0x9000, 1486), (0x9000 + 1486, 562)]
    assert [s["ddp_ssn"] for s in segments] == [1, 2, 3, 4]
    assert segments[0]["msn"] == segments[1]["msn"] == 1


def test_random_messages_against_the_model():
    rng = random.Random(5)
    mulpdus = {0: 516, 1: 1480}
    rows = [row(0, 516, 0xFFFFFFFE), row(1, 1480, 100)]
    streams = {0: 0xFFFF, 1: 1, 5: 7}
    stream_of = {0: (0, 0), 1: (0, 1), 5: (1, 1)}
    sources = {index: DdpSource(mulpdus[stream_of[index][0]]) for index in streams}
    ssn, tsn = dict(streams), {0: 0xFFFFFFFE, 1: 100}
    works, expected, expected_fetches = [], [], []
    for _ in range(40):
        index = rng.choice(list(streams))
        association, stream_id = stream_of[index]
        opcode = rng.choice(list(WorkOpcode))
        length = rng.choice((0, 1, rng.randrange(3000), 498, 502, 1462, 1466))
        work = {"opcode": opcode, "association": association, "stream_id": stream_id,
                "host_address": rng.getrandbits(64) - 4000 if rng.random() < 0.5 else rng.getrandbits(32),
                "length": length, "stag": rng.getrandbits(32), "to": rng.getrandbits(63),
                "sink_stag": rng.getrandbits(32), "sink_to": rng.getrandbits(64), "invalidate_stag": rng.getrandbits(32)}
        works.append(work)
        source = sources[index]
        if opcode is WorkOpcode.RDMA_WRITE:
            model = source.tagged_message(bytes(length), work["stag"], work["to"])
        elif opcode is WorkOpcode.RDMA_READ_REQUEST:
            model = source.untagged_message(bytes(28), QueueNumber.READ_REQUEST)
        elif opcode is WorkOpcode.TERMINATE:
            model = source.untagged_message(bytes(length), QueueNumber.TERMINATE)
        else:
            model = source.untagged_message(bytes(length), QueueNumber.SEND)
        offset = 0
        for ddp in model:
            header = ddp.header
            payload = 0 if opcode is WorkOpcode.RDMA_READ_REQUEST else len(ddp.payload)
            record = {"association": association, "stream_id": stream_id, "tsn": tsn[association],
                      "ddp_ssn": ssn[index], "opcode": opcode, "last": int(header.last), "payload_length": payload,
                      "size": length}
            record.update({"to": header.to, "stag": work["stag"]} if header.tagged else
                          {"msn": header.msn, "mo": header.mo,
                           "invalidate_stag": work["invalidate_stag"] if opcode in (
                               WorkOpcode.SEND_WITH_INVALIDATE, WorkOpcode.SEND_WITH_SE_AND_INVALIDATE) else 0})
            if opcode is WorkOpcode.RDMA_READ_REQUEST:
                record.update(stag=work["stag"], to=work["to"], sink_stag=work["sink_stag"], sink_to=work["sink_to"])
            expected.append(record)
            if payload:
                expected_fetches.append({"address": (work["host_address"] + offset) % (1 << 64), "length": payload})
            offset += payload
            tsn[association] = (tsn[association] + 1) & 0xFFFFFFFF
            ssn[index] = (ssn[index] + 1) & 0xFFFF
    segments, fetches = segment(works, rows, streams, len(expected), stall=0.3, seed=1)
    assert len(segments) == len(expected)
    for got, want in zip(segments, expected):
        assert {name: got[name] for name in want} == want
    assert fetches == expected_fetches


def test_counters_carry_across_requests():
    """A request's TSNs and DDP-SSNs continue where the previous request of the association and stream ended."""
    works = [{"opcode": WorkOpcode.RDMA_WRITE, "association": 1, "stream_id": 2, "host_address": 0,
              "length": 10 * 100}] * 3
    dut_segments, _ = segment(works, [row(1, 114)], {6: 1}, 30)
    assert [s["payload_length"] for s in dut_segments] == [100] * 30
    assert [s["tsn"] for s in dut_segments] == list(range(30))
    assert [s["ddp_ssn"] for s in dut_segments] == list(range(1, 31))
    assert [s["to"] for s in dut_segments] == [100 * (i % 10) for i in range(30)]
