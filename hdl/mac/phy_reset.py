"""The PHY's hardware reset after configuration: long enough for the KSZ9031, then a settling time.

The KSZ9031RNX datasheet (reset timing): RESET_N held low for at least 10 ms
after the supplies are stable, and at least 100 us from its release before the
first MDIO access or traffic. The FPGA starts this count once configured, which
is after the supplies rose, so counting from there is on the safe side.
"""

import math

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

__all__ = ["PhyReset", "KSZ9031_RESET_SECONDS", "KSZ9031_SETTLE_SECONDS"]

KSZ9031_RESET_SECONDS = 10e-3
KSZ9031_SETTLE_SECONDS = 100e-6


class PhyReset(wiring.Component):
    """``reset`` high for ``reset_seconds``, then ``ready`` high ``settle_seconds`` later (clock of ``clock_hz``).

    Ports
    -----
    reset : ``Out(1, init=1)``
        Drive the PHY's active-low RESET_N with its complement; from a flip-flop.
    ready : ``Out(1)``
        The PHY may be used (MDIO, traffic); from a flip-flop. Both hold their final values.
    """

    def __init__(self, clock_hz: float, *, reset_seconds: float = KSZ9031_RESET_SECONDS,
                 settle_seconds: float = KSZ9031_SETTLE_SECONDS):
        self.reset_cycles = math.ceil(reset_seconds * clock_hz)
        self.settle_cycles = math.ceil(settle_seconds * clock_hz)
        if self.reset_cycles < 1 or self.settle_cycles < 1:
            raise ValueError(f"A {clock_hz} Hz clock cannot time {reset_seconds} s and {settle_seconds} s")
        super().__init__({"reset": Out(1, init=1), "ready": Out(1)})

    def elaborate(self, platform):
        m = Module()
        # Cycles left until `ready`; `reset` ends once only the settling time is left.
        left = Signal(range(self.reset_cycles + self.settle_cycles + 1),
                      init=self.reset_cycles + self.settle_cycles)
        with m.If(left != 0):
            m.d.sync += left.eq(left - 1)
        m.d.sync += [self.reset.eq(left > self.settle_cycles), self.ready.eq(left == 0)]
        return m
