"""Frames of several AXI4-Stream ports onto one, whole frames, taking turns.

Between frames the next input is chosen (registered) among those with a beat
waiting: the first after the one that sent last, round robin, so no input
waits more than one frame of each other. A chosen input's frame passes whole
(to its ``tlast``) before another is chosen; one idle clock separates frames.
"""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.bus.axis import AxiStreamSignature

__all__ = ["AxiStreamMux"]


class AxiStreamMux(wiring.Component):
    """``inputs`` AXI4-Stream ports of ``data_bytes`` lanes, ``s_axis_0`` ..., onto ``m_axis``."""

    def __init__(self, data_bytes: int, inputs: int = 2):
        if inputs < 2:
            raise ValueError(f"a mux has at least two inputs, not {inputs}")
        self._inputs = inputs
        super().__init__({
            **{f"s_axis_{index}": In(AxiStreamSignature(data_bytes)) for index in range(inputs)},
            "m_axis": Out(AxiStreamSignature(data_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        ports = [getattr(self, f"s_axis_{index}") for index in range(self._inputs)]
        chosen = Signal(range(self._inputs))
        busy = Signal()   # the chosen input's frame is passing
        port = Array(ports)[chosen]
        out = self.m_axis
        m.d.comb += [out.tdata.eq(port.tdata), out.tkeep.eq(port.tkeep), out.tlast.eq(port.tlast),
                     out.tvalid.eq(busy & port.tvalid)]
        for index, each in enumerate(ports):
            m.d.comb += each.tready.eq(busy & (chosen == index) & out.tready)
        with m.If(busy):
            with m.If(out.tvalid & out.tready & out.tlast):
                m.d.sync += busy.eq(0)
        with m.Else():
            # The lowest waiting input after `chosen`, else the lowest waiting one (later assignments win).
            for index in reversed(range(self._inputs)):
                with m.If(ports[index].tvalid):
                    m.d.sync += [chosen.eq(index), busy.eq(1)]
            for index in reversed(range(self._inputs)):
                with m.If(ports[index].tvalid & (index > chosen)):
                    m.d.sync += [chosen.eq(index), busy.eq(1)]
        return m
