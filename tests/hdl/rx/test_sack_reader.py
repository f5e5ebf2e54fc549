"""hdl.rx.sack_reader.SackReader: the SACK chunks of the rows whose transport is the engine's become
peer-SACK records, every other chunk reaches the host byte for byte. The chunks are built by scapy (an
SCTP encoder nobody here wrote); a SACK whose length does not match its counts (RFC 4960 3.3.4) is dropped
and counted."""

import random
import struct

import pytest
from amaranth.sim import Simulator
from scapy.layers.sctp import SCTPChunkHeartbeatReq, SCTPChunkSACK, SCTPChunkShutdown

from abi.rx import ChunkException
from hdl.rx.sack_reader import SackReader
from hdl.stream.simulation import Pace, collector, packet_collector, packet_put, settle, stream_put

ROWS = 0b0101          # associations 0 and 2 hand their peer's SACKs to the engine


def sack_bytes(rng: random.Random) -> tuple[bytes, tuple]:
    """A SACK chunk of 0..6 Gap Ack Blocks and 0..5 Duplicate TSNs, and the record it gives."""
    gaps = [(rng.randrange(1, 1 << 16), rng.randrange(1 << 16)) for _ in range(rng.randint(0, 6))]
    duplicates = [rng.randrange(1 << 32) for _ in range(rng.randint(0, 5))]
    cumulative, a_rwnd = rng.randrange(1 << 32), rng.randrange(1 << 32)
    chunk = bytes(SCTPChunkSACK(cumul_tsn_ack=cumulative, a_rwnd=a_rwnd, n_gap_ack=len(gaps),
                                n_dup_tsn=len(duplicates), gap_ack_list=[f"{s}:{e}" for s, e in gaps],
                                dup_tsn_list=duplicates))
    shown = gaps[:4] + [(0, 0)] * (4 - min(4, len(gaps)))
    return chunk, (cumulative, a_rwnd, len(gaps), tuple(shown), len(duplicates))


def chunks(rng: random.Random, count: int):
    """(association, reason, bytes, record or None, malformed) of each chunk offered."""
    out = []
    for _ in range(count):
        association = rng.randrange(4)
        kind = rng.random()
        if kind < 0.5:
            chunk, record = sack_bytes(rng)
            out.append((association, ChunkException.CONTROL, chunk, record, False))
        elif kind < 0.6:                      # a length field one block short of its counts
            chunk, record = sack_bytes(rng)
            chunk = chunk[:2] + struct.pack("!H", len(chunk) - 4) + chunk[4:-4]
            out.append((association, ChunkException.CONTROL, chunk, record, True))
        elif kind < 0.8:
            out.append((association, ChunkException.CONTROL, bytes(SCTPChunkHeartbeatReq()),
                        None, False))
        elif kind < 0.9:
            out.append((association, ChunkException.CONTROL,
                        bytes(SCTPChunkShutdown(cumul_tsn_ack=rng.randrange(1 << 32))), None, False))
        else:                                  # a DATA chunk of session control whose first byte is 3
            out.append((association, ChunkException.SESSION_CONTROL, bytes([3]) + rng.randbytes(30), None, False))
    return out


@pytest.mark.parametrize("width", [8, 32])
def test_sacks_of_the_engines_rows_become_records_the_rest_reach_the_host(width):
    rng = random.Random(width)
    offered = chunks(rng, 120)
    dut = SackReader(width, 4)
    records, host_metas, host_chunks, malformed = [], [], [], []

    async def meta_producer(ctx):        # the chunk parser's two outputs, each at its own pace
        ctx.set(dut.rows, ROWS)
        for association, reason, chunk, _, _ in offered:
            meta = {"association": association, "reason": reason, "length": len(chunk)}
            if reason == ChunkException.CONTROL:
                meta["length"] = int.from_bytes(chunk[2:4], "big")    # the chunk's length field
            await stream_put(ctx, dut.meta, meta, pace=Pace(0.2, seed=1))

    async def chunk_producer(ctx):
        for _, _, chunk, _, _ in offered:
            await packet_put(ctx, dut.chunks, chunk, pace=Pace(0.2, seed=2))

    diverted = [entry for entry in offered if entry[1] == ChunkException.CONTROL and ROWS >> entry[0] & 1
                and entry[2][0] == 3]
    passed = [entry for entry in offered if entry not in diverted]

    async def watch(ctx):
        await settle(ctx, lambda: len(records) + sum(e[4] for e in diverted) >= len(diverted)
                     and len(host_chunks) >= len(passed), budget=40000)
        malformed.append(ctx.get(dut.malformed))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(meta_producer, background=True)
    sim.add_testbench(chunk_producer, background=True)
    sim.add_testbench(collector(dut.sacks, records, pace=Pace(0.3, seed=1)), background=True)
    sim.add_testbench(collector(dut.host_meta, host_metas, pace=Pace(0.3, seed=2)), background=True)
    sim.add_testbench(packet_collector(dut.host_chunks, host_chunks, pace=Pace(0.3, seed=3)), background=True)
    sim.add_testbench(watch)
    sim.run()

    expected = [(entry[0], *entry[3]) for entry in diverted if not entry[4]]
    got = [(r.association, r.cumulative_tsn_ack, r.a_rwnd, r.gap_count,
            tuple((r.gaps[i].start, r.gaps[i].end) for i in range(4)), r.duplicate_count) for r in records]
    assert got == expected and expected and any(entry[4] for entry in diverted)
    assert malformed == [sum(entry[4] for entry in diverted)]
    assert host_chunks == [entry[2] for entry in passed]
    assert [(m.association, m.reason) for m in host_metas] == [(entry[0], entry[1]) for entry in passed]
