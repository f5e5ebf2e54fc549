"""The receive path's SCTP association table: a small register file with a lookup.

Each entry names one association by its port pair and peer address (RFC 4960
1.4: an association is identified by its transport addresses) and holds the
verification tag this end expects in inbound packets, i.e. its own Initiate
Tag (RFC 4960 8.5). The host writes entries through ``write``.

The lookup compares one row, not every row: this end chooses its Initiate
Tag, so the host draws it with the association's row in its low
:data:`abi.rx.ASSOCIATION_BITS` bits and the rest random (RFC 4960 5.3.1
asks only that it be random and not 0; ``model.sctp.config.AssociationConfig
.tag_row``). An inbound packet's verification tag then names the row, and
the row's ports and peer address say whether the packet is the
association's; whether its tag is the whole Initiate Tag is the frame
receiver's compare (a mismatch drops the packet, RFC 4960 8.5). A packet
whose tag names a row of other ports or address, or an empty row, finds no
association and goes to the host, as one from an unknown peer does.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ASSOCIATION_BITS, association_entry_layout
from hdl.layout import struct_layout

__all__ = ["AssociationTable"]


class AssociationTable(wiring.Component):
    """``entries`` associations in registers, looked up by the row an inbound packet's verification tag names.

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
    verification_tag, local_port, peer_port, peer_ip : ``In``
        Lookup key, from the inbound packet's headers: the tag's low
        ``ASSOCIATION_BITS`` bits name the row, the rest must match it.
    hit, index, ddp, tag : ``Out``
        The lookup result for the key presented two cycles earlier
        (latency 2: read the row, then compare; a new key every cycle):
        whether the row is valid and has the key's ports and address, the
        row, its DDP flag and its verification tag.
    """

    def __init__(self, entries: int = 8):
        if not 1 <= entries <= 2 ** ASSOCIATION_BITS:
            raise ValueError(f"Association table size must be 1..{2 ** ASSOCIATION_BITS}, not {entries}")
        self._entries = entries
        super().__init__({
            "write": In(stream.Signature(struct_layout(association_entry_layout()))),
            "verification_tag": In(32),
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

        # Stage 1: the row the tag names (none past the table), and the key.
        row = self.verification_tag[:ASSOCIATION_BITS]
        selected = Signal.like(table[0], name="selected")
        key_local_port, key_peer_port = Signal(16), Signal(16)
        key_peer_ip, key_row = Signal(32), Signal(ASSOCIATION_BITS)
        m.d.sync += [key_local_port.eq(self.local_port), key_peer_port.eq(self.peer_port),
                     key_peer_ip.eq(self.peer_ip), key_row.eq(row)]
        with m.Switch(row):
            for i, entry in enumerate(table):
                with m.Case(i):
                    m.d.sync += selected.eq(entry)
            with m.Default():
                m.d.sync += selected.eq(0)

        # Stage 2: compare the row's transport addresses with the key's.
        m.d.sync += [
            self.hit.eq(selected.valid & (selected.local_port == key_local_port)
                        & (selected.peer_port == key_peer_port) & (selected.peer_ip == key_peer_ip)),
            self.index.eq(key_row), self.ddp.eq(selected.ddp), self.tag.eq(selected.tag),
        ]
        return m
