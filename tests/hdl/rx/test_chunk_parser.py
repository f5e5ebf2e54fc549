"""hdl.rx.chunk_parser.ChunkParser in Amaranth's simulator, fed SCTP packets built with the model.

Each chunk is built together with what the parser must do with it (the
oracle); well-formed packets are also decoded by ``model.sctp.packet`` to check the
oracle against the model's reading of RFC 4960 3.2.
"""

import random
import struct

import pytest
from amaranth.sim import Simulator

from abi.rx import AckDisposition, ChunkError, ChunkException
from hdl.rx.chunk_parser import ChunkParser
from hdl.stream.simulation import Pace, collector, packet_collector, packet_put, settle, stream_put
from model.ddp.sctp_adaptation import DdpSegmentChunkData, FunctionCode, SessionControl
from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.rdmap.messages import Opcode, rdmap_control_of, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import CHUNK_CLASSES, DataChunk, HeartbeatChunk, SackChunk, SctpPacket, UnknownChunk

UNKNOWN_TYPES = [t for t in range(1, 256) if t not in CHUNK_CLASSES]

WIDTHS_SIMULATED = [8, 64]


# ---- stimulus -----------------------------------------------------------

def ddp_segment(rng: random.Random, payload_length: int, opcode: Opcode | None = None) -> bytes:
    """A well-formed DDP segment (RFC 5041 4) carrying an RDMAP message (RFC 5040 4)."""
    opcode = rng.choice(list(Opcode)) if opcode is None else opcode
    payload = rng.randbytes(payload_length)
    last = rng.random() < 0.5
    if opcode.tagged:
        header = TaggedHeader(last, tagged_rsvd_ulp(opcode), rng.getrandbits(32), rng.getrandbits(64))
    else:
        invalidate = rng.getrandbits(32) if opcode.carries_invalidate_stag else 0
        header = UntaggedHeader(last, untagged_rsvd_ulp(opcode, invalidate), opcode.queue_number,
                                rng.getrandbits(32), rng.getrandbits(32))
    return DdpSegment(header, payload).encode()


def payload_length(rng: random.Random) -> int:
    return rng.choice([0, 1, 2, 3, 5, 8, 13, 28, 31, 64, rng.randrange(100), rng.randrange(2001)])


class Oracle:
    """Expected outputs, in order."""

    def __init__(self):
        self.segs, self.seg_metas, self.excs, self.exc_metas, self.errors = [], [], [], [], []
        self.acks = []

    def seg(self, association, chunk: DataChunk, segment: bytes, ddp_ssn: int):
        self.seg_metas.append((association, chunk.tsn, chunk.stream_id, ddp_ssn, len(segment)))
        if segment:
            self.segs.append(segment)
        self.ack(association, chunk, AckDisposition.SEGMENT)

    def exc(self, association, reason, chunk_bytes: bytes, data: DataChunk | None = None):
        length = struct.unpack_from("!H", chunk_bytes, 2)[0]
        self.exc_metas.append((association, reason, length))
        self.excs.append(chunk_bytes[:length])
        if data is not None:
            self.ack(association, data, AckDisposition.TO_HOST)

    def error(self, association, tsn, kind, data: DataChunk | None = None):
        self.errors.append((association, tsn, kind))
        if data is not None:
            self.ack(association, data, AckDisposition.REFUSED)

    def ack(self, association, chunk: DataChunk, disposition: AckDisposition):
        """A DATA chunk with its whole 16-byte header is acknowledged (RFC 4960 3.3.1, 6.2); whether it ends
        its packet is set once the packet is built (`packet_ends`)."""
        self.acks.append((association, chunk.tsn, disposition, len(chunk.user_data), False))

    def packet_ends(self, acks_before: int, ends: bool) -> None:
        """The packet's last chunk, if it has an ack record (the last one), ends the packet, or no longer does
        (a chunk was appended after it)."""
        if len(self.acks) > acks_before:
            self.acks[-1] = self.acks[-1][:4] + (ends,)


def data_chunk(rng, ppid, user_data, **flags) -> DataChunk:
    return DataChunk(tsn=rng.getrandbits(32), stream_id=rng.getrandbits(16), ssn=rng.getrandbits(16),
                     ppid=ppid, user_data=user_data, unordered=flags.get("unordered", True),
                     beginning=flags.get("beginning", True), ending=flags.get("ending", True))


def random_chunk(rng: random.Random, association: int, ddp: bool, oracle: Oracle, *, malformed: bool) -> bytes:
    """One chunk's bytes (unpadded), its fate recorded in ``oracle``."""
    kind = rng.choice(["seg", "seg", "seg", "session", "ppid", "sack", "heartbeat", "unknown"]
                      + (["ordered", "fragmented", "short", "short16"] if malformed else []))
    if kind in ("seg", "ordered", "fragmented", "short16"):
        ddp_ssn = rng.getrandbits(16)
        segment = ddp_segment(rng, payload_length(rng)) if kind != "short16" else b""
        user_data = DdpSegmentChunkData(ddp_ssn, segment).encode()
        flags = {}
        if kind == "ordered":
            flags["unordered"] = False
        elif kind == "fragmented":
            flags[rng.choice(["beginning", "ending"])] = False
        elif kind == "short16":
            user_data = user_data[:rng.choice([0, 1])]   # no room for the DDP-SSN
        chunk = data_chunk(rng, 16, user_data, **flags)
        if not ddp:
            oracle.exc(association, ChunkException.NOT_DDP, chunk.encode(), chunk)
        elif kind == "seg":
            oracle.seg(association, chunk, segment, ddp_ssn)
        else:
            error = {"ordered": ChunkError.ORDERED, "fragmented": ChunkError.FRAGMENTED,
                     "short16": ChunkError.TOO_SHORT}[kind]
            oracle.error(association, chunk.tsn, error, chunk)
        return chunk.encode()
    if kind in ("session", "ppid"):
        if kind == "session":
            user_data = SessionControl(rng.getrandbits(16), FunctionCode.INITIATE, rng.randbytes(rng.randrange(40))).encode()
            ppid, reason = 17, ChunkException.SESSION_CONTROL
        else:
            user_data = rng.randbytes(rng.randrange(60))
            ppid, reason = rng.choice([0, 15, 18, 0xFFFFFFFF]), ChunkException.OTHER_PPID
        chunk = data_chunk(rng, ppid, user_data, unordered=rng.random() < 0.7)
        oracle.exc(association, reason if ddp else ChunkException.NOT_DDP, chunk.encode(), chunk)
        return chunk.encode()
    if kind == "short":  # a DATA chunk with fewer than 16 bytes (RFC 4960 3.3.1)
        value = rng.randbytes(rng.randrange(12))
        chunk = UnknownChunk(0, 0x07, value).encode()
        if ddp:
            tsn = int.from_bytes(value[:4], "big") if len(value) >= 4 else 0
            oracle.error(association, tsn, ChunkError.TOO_SHORT)
        else:
            oracle.exc(association, ChunkException.NOT_DDP, chunk)
        return chunk
    if kind == "sack":
        chunk = SackChunk(rng.getrandbits(32), rng.getrandbits(32),
                          [(1, 2)] * rng.randrange(4), [rng.getrandbits(32)] * rng.randrange(3)).encode()
    elif kind == "heartbeat":
        chunk = HeartbeatChunk(rng.randbytes(rng.randrange(1, 50))).encode()
    else:
        chunk = UnknownChunk(rng.choice(UNKNOWN_TYPES), rng.getrandbits(8), rng.randbytes(rng.randrange(30))).encode()
    oracle.exc(association, ChunkException.CONTROL, chunk)
    return chunk


def pad(chunk: bytes) -> bytes:
    return chunk + bytes(-len(chunk) % 4)


def random_packet(rng: random.Random, oracle: Oracle, *, malformed: bool, max_chunks: int = 5):
    """(packet bytes, association, ddp); every chunk's fate is appended to ``oracle``."""
    association = rng.randrange(16)
    ddp = rng.random() < 0.8
    chunks = [random_chunk(rng, association, ddp, oracle, malformed=malformed)
              for _ in range(rng.randrange(max_chunks))]
    acks_before = len(oracle.acks)
    chunks.append(random_chunk(rng, association, ddp, oracle, malformed=malformed))
    oracle.packet_ends(acks_before, True)   # its padded end is the packet's (RFC 4960 3.2)
    header = struct.pack("!HHII", 1, 2, rng.getrandbits(32), 0)
    body = b"".join(pad(chunk) for chunk in chunks[:-1]) + chunks[-1]
    if rng.random() < 0.5:
        body += bytes(-len(chunks[-1]) % 4)   # the last chunk's padding is optional
    packet = header + body
    if not malformed:
        decoded = SctpPacket.decode(packet, verify_checksum=False)
        assert [chunk.encode() for chunk in decoded.chunks] == [pad(chunk) for chunk in chunks]
    return packet, association, ddp


def malformed_tail(rng: random.Random, packet: bytes, association: int, oracle: Oracle) -> bytes:
    """Append a chunk that ends the walk: length 0..3, past the end, or 1..3 stray bytes."""
    packet += bytes(-len(packet) % 4)
    kind = rng.choice(["zero", "below4", "past", "stray"])
    if kind == "stray":
        oracle.error(association, 0, ChunkError.PAST_END)
        return packet + rng.randbytes(rng.randrange(1, 4))
    body = rng.randbytes(rng.randrange(0, 24))
    length = {"zero": 0, "below4": rng.randrange(1, 4), "past": 4 + len(body) + rng.randrange(1, 300)}[kind]
    oracle.error(association, 0, ChunkError.TOO_SHORT if kind != "past" else ChunkError.PAST_END)
    # Whatever follows the bad chunk is never parsed: add a valid-looking SACK.
    return packet + struct.pack("!BBH", rng.randrange(256), 0, length) + body + SackChunk(1, 2).encode()


# ---- simulation ---------------------------------------------------------

def run(width: int, packets: list[tuple[bytes, int, int]], oracle: Oracle, seed: int, *,
        stall: float = 0.3, gap: float = 0.3):
    """Feed ``packets``; return the outputs and the number of cycles until the last input was taken."""
    dut = ChunkParser(width)
    rng = random.Random(seed)
    outputs = {name: [] for name in ("seg", "seg_meta", "exc", "exc_meta", "errors", "acks")}
    expected = {"seg": sum(1 for _ in oracle.segs), "seg_meta": len(oracle.seg_metas),
                "exc": len(oracle.excs), "exc_meta": len(oracle.exc_metas), "errors": len(oracle.errors),
                "acks": len(oracle.acks)}
    cycles, clock = [], [0]

    async def count(ctx):
        while True:
            await ctx.tick()
            clock[0] += 1

    async def data_source(ctx):
        pace = Pace(gap, seed=rng)
        for packet, association, ddp in packets:
            await packet_put(ctx, dut.pkt, packet, pace=pace, rng=rng)
        cycles.append(clock[0])

    async def meta_source(ctx):
        for packet, association, ddp in packets:
            await stream_put(ctx, dut.pkt_meta, {"association": association, "ddp": ddp, "length": len(packet)})

    async def watch(ctx):
        await settle(ctx, lambda: cycles and all(len(outputs[name]) >= count
                                                 for name, count in expected.items()),
                     budget=30 * sum(len(packet) // width + 2 for packet, _, _ in packets) + 200)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(count, background=True)
    simulator.add_testbench(data_source, background=True)
    simulator.add_testbench(meta_source, background=True)
    for name in outputs:
        port = getattr(dut, name)
        make = packet_collector if name in ("seg", "exc") else collector
        simulator.add_testbench(make(port, outputs[name], pace=Pace(stall, seed=rng)), background=True)
    simulator.add_testbench(watch)
    simulator.run()
    return outputs, (cycles[0] if cycles else None)


def check(outputs, oracle: Oracle, width: int):
    seg_metas = [(int(p.association), int(p.tsn), int(p.stream_id), int(p.ddp_ssn), int(p.length))
                 for p in outputs["seg_meta"]]
    exc_metas = [(int(p.association), ChunkException(p.reason), int(p.length)) for p in outputs["exc_meta"]]
    errors = [(int(p.association), int(p.tsn), ChunkError(int(p.kind))) for p in outputs["errors"]]
    acks = [(int(p.association), int(p.tsn), AckDisposition(int(p.disposition)), int(p.length),
             bool(p.packet_end)) for p in outputs["acks"]]
    assert acks == oracle.acks
    assert errors == oracle.errors
    assert seg_metas == oracle.seg_metas
    assert exc_metas == oracle.exc_metas
    assert outputs["seg"] == oracle.segs
    assert outputs["exc"] == oracle.excs


# ---- tests --------------------------------------------------------------



@pytest.mark.parametrize("width", WIDTHS_SIMULATED)
def test_bundles_of_random_chunks(width):
    """DDP segments of every opcode, session control, other PPIDs, SACK, HEARTBEAT, unknown types,
    DATA of non-DDP associations; random stalls on every output and gaps on the input (RFC 4960 3.2,
    RFC 5043 5.2)."""
    rng = random.Random(100 + width)
    oracle = Oracle()
    packets = [random_packet(rng, oracle, malformed=False) for _ in range(40)]
    opcodes = {rdmap_control_of(DdpSegment.decode(segment).header).opcode for segment in oracle.segs}
    assert opcodes == set(Opcode) and len(oracle.seg_metas) >= 20 and len(oracle.exc_metas) >= 20
    outputs, _ = run(width, packets, oracle, seed=width)
    check(outputs, oracle, width)


@pytest.mark.parametrize("width", WIDTHS_SIMULATED)
def test_malformed_chunks_and_recovery(width):
    """U=0 (RFC 5043 10), B/E clear (RFC 5043 9), DATA too short, length 0..3, length past the end and
    stray bytes: the right error, nothing forwarded for the chunk, and the next packet is parsed."""
    rng = random.Random(200 + width)
    oracle = Oracle()
    packets = []
    for index in range(36):
        acks_before = len(oracle.acks)
        packet, association, ddp = random_packet(rng, oracle, malformed=True, max_chunks=3)
        if index % 2:
            packet = malformed_tail(rng, packet, association, oracle)
            oracle.packet_ends(acks_before, False)   # the tail, not a DATA chunk, ends the packet
        packets.append((packet, association, ddp))
    kinds = {kind for _, _, kind in oracle.errors}
    assert kinds == set(ChunkError)
    assert {disposition for _, _, disposition, _, _ in oracle.acks} == set(AckDisposition)
    assert {end for *_, end in oracle.acks} == {False, True}
    outputs, _ = run(width, packets, oracle, seed=width + 1)
    check(outputs, oracle, width)


@pytest.mark.parametrize("width", [8])
def test_large_segments_back_to_back_throughput(width):
    """Large DDP segments without stalls: at most 2 cycles per chunk beyond one cycle per input beat."""
    rng = random.Random(7)
    oracle = Oracle()
    packets = []
    for _ in range(6):
        association = rng.randrange(16)
        chunks = []
        for _ in range(2):
            segment = ddp_segment(rng, rng.randrange(900, 1400))
            ddp_ssn = rng.getrandbits(16)
            chunk = data_chunk(rng, 16, DdpSegmentChunkData(ddp_ssn, segment).encode())
            oracle.seg(association, chunk, segment, ddp_ssn)
            chunks.append(pad(chunk.encode()))
        oracle.packet_ends(len(oracle.acks) - 1, True)
        packets.append((struct.pack("!HHII", 1, 2, 3, 0) + b"".join(chunks), association, True))
    outputs, cycles = run(width, packets, oracle, seed=3, stall=0, gap=0)
    check(outputs, oracle, width)
    beats = sum(-(-len(packet) // width) for packet, _, _ in packets)
    assert cycles <= beats + 2 * len(oracle.seg_metas) + 8
