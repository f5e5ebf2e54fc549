"""The receive path's SCTP association table: a small register file with a lookup.

Each entry names one association by its port pair and peer address (RFC 4960
1.4: an association is identified by its transport addresses) and holds the
verification tag this end expects in inbound packets, i.e. its own Initiate
Tag (RFC 4960 8.5). The host writes entries through ``write``; the frame
receiver looks packets up by (destination port, source port, source IP).
"""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ASSOCIATION_BITS, association_entry_layout
from hdl.layout import struct_layout

__all__ = ["AssociationTable"]



class AssociationTable(wiring.Component):
    """``entries`` associations in registers, looked up by port pair and peer address.

    Parameters
    ----------
    entries : int
        Table size, 1 to ``2**ASSOCIATION_BITS``.

    Ports
    -----
    write : ``In(stream.Signature(association_entry_layout()))``
        Always ready; one entry written per transfer. A write to an index
        at or past ``entries`` is ignored. Writing ``valid = 0`` removes an
        association.
    local_port, peer_port, peer_ip : ``In``
        Lookup key, from the inbound packet's headers.
    hit, index, ddp, tag : ``Out``
        The lookup result for the key presented two cycles earlier
        (latency 2: compare, then select; a new key every cycle). When
        several valid entries match, the lowest index wins.
    """

    def __init__(self, entries: int = 8):
        if not 1 <= entries <= 2 ** ASSOCIATION_BITS:
            raise ValueError(f"Association table size must be 1..{2 ** ASSOCIATION_BITS}, not {entries}")
        self._entries = entries
        super().__init__({
            "write": In(stream.Signature(struct_layout(association_entry_layout()))),
            "local_port": In(16),
            "peer_port": In(16),
            "peer_ip": In(32),
            "hit": Out(1),
            "index": Out(ASSOCIATION_BITS),
            "ddp": Out(1),
            "tag": Out(32),
        })

    @property
    def entries(self) -> int:
        return self._entries

    def elaborate(self, platform):
        m = Module()
        table = [Signal(struct_layout(association_entry_layout()), name=f"entry_{i}") for i in range(self._entries)]

        m.d.comb += self.write.ready.eq(1)
        with m.If(self.write.valid):
            for i, entry in enumerate(table):
                with m.If(self.write.payload.index == i):
                    m.d.sync += entry.eq(self.write.payload)

        matches = Signal(self._entries)  # stage 1: compare the key with every entry
        for i, entry in enumerate(table):
            m.d.sync += matches[i].eq(
                entry.valid
                & (entry.local_port == self.local_port)
                & (entry.peer_port == self.peer_port)
                & (entry.peer_ip == self.peer_ip))

        # Stage 2: select. Lowest index wins: later statements take priority, so walk downwards.
        m.d.sync += [self.hit.eq(matches.any()), self.index.eq(0), self.ddp.eq(0), self.tag.eq(0)]
        for i in reversed(range(self._entries)):
            with m.If(matches[i]):
                m.d.sync += [
                    self.index.eq(Const(i, ASSOCIATION_BITS)),
                    self.ddp.eq(table[i].ddp),
                    self.tag.eq(table[i].tag),
                ]
        return m
