"""The response path's zero-run encoder (hdl/link/zero_run.py) in Amaranth's simulator, against
``abi.link.zero_run_encode``: frames of an uncoded header and a coded body, a consumer that stalls at
random, the bytes out and each frame's ``last`` compared."""

import random

from amaranth.sim import Simulator

from abi.link import zero_run_encode
from hdl.link.zero_run import ZeroRunEncoder

CLOCK_PERIOD = 1e-6


def run_encoder(frames: list[tuple[bytes, bytes]], seed: int) -> list[bytes]:
    """Each (header, body) through the encoder, ``coded`` on the body's bytes; the frames that came out."""
    dut = ZeroRunEncoder()
    sim = Simulator(dut)
    sim.add_clock(CLOCK_PERIOD)
    out: list[bytes] = []

    async def producer(ctx):
        rng = random.Random(seed)
        for header, body in frames:
            flagged = [(byte, 0) for byte in header] + [(byte, 1) for byte in body]
            for position, (byte, coded) in enumerate(flagged):
                while rng.random() < 0.2:
                    await ctx.tick()
                ctx.set(dut.sink.payload, {"data": byte, "coded": coded, "last": position == len(flagged) - 1})
                ctx.set(dut.sink.valid, 1)
                while True:
                    _, _, ready = await ctx.tick().sample(dut.sink.ready)
                    if ready:
                        break
                ctx.set(dut.sink.valid, 0)

    async def consumer(ctx):
        rng = random.Random(seed + 1)
        current = bytearray()
        while len(out) < len(frames):
            ready = rng.random() < 0.7
            ctx.set(dut.source.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.source.valid, dut.source.payload)
            if valid and ready:
                current.append(payload.data)
                if payload.last:
                    out.append(bytes(current))
                    current.clear()

    sim.add_testbench(producer, background=True)
    sim.add_testbench(consumer)
    sim.run()
    return out


def test_runs_of_every_length_are_coded_as_abi_codes_them():
    """A zero run of each length 1..300 between nonzero bytes, runs of two and three full counts and one past
    them; a body ending in zeros; a body all zeros; zero bytes of the header passed as they are."""
    rng = random.Random(1)
    frames = [(b"\x05\x00", b"\x07" + bytes(length) + b"\x09") for length in range(1, 301)]
    frames += [(b"\x00", bytes(length) + b"\x03") for length in (509, 510, 511, 765, 766)]
    frames += [(b"\x01\x02", b"\x04" + bytes(length)) for length in (1, 2, 254, 255, 256, 600)]
    frames += [(b"", bytes(55)), (b"\x00\x00", bytes(1)), (b"\x08", b"")]
    frames += [(b"\x10", bytes(rng.choice((0, 0, rng.randrange(1, 256))) for _ in range(rng.randrange(1, 200))))
               for _ in range(40)]
    out = run_encoder(frames, seed=2)
    assert out == [header + zero_run_encode(body) for header, body in frames]
