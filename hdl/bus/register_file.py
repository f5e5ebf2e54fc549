"""AXI4-Lite register file: configuration words, read-only counters, table write windows.

The map (offsets of the ID and PARAMS words, configuration words, counters and
table windows) is :class:`abi.register_file.RegisterMap`, shared with the host
driver; this module is its gateware. Writes are whole words (``WSTRB`` is not
used). Unmapped addresses read as 0 and ignore writes; every access gets OKAY.
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from abi.register_file import CONFIG_BASE, DEVICE_ID, ID_OFFSET, PARAMS_OFFSET, RegisterMap
from hdl.bus.axi import Axi4LiteSignature, Resp
from hdl.layout import struct_layout

__all__ = ["RegisterFile"]


class RegisterFile(wiring.Component):
    """AXI4-Lite subordinate implementing a :class:`RegisterMap`.

    Ports: ``axil`` (AXI4-Lite, 32-bit data); ``config_<name>`` outputs;
    ``counter_<name>`` inputs; ``table_<name>`` write streams; ``params``
    input (the PARAMS words: ``params_words`` of them from ``0x004``). One transaction at a time: a write is taken when
    both its address and data are valid and answered on B the next cycle; a
    read is answered on R two cycles after its address (the decode is pipelined).
    """

    def __init__(self, register_map: RegisterMap, address_bits: int = 12, params_words: int = 1):
        if not 1 <= params_words <= (CONFIG_BASE - PARAMS_OFFSET) // 4:
            raise ValueError(f"{params_words} PARAMS words do not fit below the configuration words")
        self.map = register_map
        self._params_words = params_words
        members = {"axil": In(Axi4LiteSignature(addr_width=address_bits, data_width=32)),
                   "params": In(32 * params_words)}
        for name, (_, bits) in register_map.config.items():
            members[f"config_{name}"] = Out(bits)
        for name in register_map.counters:
            members[f"counter_{name}"] = In(32)
        for name, window in register_map.tables.items():
            members[f"table_{name}"] = Out(stream.Signature(struct_layout(window.layout)))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.axil

        # -- writes --------------------------------------------------------
        # Two stages: the address is decoded into one flag per word (registered with the data),
        # then the word is written with its flag as the enable; the response follows the write.
        b_pending, w_pending = Signal(), Signal()
        m.d.comb += [bus.bresp.eq(Resp.OKAY), bus.bvalid.eq(b_pending)]
        take_write = bus.awvalid & bus.wvalid & ~b_pending & ~w_pending
        m.d.comb += [bus.awready.eq(take_write), bus.wready.eq(take_write)]
        with m.If(b_pending & bus.bready):
            m.d.sync += b_pending.eq(0)
        w_data = Signal(32)
        m.d.sync += [w_pending.eq(take_write), w_data.eq(bus.wdata)]
        with m.If(w_pending):
            m.d.sync += b_pending.eq(1)

        word_address = bus.awaddr & ~3

        def written(offset):
            """Whether the word at `offset` is written on this cycle (a flip-flop)."""
            hit = Signal(name=f"write_{offset:x}")
            m.d.sync += hit.eq(take_write & (word_address == offset))
            return hit

        for name, (offset, bits) in self.map.config.items():
            register = getattr(self, f"config_{name}")
            with m.If(written(offset)):
                m.d.sync += register.eq(w_data[:bits])

        stages = {}
        for name, window in self.map.tables.items():
            port = getattr(self, f"table_{name}")
            staged = Signal(window.words * 32, name=f"{name}_staged")
            stages[name] = staged
            m.d.comb += port.payload.eq(staged[: window.layout.size])
            for word in range(window.words):
                with m.If(written(window.base + 4 * word)):
                    m.d.sync += staged[32 * word : 32 * word + 32].eq(w_data)
            with m.If(port.valid & port.ready):
                m.d.sync += port.valid.eq(0)
            with m.If(written(window.commit)):
                m.d.sync += port.valid.eq(1)

        # -- reads ---------------------------------------------------------
        # Two stages, so no cycle holds the whole address decode and read mux: the address's
        # group of eight words is read into a register per group, then the group is chosen.
        sources = {ID_OFFSET: Const(DEVICE_ID, 32)}
        for word in range(self._params_words):
            sources[PARAMS_OFFSET + 4 * word] = self.params.word_select(word, 32)
        for name, (offset, _) in self.map.config.items():
            sources[offset] = getattr(self, f"config_{name}")
        for name, offset in self.map.counters.items():
            sources[offset] = getattr(self, f"counter_{name}")
        for name, window in self.map.tables.items():
            for word in range(window.words):
                sources[window.base + 4 * word] = stages[name][32 * word : 32 * word + 32]
            sources[window.commit] = getattr(self, f"table_{name}").valid
        groups = {}
        for offset, value in sources.items():
            groups.setdefault(offset >> 5, {})[(offset >> 2) & 7] = value
        r_decoding, r_pending = Signal(), Signal()
        group_values = {key: Signal(32, name=f"read_group_{key}") for key in groups}
        # The group's choice decoded in the first stage, one flip-flop per group, so the second
        # is an AND-OR of flip-flops (two groups a LUT) rather than a select by a decoded key.
        group_hits = {key: Signal(name=f"group_hit_{key}") for key in groups}
        read_data = Signal(32)
        m.d.comb += [bus.rdata.eq(read_data), bus.rresp.eq(Resp.OKAY), bus.rvalid.eq(r_pending),
                     bus.arready.eq(~r_decoding & ~r_pending)]
        with m.If(r_pending & bus.rready):
            m.d.sync += r_pending.eq(0)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [r_decoding.eq(1), *(hit.eq(bus.araddr[5:] == key) for key, hit in group_hits.items())]
            for key, words in groups.items():
                with m.Switch(bus.araddr[2:5]):
                    for index, value in words.items():
                        with m.Case(index):
                            m.d.sync += group_values[key].eq(value)
                    with m.Default():
                        m.d.sync += group_values[key].eq(0)
        with m.If(r_decoding):
            m.d.sync += [r_decoding.eq(0), r_pending.eq(1)]
            terms = [Mux(group_hits[key], value, 0) for key, value in group_values.items()]
            while len(terms) > 1:   # a balanced OR tree
                terms = [terms[i] | terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
            m.d.sync += read_data.eq(terms[0])      # 0 when no group is hit: an unmapped address
        return m
