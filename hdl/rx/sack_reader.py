"""The peer's SACK chunks for the transmit engine's transport unit, out of the chunks bound for the host.

Between the chunk parser's ``exc`` output (every chunk the DDP path does not
take, intact from its type byte, with its association and length) and the
exception records. A SACK chunk (type 3, RFC 4960 3.3.4) of a row in
``rows`` (the associations whose window the transport unit keeps) does not
go to the host: its fields leave on ``sacks`` as one
:func:`abi.tx.peer_sack_layout` record (the Cumulative TSN Ack, a_rwnd, the
numbers of Gap Ack Blocks and Duplicate TSNs, the first four blocks). Every
other chunk passes to ``host_chunks`` / ``host_meta`` unchanged.

A SACK chunk whose length is not 16 + 4 * (blocks + duplicates) (RFC 4960
3.3.4; the host's SCTP refuses to decode it) is dropped and counted in
``malformed``: the unit never reads blocks the chunk does not hold. Where
RFC 4960 is silent on a malformed chunk, this is the choice: it changes no
state, as a lost SACK would not.

Rate: one cycle to decide each chunk, then one beat per cycle. The chunks
here are the host's (control chunks, session control, DATA of other
protocols): none of them is on the DDP path's line-rate traffic.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ChunkException
from abi.tx import peer_sack_layout
from hdl.layout import struct_layout
from hdl.rx.chunk_parser import exception_meta_layout
from hdl.stream.bits import big_endian, byte
from hdl.stream.packet import packet_signature

__all__ = ["SackReader", "SACK_CHUNK_TYPE"]

SACK_CHUNK_TYPE = 3            # RFC 4960 3.2
_FIXED = 16                    # type, flags, length, Cumulative TSN Ack, a_rwnd, the two counts
_GAP_BLOCKS = 4
_READ = _FIXED + 4 * _GAP_BLOCKS   # the bytes of a chunk the record takes


class SackReader(wiring.Component):
    """SACK chunks of ``rows`` (one bit per association) to ``sacks``, the rest to the host (module docs)."""

    def __init__(self, width_bytes: int, associations: int):
        self.width_bytes, self.associations = width_bytes, associations
        super().__init__({
            "chunks": In(packet_signature(width_bytes)),
            "meta": In(stream.Signature(exception_meta_layout())),
            "rows": In(associations),
            "host_chunks": Out(packet_signature(width_bytes)),
            "host_meta": Out(stream.Signature(exception_meta_layout())),
            "sacks": Out(stream.Signature(struct_layout(peer_sack_layout(_GAP_BLOCKS)))),
            "malformed": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        width = self.width_bytes
        meta, chunk = self.meta.payload, self.chunks.payload
        beats = (_READ + width - 1) // width
        head = Signal(8 * beats * width)      # the chunk's first bytes, lane order
        beat = Signal(range(beats + 1))
        length = Signal(16)
        association = Signal.like(meta.association)

        is_sack = ((meta.reason == ChunkException.CONTROL) & (byte(chunk.data, 0) == SACK_CHUNK_TYPE)
                   & self.rows.bit_select(meta.association, 1))
        fields = [byte(head, index) for index in range(_READ)]
        gap_count, duplicate_count = big_endian(fields[12:14]), big_endian(fields[14:16])
        record = self.sacks.payload
        m.d.comb += [
            record.association.eq(association),
            record.cumulative_tsn_ack.eq(big_endian(fields[4:8])),
            record.a_rwnd.eq(big_endian(fields[8:12])),
            record.gap_count.eq(gap_count),
            record.duplicate_count.eq(duplicate_count),
        ]
        for index in range(_GAP_BLOCKS):
            start = _FIXED + 4 * index
            present = gap_count > index          # the bytes of a block the chunk holds (0 past them)
            m.d.comb += [record.gaps[index].start.eq(Mux(present, big_endian(fields[start:start + 2]), 0)),
                         record.gaps[index].end.eq(Mux(present, big_endian(fields[start + 2:start + 4]), 0))]
        well_formed = Signal()
        m.d.comb += well_formed.eq(length == _FIXED + ((gap_count + duplicate_count) << 2))

        # A chunk for the host: its meta is offered from a register while its beats pass, as the two
        # left the chunk parser (the exception arbiter may take them in either order).
        host_meta, meta_pending = Signal.like(meta), Signal()
        m.d.comb += [self.host_meta.payload.eq(host_meta), self.host_meta.valid.eq(meta_pending)]
        with m.If(self.host_meta.valid & self.host_meta.ready):
            m.d.sync += meta_pending.eq(0)

        with m.FSM():
            with m.State("DECIDE"):        # the chunk's meta and first beat: its type byte
                with m.If(self.meta.valid & self.chunks.valid & ~meta_pending):
                    m.d.comb += self.meta.ready.eq(1)
                    with m.If(is_sack):
                        m.d.sync += [length.eq(meta.length), association.eq(meta.association), beat.eq(0),
                                     head.eq(0)]
                        m.next = "READ"
                    with m.Else():
                        m.d.sync += [host_meta.eq(meta), meta_pending.eq(1)]
                        m.next = "PASS"
            with m.State("PASS"):
                wiring.connect(m, wiring.flipped(self.chunks), wiring.flipped(self.host_chunks))
                with m.If(self.chunks.valid & self.chunks.ready & chunk.last):
                    m.next = "DECIDE"
            with m.State("READ"):          # its first bytes kept, the rest of it taken
                m.d.comb += self.chunks.ready.eq(1)
                with m.If(self.chunks.valid):
                    for index in range(beats):
                        with m.If(beat == index):
                            m.d.sync += head[8 * width * index:8 * width * (index + 1)].eq(chunk.data)
                    with m.If(beat != beats):
                        m.d.sync += beat.eq(beat + 1)
                    with m.If(chunk.last):
                        m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(well_formed):
                    m.next = "SEND"
                with m.Else():
                    m.d.sync += self.malformed.eq(self.malformed + 1)
                    m.next = "DECIDE"
            with m.State("SEND"):
                m.d.comb += self.sacks.valid.eq(1)
                with m.If(self.sacks.ready):
                    m.next = "DECIDE"
        return m
