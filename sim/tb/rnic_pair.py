"""Two RNIC tops in one simulation, and each one's ports seen as a top of its own.

`RnicPair` is the simulation top of the `sim` backend's two gateware hosts: two
`hdl.rnic.Rnic` (``a`` and ``b``, built by `sim.tb.rnic_tb.rnic_driver_top`) on one
clock and reset, every port of each exported as ``a_<port>`` or ``b_<port>``
(``a_s_axis_tdata``, ``b_m_axi_araddr``). Nothing connects them: the
testbench carries each one's frames over the simulated link.

`PortPrefix` is one Rnic's view of the simulator's handle: ``view.s_axis_tdata``
is ``dut.a_s_axis_tdata`` (and listing it lists the side's ports), ``clk`` and
``rst`` are the shared ones, and iterating it walks the Rnic's own hierarchy (``rx.``, ``tx.``), so `sim.tb.rnic_tb.RnicTB`
and the cocotbext-axi bus models bind to it as to a lone top.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out, connect

from sim.tb.rnic_tb import rnic_driver_top
from sim.traffic.rx import EngineShape

__all__ = ["RnicPair", "PortPrefix", "SIDES"]

SIDES = ("a", "b")
SHARED = ("clk", "rst")


class RnicPair(wiring.Component):
    """Two RNIC tops of ``width_bytes`` (see the module docstring)."""

    def __init__(self, width_bytes: int, shape: EngineShape = EngineShape()) -> None:
        self.rnics = {side: rnic_driver_top(width_bytes, shape) for side in SIDES}
        members = self.rnics["a"].signature.members
        super().__init__({f"{side}_{name}": member for side in SIDES for name, member in members.items()})

    def elaborate(self, platform):
        m = Module()
        for side, rnic in self.rnics.items():
            m.submodules[side] = rnic
            for name, member in rnic.signature.members.items():
                outer, inner = getattr(self, f"{side}_{name}"), getattr(rnic, name)
                if member.is_port:      # a lone signal (the timer's tick), not an interface
                    m.d.comb += outer.eq(inner) if member.flow is Out else inner.eq(outer)
                else:
                    connect(m, wiring.flipped(outer), inner)
        return m


class PortPrefix:
    """One side of a `RnicPair` handle (see the module docstring)."""

    def __init__(self, dut, side: str) -> None:
        self._dut, self._prefix, self._scope = dut, f"{side}_", getattr(dut, side)
        self._name, self._log = f"{dut._name}.{side}", dut._log

    def __getattr__(self, name: str):
        if name in SHARED:
            return getattr(self._dut, name)
        return getattr(self._dut, self._prefix + name)

    def __dir__(self):   # cocotb-bus finds a bus's signals by listing the handle
        prefix = self._prefix
        return [name[len(prefix):] for name in dir(self._dut) if name.startswith(prefix)] + list(SHARED)

    def __iter__(self):
        return iter(self._scope)
