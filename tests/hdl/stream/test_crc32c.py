"""hdl.stream.crc32c.Crc32c in Amaranth's own simulator: quick checks of the CRC block."""

import random

import crc32c
import pytest
from amaranth.lib.crc import catalog
from amaranth.sim import Simulator

from hdl.stream.crc32c import Crc32c, crc_register_after_bytes
from hdl.stream.packet import keep_mask, packet_layout, packet_signature
from hdl.stream.simulation import stream_get

RFC3720_VECTORS = [  # RFC 3720 B.4
    (bytes(32), 0x8A9136AA),
    (bytes([0xFF] * 32), 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


def simulate(width_bytes: int, packets: list[bytes], *, junk_lanes: bool = True) -> tuple[list[int], list[int]]:
    """Send ``packets`` back to back; return the CRCs and the cycles on which beats were refused."""
    dut = Crc32c(width_bytes)
    results, refused = [], []
    rng = random.Random(width_bytes)

    async def source(ctx):
        cycle = 0
        for packet in packets:
            for offset in range(0, len(packet), width_bytes):
                chunk = packet[offset:offset + width_bytes]
                # Lanes outside keep carry junk: the block must ignore them.
                padding = rng.randbytes(width_bytes - len(chunk)) if junk_lanes else bytes(width_bytes - len(chunk))
                ctx.set(dut.sink.payload, {
                    "data": int.from_bytes(chunk + padding, "little"),
                    "keep": keep_mask(len(chunk)),
                    "last": offset + width_bytes >= len(packet),
                })
                ctx.set(dut.sink.valid, 1)
                while True:
                    _, _, ready = await ctx.tick().sample(dut.sink.ready)
                    cycle += 1
                    if ready:
                        break
                    refused.append(cycle)
        ctx.set(dut.sink.valid, 0)

    async def sink(ctx):
        while len(results) < len(packets):
            results.append(await stream_get(ctx, dut.crc))
        ctx.set(dut.crc.ready, 1)  # the CRC must keep up with ready held high: never refuse a beat

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(source)
    simulator.add_testbench(sink)
    simulator.run_until(1e-8 * (100 + 2 * sum(len(packet) for packet in packets)))
    return results, refused


def test_packet_layout():
    layout = packet_layout(8)
    assert layout.size == 8 * 8 + 8 + 1
    assert layout["data"].offset == 0 and layout["keep"].offset == 64 and layout["last"].offset == 72
    assert packet_signature(8).members["payload"].shape == layout
    assert keep_mask(3) == 0b111
    with pytest.raises(ValueError):
        packet_layout(6)


def test_register_model_matches_the_catalog():
    """The matrices come from this bit-level model; it must be amaranth's CRC32_ISCSI."""
    parameters = catalog.CRC32_ISCSI(8)
    for data in [b"", b"a", bytes(range(50)), random.Random(1).randbytes(300)]:
        expected = parameters.compute(data)
        assert crc_register_after_bytes(0xFFFFFFFF, data) ^ 0xFFFFFFFF == expected == crc32c.crc32c(data)


@pytest.mark.parametrize("width_bytes", [4, 16])
def test_rfc3720_vectors(width_bytes):
    """RFC 3720 B.4 vectors (SCTP checksum, RFC 4960 6.8), back to back."""
    results, _ = simulate(width_bytes, [packet for packet, _ in RFC3720_VECTORS])
    assert results == [value for _, value in RFC3720_VECTORS]


@pytest.mark.parametrize("width_bytes", [8, 32])
def test_partial_last_beats_back_to_back(width_bytes):
    """Every length of last beat, 1..W bytes, single- and multi-beat, no gaps and never refused."""
    rng = random.Random(width_bytes)
    lengths = list(range(1, 2 * width_bytes + 2)) + [1, 1, 1]
    packets = [rng.randbytes(length) for length in lengths]
    results, refused = simulate(width_bytes, packets)
    assert results == [crc32c.crc32c(packet) for packet in packets]
    assert refused == []

