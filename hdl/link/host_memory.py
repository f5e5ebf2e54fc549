"""The board's host memory: block RAM behind an AXI4 subordinate port, with a byte port for the control link.

``size_bytes`` (a power of two) at address 0, in words of the AXI data
width. Each byte lane is a RAM of its own with one write and one read port
(simple dual port, the shape Yosys maps onto the ECP5's DP16KD; a single
RAM with byte enables and two read-write ports is not mapped and becomes
flip-flops). Both sides share those ports, the AXI side first:

* ``axi``: AXI4 subordinate, INCR and FIXED bursts (WRAP is answered
  SLVERR, nothing written), any ``AxSIZE`` up to the bus width (the
  manager's ``WSTRB`` chooses the bytes). A beat outside the memory is not
  written (not read: zeros) and its burst is answered SLVERR. Writes are
  taken one beat a clock; reads give a beat every other clock. A write burst
  waiting is taken before a read burst.
* ``link``: one byte at ``addr``, taken on a clock with ``ready``: ``we``
  writes ``wdata``; ``re`` reads, and ``rdata`` holds the byte from the next
  clock until the next read. ``ready`` is low while an AXI beat uses the
  RAMs. Addresses wrap at ``size_bytes`` (the link checks its ranges).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
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
        "ready": In(1),
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
        axi, link = self.axi, self.link
        size = self.size_bytes

        address = Signal.like(axi.awaddr)
        beats_left = Signal(8)
        size_log2 = Signal(3)
        burst = Signal(2)
        burst_id = Signal.like(axi.awid)
        failed = Signal()
        in_range = (address >> size.bit_length() - 1) == 0
        step = Mux(burst == Burst.FIXED, 0, 1 << size_log2)
        axi_writing, axi_reading = Signal(), Signal()  # an AXI beat uses the write / read ports this clock
        m.d.comb += link.ready.eq(~axi_writing & ~axi_reading)

        # The lanes: the AXI address while it uses a port, else the link's.
        word_address = Mux(axi_writing | axi_reading, address[lane_bits:], link.addr[lane_bits:])
        link_lane = link.addr[:lane_bits]
        read_words = []
        for lane in range(data_bytes):
            ram = m.submodules[f"lane{lane}"] = memory.Memory(shape=8, depth=words, init=[])
            write, read = ram.write_port(), ram.read_port(transparent_for=())
            m.d.comb += [
                write.addr.eq(word_address), read.addr.eq(word_address),
                write.data.eq(Mux(axi_writing, axi.wdata.word_select(lane, 8), link.wdata)),
                write.en.eq(Mux(axi_writing, axi.wstrb[lane] & in_range & ~failed,
                                link.we & link.ready & (link_lane == lane))),
            ]
            read_words.append(read.data)
        ram_word = Cat(*read_words)

        # What each side read: the RAMs' output the clock after its read, then a register.
        link_pending, link_selected, link_byte = Signal(), Signal(range(data_bytes)), Signal(8)
        m.d.sync += link_pending.eq(link.re & link.ready)
        with m.If(link.re & link.ready):
            m.d.sync += link_selected.eq(link_lane)
        with m.If(link_pending):
            m.d.sync += link_byte.eq(ram_word.word_select(link_selected, 8))
        m.d.comb += link.rdata.eq(Mux(link_pending, ram_word.word_select(link_selected, 8), link_byte))
        axi_pending, axi_word = Signal(), Signal.like(axi.rdata)
        m.d.sync += axi_pending.eq(axi_reading)
        with m.If(axi_pending):
            m.d.sync += axi_word.eq(ram_word)

        # The AXI bursts: one at a time.
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
                m.d.comb += [axi.wready.eq(1), axi_writing.eq(axi.wvalid)]
                with m.If(axi.wvalid):
                    with m.If(~in_range):
                        m.d.sync += failed.eq(1)
                    m.d.sync += address.eq(address + step)
                    with m.If(axi.wlast):
                        m.next = "WRITE_RESPONSE"
            with m.State("WRITE_RESPONSE"):
                m.d.comb += [axi.bvalid.eq(1), axi.bid.eq(burst_id), axi.bresp.eq(Mux(failed, Resp.SLVERR, Resp.OKAY))]
                with m.If(axi.bready):
                    m.next = "IDLE"
            with m.State("READ_ADDRESS"):
                m.d.comb += axi_reading.eq(1)
                m.d.sync += failed.eq(failed | ~in_range)
                m.next = "READ_DATA"
            with m.State("READ_DATA"):
                m.d.comb += [axi.rvalid.eq(1), axi.rid.eq(burst_id), axi.rlast.eq(beats_left == 0),
                             axi.rdata.eq(Mux(failed, 0, Mux(axi_pending, ram_word, axi_word))),
                             axi.rresp.eq(Mux(failed, Resp.SLVERR, Resp.OKAY))]
                with m.If(axi.rready):
                    m.d.sync += [address.eq(address + step), beats_left.eq(beats_left - 1)]
                    with m.If(beats_left == 0):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "READ_ADDRESS"
        return m
