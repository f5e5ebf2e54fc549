"""`RxEngine(external_tick=True)`: the timer ticks on ``tick_in`` alone (a simulation's clock drives it,
`sim.driver_sim`), once per pulse, and ``tick_busy`` holds until the acknowledgement unit has taken the tick;
built without it, the engine's own counter ticks every ``tick_cycles``."""

from amaranth.sim import Simulator

from hdl.rx.engine import RxEngine

TICK_CYCLES = 16


def run(engine: RxEngine, pulses_at: tuple[int, ...], cycles: int = 200) -> tuple[list[int], list[int]]:
    """The cycles on which the engine's ``tick`` was 1, and (with `external_tick`) ``tick_busy``."""
    ticks, busy = [], []

    async def bench(ctx):
        for cycle in range(cycles):
            if engine.external_tick:
                ctx.set(engine.tick_in, cycle in pulses_at)
            await ctx.tick()
            if ctx.get(engine.tick):
                ticks.append(cycle)
            if engine.external_tick and ctx.get(engine.tick_busy):
                busy.append(cycle)

    sim = Simulator(engine)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return ticks, busy


def test_the_engines_own_timer_ticks_every_tick_cycles():
    ticks, _ = run(RxEngine(8, tick_cycles=TICK_CYCLES), ())
    assert len(ticks) >= 200 // TICK_CYCLES - 1
    assert all(b - a == TICK_CYCLES for a, b in zip(ticks, ticks[1:]))


def test_an_external_tick_ticks_once_per_pulse_and_nothing_else():
    ticks, busy = run(RxEngine(8, tick_cycles=TICK_CYCLES, external_tick=True), (50, 120))
    assert ticks == [50, 120]        # registered once, on the edge that samples the pulse
    assert 50 in busy and 120 in busy
    assert busy[-1] < 130 and all(cycle not in busy for cycle in range(60, 120))   # taken, then idle
