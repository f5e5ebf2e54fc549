"""hdl.rx.ddp_header.DdpHeaderValidator built with ``read_requests`` (the receive engine's read responder) in
Amaranth's simulator, against the golden model.

Expected values: the model's header checks (``model.rdmap.messages.header_error`` after the DDP ones) and, for an
RDMA Read Request (untagged, QN 1, opcode 1), RFC 5040 4.4's fields as ``model.rdmap.messages.ReadRequest``
decodes them and the model's rule that the request is one whole 28-byte message (L = 1, MO = 0; else RDMAP
0x2/0xFF, ``model.engine.rx``). A request's payload never leaves on ``payload``. And throughput: the option
adds no wait on the block's input (its beat FIFO is as much deeper as the header waits longer).
"""

import random

import pytest
from amaranth.sim import Simulator

from hdl.rx.ddp_header import DdpHeaderValidator
from hdl.stream.simulation import Pace, beats_of, collector, packet_collector, settle, stream_put
from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.errors import RdmapError
from model.rdmap.messages import Opcode, ReadRequest, tagged_rsvd_ulp, untagged_rsvd_ulp
from tests.hdl.rx.test_ddp_header import model_endpoint, model_verdict, random_segment

READ = untagged_rsvd_ulp(Opcode.RDMA_READ_REQUEST)


def read_request(rng: random.Random, *, last=True, mo=0, extra=0, cut=28) -> bytes:
    body = ReadRequest(rng.getrandbits(32), rng.getrandbits(64), rng.getrandbits(32), rng.getrandbits(32),
                       rng.getrandbits(64)).encode()
    payload = (body + rng.randbytes(extra))[:cut + extra]
    return DdpSegment(UntaggedHeader(last, READ, 1, rng.getrandbits(32), mo), payload).encode()


def segments_of(rng: random.Random, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        kind = rng.choice(["read", "read", "odd_read", "valid", "bad", "short"])
        if kind == "read":
            out.append(read_request(rng))
        elif kind == "odd_read":
            out.append(rng.choice([read_request(rng, last=False), read_request(rng, mo=rng.randrange(1, 99)),
                                   read_request(rng, extra=rng.randrange(1, 40)),
                                   read_request(rng, cut=rng.randrange(28))]))
        else:
            out.append(random_segment(rng, kind))
    return out


def expected(raw: bytes):
    """(error number or None, request fields or None, payload or None), as the model reads ``raw``."""
    segment, error = model_verdict(model_endpoint(), raw)
    if segment is None:
        return error, None, None
    header = segment.header
    is_read = not header.tagged and header.qn == 1 and header.rsvd_ulp >> 32 & 0xF == Opcode.RDMA_READ_REQUEST
    if not is_read:
        return error, None, (segment.payload if error is None and segment.payload else None)
    body = ReadRequest.decode(segment.payload[:28].ljust(28, b"\0"))
    if error is None and (not header.last or header.mo or len(segment.payload) != 28):
        error = RdmapError.OPERATION_UNSPECIFIED.number
    return error, body, None


def run(width: int, segments: list[bytes], *, stall: float, seed: int, read_requests: bool = True):
    dut = DdpHeaderValidator(width, read_requests=read_requests)
    rng = random.Random(seed)
    records, payloads, waits = [], [], []
    payload_count = sum(expected(s)[2] is not None for s in segments) if read_requests else 0

    async def data_source(ctx):
        for segment in segments:
            for beat in beats_of(segment, width, rng):
                await stream_put(ctx, dut.seg, beat)

    async def meta_source(ctx):
        for index, segment in enumerate(segments):
            await stream_put(ctx, dut.seg_meta, {"association": 0, "tsn": index, "stream_id": 0, "ddp_ssn": index,
                                                 "length": len(segment)})

    async def monitor(ctx):
        while True:
            _, _, valid, ready = await ctx.tick().sample(dut.seg.valid, dut.seg.ready)
            if valid and not ready:
                waits.append(1)

    async def always_ready(ctx):
        """Both outputs taken on every cycle (the collectors of hdl.stream.simulation spend a cycle a packet)."""
        ctx.set(dut.segment.ready, 1)
        ctx.set(dut.payload.ready, 1)
        current = b""
        while True:
            _, _, record_valid, record, beat_valid, beat = await ctx.tick().sample(
                dut.segment.valid, dut.segment.payload, dut.payload.valid, dut.payload.payload)
            if record_valid:
                records.append(record)
            if beat_valid:
                current += int(beat.data).to_bytes(width, "little")[:bin(int(beat.keep)).count("1")]
                if beat.last:
                    payloads.append(current)
                    current = b""

    async def watch(ctx):
        await settle(ctx, lambda: len(records) >= len(segments) and len(payloads) >= payload_count,
                     budget=30 * sum(len(s) // width + 2 for s in segments) + 200)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    outputs = [collector(dut.segment, records, pace=Pace(stall, seed=rng)),
               packet_collector(dut.payload, payloads, pace=Pace(stall, seed=rng))] if stall else [always_ready]
    for process in (data_source, meta_source, monitor, *outputs):
        sim.add_testbench(process, background=True)
    sim.add_testbench(watch)
    sim.run()
    return records, payloads, len(waits)


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_read_requests_decoded_and_checked_as_the_model(width):
    rng = random.Random(29 + width)
    segments = segments_of(rng, 120)
    records, payloads, _ = run(width, segments, stall=0.2, seed=width)
    assert len(records) == len(segments)
    wanted_payloads = []
    for index, (record, raw) in enumerate(zip(records, segments)):
        error, request, payload = expected(raw)
        where = f"segment {index}: {raw[:46].hex()} ({len(raw)} bytes)"
        got_error = (int(record.error.layer), int(record.error.etype), int(record.error.code)) \
            if record.error.valid else None
        assert got_error == (tuple(error) if error else None), where
        assert int(record.read_request) == (request is not None), where
        if request is not None:
            assert (record.stag, record.to, record.read_size, record.source_stag, record.source_to) == \
                (request.sink_stag, request.sink_to, request.size, request.source_stag, request.source_to), where
        if payload is not None:
            wanted_payloads.append(payload)
    assert payloads == wanted_payloads   # no Read Request's bytes among them


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_read_requests_add_no_input_wait(width):
    """Both outputs always ready, Read Requests (46 bytes gathered) among Writes and Sends of every length, back to
    back with no gap between segments: the input waits no more cycles than the validator without the option on
    the same segments (the block spends a cycle on some segments either way: in the engine each frame's headers,
    66 bytes and more before a segment, leave the validator idle long enough to absorb it; ``rnic bench rx``
    measures the engine's input: no stall)."""
    rng = random.Random(7 * width)
    segments = []
    for _ in range(30):
        segments.append(read_request(rng))
        segments.append(random_segment(rng, "valid"))
    segments += [DdpSegment(TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), 1, 2),
                            rng.randbytes(width * rng.randrange(3, 40))).encode() for _ in range(20)]
    records, _, waits = run(width, segments, stall=0.0, seed=width)
    _, _, waits_without = run(width, segments, stall=0.0, seed=width, read_requests=False)
    assert len(records) == len(segments)
    assert waits <= waits_without
