"""hdl.rx.ddp_header.DdpHeaderValidator in Amaranth's simulator against the golden model.

Headers are built and decoded with ``model.ddp.segment``/``model.rdmap.messages``; the expected
error number of each segment is what the model's own checks return
(``DdpSink._validate`` with ``RdmapEndpoint._check_rdmap_header`` as its ULP
check, RFC 5041 7.1/7.2, RFC 5040 4.1/4.2), restricted to the header-level
ones this block owns.
"""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from hdl.rx.chunk_parser import ChunkParser
from hdl.rx.ddp_header import DdpHeaderValidator
from hdl.rx.layouts import packet_meta_layout, segment_info_layout
from hdl.stream.packet import packet_signature
from hdl.stream.simulation import Pace, collector, packet_collector, packet_put, settle, stream_put
from model.ddp.memory import MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.errors import DdpError, DecodeError, RdmapError
from model.rdmap.endpoint import RdmapEndpoint
from model.rdmap.messages import Opcode, invalidate_stag_of, rdmap_control_of
from model.sctp.packet import DataChunk, SackChunk, SctpPacket

HEADER_ERRORS = {
    DdpError.LOCAL_CATASTROPHIC, DdpError.TAGGED_INVALID_VERSION, DdpError.UNTAGGED_INVALID_VERSION,
    DdpError.INVALID_QN, RdmapError.INVALID_VERSION, RdmapError.UNEXPECTED_OPCODE,
}


def model_endpoint() -> RdmapEndpoint:
    """An endpoint with a Read outstanding: Read Response matching is not this block's check."""
    endpoint = RdmapEndpoint(pd=ProtectionDomain(1), memory_table=MemoryTable(), host_memory=SparseMemory())
    endpoint.post_read(1, 0, 2, 0, 100)
    return endpoint


def model_verdict(endpoint: RdmapEndpoint, raw: bytes):
    """(decoded segment or None, header-level error number or None), as the model reads ``raw``."""
    try:
        segment = DdpSegment.decode(raw)
    except DecodeError:
        return None, DdpError.LOCAL_CATASTROPHIC.number
    problem, _ = endpoint.sink._validate(segment)
    return segment, (problem.number if problem in HEADER_ERRORS else None)


def random_header(rng: random.Random, *, valid: bool):
    """A tagged or untagged header; when not ``valid``, some fields are out of range."""
    opcode = rng.choice(list(Opcode))
    tagged = opcode.tagged
    dv, rv, op, qn = 1, 1, int(opcode), opcode.queue_number
    if not valid:
        field = rng.choice(["dv", "rv", "op", "qn", "t", "mix"])
        if field in ("dv", "mix"):
            dv = rng.randrange(4)
        if field in ("rv", "mix"):
            rv = rng.randrange(4)
        if field in ("op", "mix"):
            op = rng.randrange(16)
        if field in ("qn", "mix"):
            qn = rng.choice([0, 1, 2, 3, 4, 0x80000000, 0xFFFFFFFF])
        if field in ("t", "mix"):
            tagged = not tagged
    control = (rv << 6) | (rng.getrandbits(2) << 4) | op
    last, rsvd = rng.random() < 0.5, rng.getrandbits(4)
    if tagged:
        return TaggedHeader(last, control, rng.getrandbits(32), rng.getrandbits(64), rsvd, dv)
    invalidate = rng.getrandbits(32) if rng.random() < 0.5 else 0
    return UntaggedHeader(last, (control << 32) | invalidate, qn if qn is not None else rng.randrange(3),
                          rng.getrandbits(32), rng.getrandbits(32), rsvd, dv)


def random_segment(rng: random.Random, kind: str) -> bytes:
    length = rng.choice([0, 1, 3, 7, 8, 9, 20, rng.randrange(200), rng.randrange(2001)])
    if kind == "short":
        return rng.randbytes(rng.randrange(18))
    if kind == "noise":
        return rng.randbytes(rng.randrange(40))
    return DdpSegment(random_header(rng, valid=kind == "valid"), rng.randbytes(length)).encode()


# ---- simulation ---------------------------------------------------------

def run(width: int, segments: list[bytes], expected_payloads: int, seed: int, *, stall=0.3, gap=0.3):
    dut = DdpHeaderValidator(width)
    rng = random.Random(seed)
    records, payloads = [], []

    async def data_source(ctx):
        pace = Pace(gap, seed=rng)
        for segment in segments:
            await packet_put(ctx, dut.seg, segment, pace=pace, rng=rng)

    async def meta_source(ctx):
        for index, segment in enumerate(segments):
            await stream_put(ctx, dut.seg_meta, {"association": index % 16, "tsn": 1000 + index,
                                                 "stream_id": index * 7 % 65536, "ddp_ssn": index,
                                                 "length": len(segment)})

    async def watch(ctx):
        await settle(ctx, lambda: len(records) >= len(segments) and len(payloads) >= expected_payloads,
                     budget=30 * sum(len(s) // width + 2 for s in segments) + 200)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(data_source, background=True)
    simulator.add_testbench(meta_source, background=True)
    simulator.add_testbench(collector(dut.segment, records, pace=Pace(stall, seed=rng)), background=True)
    simulator.add_testbench(packet_collector(dut.payload, payloads, pace=Pace(stall, seed=rng)), background=True)
    simulator.add_testbench(watch)
    simulator.run()
    return records, payloads


def check(width: int, segments: list[bytes], seed: int, **kwargs):
    endpoint = model_endpoint()
    verdicts = [model_verdict(endpoint, raw) for raw in segments]
    expected_payloads = [segment.payload for segment, error in verdicts if error is None and segment.payload]
    records, payloads = run(width, segments, len(expected_payloads), seed, **kwargs)
    assert len(records) == len(segments)
    for index, (record, raw, (segment, error)) in enumerate(zip(records, segments, verdicts)):
        where = f"segment {index}: {raw[:18].hex()} ({len(raw)} bytes)"
        assert (int(record.association), int(record.tsn), int(record.stream_id), int(record.ddp_ssn)) == \
            (index % 16, 1000 + index, index * 7 % 65536, index), where
        got_error = (int(record.error.layer), int(record.error.etype), int(record.error.code)) \
            if record.error.valid else None
        assert got_error == (tuple(error) if error else None), where
        if segment is None:
            assert int(record.payload_length) == 0, where
            continue
        header = segment.header
        control = rdmap_control_of(header)
        assert (record.tagged, record.last, record.dv, record.rv, record.opcode) == \
            (header.tagged, header.last, header.dv, control.rv, control.opcode), where
        if header.tagged:
            assert (record.stag, record.to, record.qn, record.msn, record.mo, record.invalidate_stag) == \
                (header.stag, header.to, 0, 0, 0, 0), where
        else:
            assert (record.stag, record.to, record.qn, record.msn, record.mo, record.invalidate_stag) == \
                (0, 0, header.qn, header.msn, header.mo, invalidate_stag_of(header)), where
        assert int(record.payload_length) == len(segment.payload), where
    assert payloads == expected_payloads
    return verdicts


# ---- tests --------------------------------------------------------------



@pytest.mark.parametrize("width", [8, 64])
def test_valid_segments_every_opcode(width):
    """Tagged (RFC 5041 4.2) and untagged (4.3) headers of every RDMAP opcode (RFC 5040 4.2), payloads
    0..2000 bytes, decoded as the model decodes them; payload byte-exact from lane 0."""
    rng = random.Random(width)
    segments = [random_segment(rng, "valid") for _ in range(60)]
    verdicts = check(width, segments, seed=width)
    assert {rdmap_control_of(s.header).opcode for s, _ in verdicts} == set(Opcode)
    assert all(error is None for _, error in verdicts)


@pytest.mark.parametrize("width", [8, 64])
def test_header_errors_in_model_order(width):
    """Short segments, DV, QN, RV, opcode/buffer-model/queue errors and noise: the error number the model
    reports (RFC 5041 7.2, RFC 5040 7.2), the record still out, no payload beats; good segments in between
    still pass."""
    rng = random.Random(50 + width)
    kinds = ["bad"] * 6 + ["valid"] * 2 + ["short", "noise"]
    segments = [random_segment(rng, rng.choice(kinds)) for _ in range(100)] + [b""]
    verdicts = check(width, segments, seed=width + 3)
    seen = {error for _, error in verdicts}
    assert seen >= {error.number for error in HEADER_ERRORS} | {None}


def test_back_to_back_without_stalls():
    """One beat per cycle on the input with no stalls: every segment still comes out right."""
    rng = random.Random(9)
    segments = [random_segment(rng, rng.choice(["valid", "bad"])) for _ in range(40)]
    check(8, segments, seed=1, stall=0, gap=0)


def exhaustive_headers() -> list[bytes]:
    """Every DV, RV and opcode value, on tagged and on untagged headers with QN 0..3, and every short
    length: each check's boundaries and every pair of competing errors (first failure wins)."""
    rng = random.Random(5)
    segments = []
    for dv in range(4):
        for rv in range(4):
            for opcode in range(16):
                control = rv << 6 | opcode
                payload = rng.randbytes(rng.randrange(4))
                segments.append(DdpSegment(TaggedHeader(True, control, 0x12345678, 1 << 63 | 5, 0, dv), payload).encode())
                for qn in range(4):
                    header = UntaggedHeader(False, control << 32 | 0xCAFEF00D, qn, 7, 9, 0, dv)
                    segments.append(DdpSegment(header, payload).encode())
    good_tagged = DdpSegment(TaggedHeader(True, 0x40, 1, 2), b"").encode()
    good_untagged = DdpSegment(UntaggedHeader(True, 0x43 << 32, 0, 1, 0), b"").encode()
    segments += [good_tagged[:length] for length in range(15)]
    segments += [good_untagged[:length] for length in range(19)]
    return segments


@pytest.mark.parametrize("width", [8, 64])
def test_every_check_boundary(width):
    """Exhaustive DV x RV x opcode x T x QN 0..3 and truncation at every header length: the model's
    error number for each (RFC 5041 7.2, RFC 5040 7.2; order of model/ddp/sink.py)."""
    segments = exhaustive_headers()
    verdicts = check(width, segments, seed=width, stall=0.1, gap=0.1)
    assert {error for _, error in verdicts} == {error.number for error in HEADER_ERRORS} | {None}


class _ParserAndValidator(wiring.Component):
    """The receive path from checked SCTP packets to DDP segment records and payload."""

    def __init__(self, width: int):
        self._width = width
        super().__init__({
            "pkt": In(packet_signature(width)),
            "pkt_meta": In(stream.Signature(packet_meta_layout())),
            "segment": Out(stream.Signature(segment_info_layout())),
            "payload": Out(packet_signature(width)),
        })

    def elaborate(self, platform):
        m = Module()
        parser = m.submodules.parser = ChunkParser(self._width)
        validator = m.submodules.validator = DdpHeaderValidator(self._width)
        wiring.connect(m, wiring.flipped(self.pkt), parser.pkt)
        wiring.connect(m, wiring.flipped(self.pkt_meta), parser.pkt_meta)
        wiring.connect(m, parser.seg, validator.seg)
        wiring.connect(m, parser.seg_meta, validator.seg_meta)
        wiring.connect(m, wiring.flipped(self.segment), validator.segment)
        wiring.connect(m, wiring.flipped(self.payload), validator.payload)
        m.d.comb += [parser.exc.ready.eq(1), parser.exc_meta.ready.eq(1), parser.errors.ready.eq(1),
                     parser.acks.ready.eq(1)]
        return m


@pytest.mark.parametrize("width", [8, 64])
def test_behind_the_chunk_parser(width):
    """ChunkParser -> DdpHeaderValidator on bundled SCTP packets (RFC 5043 5.2.2): DDP segments among
    SACKs, good and bad headers, 0- to 17-byte segments; TSN and DDP-SSN carried through."""
    rng = random.Random(300 + width)
    dut = _ParserAndValidator(width)
    packets, expected = [], []
    endpoint = model_endpoint()
    for _ in range(25):
        chunks = []
        for _ in range(rng.randrange(1, 4)):
            kind = rng.choice(["valid", "valid", "bad", "short"])
            segment = random_segment(rng, kind)
            chunk = DataChunk(tsn=rng.getrandbits(32), stream_id=rng.getrandbits(16), ssn=0, ppid=16,
                              user_data=DdpSegmentChunkData(rng.getrandbits(16), segment).encode(), unordered=True)
            chunks.append(chunk)
            expected.append((chunk.tsn, chunk.stream_id, DdpSegmentChunkData.decode(chunk.user_data).ddp_ssn,
                             model_verdict(endpoint, segment)))
            if rng.random() < 0.5:
                chunks.append(SackChunk(rng.getrandbits(32), 1000))
        packets.append(SctpPacket(1, 2, 3, chunks).encode())
    records, received = [], []

    async def source(ctx):
        for packet in packets:
            ctx.set(dut.pkt_meta.payload, {"association": 5, "ddp": 1, "length": len(packet)})
            ctx.set(dut.pkt_meta.valid, 1)
            await packet_put(ctx, dut.pkt, packet, rng=rng)
        ctx.set(dut.pkt_meta.valid, 0)

    payloads = [s.payload for _, _, _, (s, error) in expected if error is None and s.payload]

    async def watch(ctx):
        await settle(ctx, lambda: len(records) >= len(expected) and len(received) >= len(payloads), budget=20000)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(source, background=True)
    simulator.add_testbench(collector(dut.segment, records, pace=Pace(0.3, seed=rng)), background=True)
    simulator.add_testbench(packet_collector(dut.payload, received, pace=Pace(0.3, seed=rng)), background=True)
    simulator.add_testbench(watch)
    simulator.run()
    assert len(records) == len(expected)
    for record, (tsn, stream_id, ddp_ssn, (segment, error)) in zip(records, expected):
        assert (int(record.association), int(record.tsn), int(record.stream_id), int(record.ddp_ssn)) == \
            (5, tsn, stream_id, ddp_ssn)
        got = (int(record.error.layer), int(record.error.etype), int(record.error.code)) if record.error.valid else None
        assert got == (tuple(error) if error else None)
        if segment is not None and error is None:
            assert int(record.opcode) == rdmap_control_of(segment.header).opcode
            assert int(record.payload_length) == len(segment.payload)
    assert received == payloads
