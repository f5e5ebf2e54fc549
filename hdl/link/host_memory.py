"""The board's host memory: block RAM behind an AXI4 subordinate port, with a byte port for the control link.

A true dual-port RAM of ``size_bytes`` (a power of two) at address 0, in
words of the AXI data width with byte write enables:

* ``axi``: AXI4 subordinate, INCR and FIXED bursts (WRAP is answered
  SLVERR, nothing written), any ``AxSIZE`` up to the bus width (the
  manager's ``WSTRB`` chooses the bytes). A beat outside the memory is not
  written (not read: zeros) and its burst is answered SLVERR. Writes are
  taken one beat a clock; reads give a beat every other clock. A write burst
  waiting is taken before a read burst.
* ``link``: one byte a clock at ``addr``: ``we`` writes ``wdata``; ``re``
  reads, ``rdata`` holds the byte from the next clock until the next read.
  Addresses wrap at ``size_bytes`` (the link checks its ranges).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from hdl.bus.axi import Axi4Signature, Burst, Resp

__all__ = ["HostMemory", "byte_port_signature"]


def byte_port_signature(size_bytes: int) -> wiring.Signature:
    """A byte-wide memory port, the initiator's view."""
    return wiring.Signature({
        "addr": Out(range(size_bytes)),
        "wdata": Out(8),
        "we": Out(1),
        "re": Out(1),
        "rdata": In(8),
    })


class HostMemory(wiring.Component):
    """See the module docs.

    Ports
    -----
    axi : ``In(Axi4Signature(addr_width, 8 * data_bytes, id_width))``
    link : ``In(byte_port_signature(size_bytes))``
    """

    def __init__(self, size_bytes: int, *, data_bytes: int = 8, addr_width: int = 64, id_width: int = 4):
        if size_bytes < data_bytes or size_bytes & (size_bytes - 1):
            raise ValueError(f"Host memory must be a power of two of at least one word, not {size_bytes}")
        self.size_bytes, self._data_bytes = size_bytes, data_bytes
        super().__init__({
            "axi": In(Axi4Signature(addr_width=addr_width, data_width=8 * data_bytes, id_width=id_width)),
            "link": In(byte_port_signature(size_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        data_bytes = self._data_bytes
        lane_bits = (data_bytes - 1).bit_length()
        words = self.size_bytes // data_bytes
        m.submodules.ram = ram = memory.Memory(shape=8 * data_bytes, depth=words, init=[])
        axi = self.axi
        size = self.size_bytes

        # Port A: the AXI side; one address for its read and its write port (one true-dual-port side).
        a_address = Signal(range(words))
        a_write = ram.write_port(granularity=8)
        a_read = ram.read_port(transparent_for=())
        m.d.comb += [a_write.addr.eq(a_address), a_read.addr.eq(a_address)]

        # Port B: the link's bytes.
        link = self.link
        b_write = ram.write_port(granularity=8)
        b_read = ram.read_port(transparent_for=())
        lane = Signal(range(data_bytes))
        m.d.comb += [
            b_write.addr.eq(link.addr[lane_bits:]), b_read.addr.eq(link.addr[lane_bits:]),
            b_write.data.eq(link.wdata.replicate(data_bytes)),
            b_write.en.eq(Mux(link.we, 1 << link.addr[:lane_bits], 0)),
            b_read.en.eq(link.re),
            link.rdata.eq(b_read.data.word_select(lane, 8)),
        ]
        with m.If(link.re):
            m.d.sync += lane.eq(link.addr[:lane_bits])

        # The AXI bursts: one at a time.
        address = Signal.like(axi.awaddr)
        beats_left = Signal(8)
        size_log2 = Signal(3)
        burst = Signal(2)
        burst_id = Signal.like(axi.awid)
        failed = Signal()
        in_range = (address >> size.bit_length() - 1) == 0
        step = Mux(burst == Burst.FIXED, 0, 1 << size_log2)
        m.d.comb += [a_read.en.eq(0), a_write.en.eq(0)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += axi.awready.eq(1)
                with m.If(axi.awvalid):
                    m.d.sync += [address.eq(axi.awaddr), size_log2.eq(axi.awsize), burst.eq(axi.awburst),
                                 burst_id.eq(axi.awid), failed.eq(axi.awburst == Burst.WRAP)]
                    m.next = "WRITE"
                with m.Else():
                    m.d.comb += axi.arready.eq(1)
                    with m.If(axi.arvalid):
                        m.d.sync += [address.eq(axi.araddr), size_log2.eq(axi.arsize), burst.eq(axi.arburst),
                                     burst_id.eq(axi.arid), beats_left.eq(axi.arlen),
                                     failed.eq(axi.arburst == Burst.WRAP)]
                        m.next = "READ_ADDRESS"
            with m.State("WRITE"):
                m.d.comb += [axi.wready.eq(1), a_address.eq(address[lane_bits:])]
                with m.If(axi.wvalid):
                    with m.If(in_range & ~failed):
                        m.d.comb += a_write.en.eq(axi.wstrb)
                    with m.Else():
                        m.d.sync += failed.eq(1)
                    m.d.comb += a_write.data.eq(axi.wdata)
                    m.d.sync += address.eq(address + step)
                    with m.If(axi.wlast):
                        m.next = "WRITE_RESPONSE"
            with m.State("WRITE_RESPONSE"):
                m.d.comb += [axi.bvalid.eq(1), axi.bid.eq(burst_id), axi.bresp.eq(Mux(failed, Resp.SLVERR, Resp.OKAY))]
                with m.If(axi.bready):
                    m.next = "IDLE"
            with m.State("READ_ADDRESS"):
                m.d.comb += [a_address.eq(address[lane_bits:]), a_read.en.eq(1)]
                m.d.sync += failed.eq(failed | ~in_range)
                m.next = "READ_DATA"
            with m.State("READ_DATA"):
                m.d.comb += [axi.rvalid.eq(1), axi.rid.eq(burst_id), axi.rlast.eq(beats_left == 0),
                             axi.rdata.eq(Mux(failed, 0, a_read.data)),
                             axi.rresp.eq(Mux(failed, Resp.SLVERR, Resp.OKAY))]
                with m.If(axi.rready):
                    m.d.sync += [address.eq(address + step), beats_left.eq(beats_left - 1)]
                    with m.If(beats_left == 0):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "READ_ADDRESS"
        return m
