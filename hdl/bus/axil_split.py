"""AXI4-Lite address split: one manager port, subordinates at fixed windows of the address space.

Subordinate ``i`` answers the addresses ``i * window`` up to ``(i + 1) *
window - 1`` (``window`` a power of two) and sees them less its base.
Subordinates take AW and W in the same cycle, as
:class:`~hdl.bus.register_file.RegisterFile` does. One write and one read are
in flight at a time, each answered by the subordinate that took it, so
responses keep the order of their requests (AXI4-Lite has no IDs, ARM IHI
0022 B1.1).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.bus.axi import Axi4LiteSignature

__all__ = ["AxiLiteSplit"]


class AxiLiteSplit(wiring.Component):
    """``bus`` (``addr_width`` bits) split into ``subordinates`` (a power of two) windows of
    ``2 ** (addr_width - log2(subordinates))`` bytes, ports ``sub_0``, ``sub_1``, ..."""

    def __init__(self, addr_width: int, subordinates: int = 2):
        if subordinates < 2 or subordinates & (subordinates - 1):
            raise ValueError(f"subordinates must be a power of two of at least 2, not {subordinates}")
        self.select_bits = (subordinates - 1).bit_length()
        self.window_bits = addr_width - self.select_bits
        self.count = subordinates
        members = {"bus": In(Axi4LiteSignature(addr_width=addr_width))}
        for index in range(subordinates):
            members[f"sub_{index}"] = Out(Axi4LiteSignature(addr_width=self.window_bits))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        subs = [getattr(self, f"sub_{index}") for index in range(self.count)]

        # Writes: AW and W go together to the subordinate the address names; B comes from it.
        writing, write_target = Signal(), Signal(self.select_bits)
        aw_target = bus.awaddr[self.window_bits:]
        target = Mux(writing, write_target, aw_target)
        for index, sub in enumerate(subs):
            chosen = target == index
            m.d.comb += [
                sub.awaddr.eq(bus.awaddr[:self.window_bits]), sub.awprot.eq(bus.awprot),
                sub.wdata.eq(bus.wdata), sub.wstrb.eq(bus.wstrb),
                sub.awvalid.eq(bus.awvalid & ~writing & chosen), sub.wvalid.eq(bus.wvalid & ~writing & chosen),
                sub.bready.eq(bus.bready & writing & chosen),
            ]
            with m.If(target == index):
                m.d.comb += [bus.awready.eq(sub.awready & ~writing), bus.wready.eq(sub.wready & ~writing),
                             bus.bvalid.eq(sub.bvalid & writing), bus.bresp.eq(sub.bresp)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [writing.eq(1), write_target.eq(aw_target)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += writing.eq(0)

        # Reads: AR to the subordinate the address names; R comes from it.
        reading, read_target = Signal(), Signal(self.select_bits)
        ar_target = bus.araddr[self.window_bits:]
        target = Mux(reading, read_target, ar_target)
        for index, sub in enumerate(subs):
            chosen = target == index
            m.d.comb += [
                sub.araddr.eq(bus.araddr[:self.window_bits]), sub.arprot.eq(bus.arprot),
                sub.arvalid.eq(bus.arvalid & ~reading & chosen),
                sub.rready.eq(bus.rready & reading & chosen),
            ]
            with m.If(target == index):
                m.d.comb += [bus.arready.eq(sub.arready & ~reading), bus.rvalid.eq(sub.rvalid & reading),
                             bus.rdata.eq(sub.rdata), bus.rresp.eq(sub.rresp)]
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [reading.eq(1), read_target.eq(ar_target)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += reading.eq(0)
        return m
