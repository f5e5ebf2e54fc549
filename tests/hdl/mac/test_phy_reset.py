"""The PHY reset (hdl/mac/phy_reset.py): the KSZ9031's 10 ms of reset, then 100 us before it is used."""

import pytest
from amaranth.sim import Simulator

from hdl.mac.phy_reset import PhyReset


@pytest.mark.parametrize("clock_hz", [250e3, 1e6 / 3])
def test_reset_and_settling_times(clock_hz):
    dut = PhyReset(clock_hz)
    period = 1 / clock_hz
    released, ready = [], []

    async def bench(ctx):
        clock = 0
        while not ready:
            _, _, reset_now, ready_now = await ctx.tick().sample(dut.reset, dut.ready)
            if not reset_now and not released:
                released.append(clock * period)
            if ready_now:
                assert not reset_now
                ready.append(clock * period)
            assert not (reset_now and released), "reset rose again"
            clock += 1
        for _ in range(100):
            _, _, reset_now, ready_now = await ctx.tick().sample(dut.reset, dut.ready)
            assert not reset_now and ready_now, "the outputs must hold"

    sim = Simulator(dut)
    sim.add_clock(period)
    sim.add_testbench(bench)
    sim.run()
    # KSZ9031RNX: RESET_N low >= 10 ms, then >= 100 us before MDIO or traffic; no more than two clocks longer.
    assert 10e-3 <= released[0] <= 10e-3 + 2 * period
    assert 100e-6 <= ready[0] - released[0] <= 100e-6 + 2 * period
