"""The receive engine's SACKs into the transmit path: one control packet of one SACK chunk each.

For each SACK record (:func:`hdl.rx.sack_unit.sack_record_layout`) the
sender emits one segment record (:func:`hdl.tx.layouts.segment_layout`: a
:attr:`~abi.tx.ControlOpcode.PACKET` with ``sack`` set, unnumbered: the
row's verification tag, no TSN) with its fetch (``local``: the payload is
the sender's, not host memory's), and keeps the record. The engine puts
them beside the retransmission ring's output, not behind its messages: a
SACK is due at once (RFC 4960 6.2) and must not wait for the window of the
DATA it would unblock. When the payload's turn comes the sender sends the
SACK chunk's bytes (RFC 4960 3.3.4: type 3, flags 0, length, Cumulative
TSN Ack, a_rwnd, the counts, the Gap Ack Blocks' start and end offsets, the
duplicate TSNs, all big-endian) as one packet on ``payload``, in record
order.

A record is taken when both the kept records (``depth``) and the segments
have room; the chunk leaves at one beat per cycle.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ADDRESS_BITS, ASSOCIATION_BITS
from hdl.rx.sack_unit import sack_record_layout
from hdl.stream.bits import thermometer
from hdl.stream.packet import packet_signature
from hdl.stream.queue import Queue
from abi.tx import ControlOpcode
from hdl.tx.layouts import fetch_layout, segment_layout

__all__ = ["SackSender", "SACK_CHUNK_TYPE", "sack_chunk_length"]

SACK_CHUNK_TYPE = 3     # RFC 4960 3.3.4
_SACK_HEADER = 16       # type, flags, length, Cumulative TSN Ack, a_rwnd, the two counts


def sack_chunk_length(gap_count, duplicate_count):
    """RFC 4960 3.3.4: 16 bytes, 4 per Gap Ack Block and 4 per duplicate TSN."""
    return _SACK_HEADER + 4 * (gap_count + duplicate_count)


def _big_endian(value, nbytes: int) -> list:
    """``value``'s low ``nbytes`` bytes, zero-extended, most significant first (network order)."""
    value = Value.cast(value)
    value = Cat(value, Const(0, max(0, 8 * nbytes - len(value))))
    return [value[8 * (nbytes - 1 - i):8 * (nbytes - i)] for i in range(nbytes)]


class SackSender(wiring.Component):
    """SACK records of up to ``gap_blocks`` Gap Ack Blocks and ``duplicate_tsns`` duplicates, as
    ``width_bytes``-wide SACK chunks (see the module docs)."""

    def __init__(self, width_bytes: int, *, gap_blocks: int = 4, duplicate_tsns: int = 4, depth: int = 4,
                 address_bits: int = ADDRESS_BITS):
        self.width_bytes, self.gap_blocks, self.duplicate_tsns, self.depth = \
            width_bytes, gap_blocks, duplicate_tsns, depth
        super().__init__({
            "records": In(stream.Signature(sack_record_layout(gap_blocks, duplicate_tsns))),
            "segments": Out(stream.Signature(segment_layout(address_bits))),
            "fetches": Out(stream.Signature(fetch_layout(address_bits))),
            # segments.valid again, from a flip-flop of its own: for a consumer's use far from the others.
            "segments_valid_replica": Out(1),
            "payload": Out(packet_signature(width_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self.width_bytes
        layout = sack_record_layout(self.gap_blocks, self.duplicate_tsns)
        # LUT RAM, not flip-flops; the counts that steer the chunk's bytes from a head register.
        kept = m.submodules.kept = Queue(layout, self.depth, memory_output=True,
                                         registered_fields=("gap_count", "duplicate_count"))
        # The segment record's few variable fields; the engine's merge takes segment and fetch together.
        pending = m.submodules.pending = Queue(data.StructLayout({"association": ASSOCIATION_BITS,
                                                                  "length": 16}), 2, valid_replicas=1)
        record = self.records.payload
        both = kept.sink.ready & pending.sink.ready
        m.d.comb += [
            kept.sink.payload.eq(record),
            pending.sink.payload.association.eq(record.association),
            pending.sink.payload.length.eq(sack_chunk_length(record.gap_count, record.duplicate_count)),
            kept.sink.valid.eq(self.records.valid & pending.sink.ready),
            pending.sink.valid.eq(self.records.valid & kept.sink.ready),
            self.records.ready.eq(both),
        ]
        head = pending.source.payload
        m.d.comb += [
            self.segments.payload.opcode.eq(ControlOpcode.PACKET),
            self.segments.payload.sack.eq(1),
            self.segments.payload.fetch.eq(1),
            self.segments.payload.association.eq(head.association),
            self.segments.payload.payload_length.eq(head.length),
            self.fetches.payload.local.eq(1),
            self.fetches.payload.length.eq(head.length),
            # One transfer: the consumer takes the segment and its fetch in the same cycle (their valids are
            # the queue's flip-flop).
            self.segments.valid.eq(pending.source.valid),
            self.segments_valid_replica.eq(pending.valid_replicas),
            self.fetches.valid.eq(pending.source.valid),
            pending.source.ready.eq(self.segments.ready & self.fetches.ready),
        ]

        # The chunk's bytes from the kept record at the head: the header, then the blocks in use, then
        # the duplicates listed (their place depends on the number of blocks).
        head = kept.source.payload
        most = _SACK_HEADER + 4 * (self.gap_blocks + self.duplicate_tsns)
        length = Signal(range(most + 1))
        m.d.comb += length.eq(sack_chunk_length(head.gap_count, head.duplicate_count))
        header = ([Const(SACK_CHUNK_TYPE, 8), Const(0, 8)] + _big_endian(length, 2)
                  + _big_endian(head.cumulative_tsn_ack, 4) + _big_endian(head.a_rwnd, 4)
                  + _big_endian(head.gap_count, 2) + _big_endian(head.duplicate_count, 2))
        blocks = [_big_endian(head.gaps[i].start, 2) + _big_endian(head.gaps[i].end, 2)
                  for i in range(self.gap_blocks)]
        duplicates = [byte for i in range(self.duplicate_tsns) for byte in _big_endian(head.duplicates[i], 4)]
        tail_bits = 8 * 4 * (self.gap_blocks + self.duplicate_tsns)
        tail = Const(0, tail_bits)
        for count in range(self.gap_blocks + 1):
            used = [byte for block in blocks[:count] for byte in block]
            padding = Const(0, tail_bits - 8 * len(used + duplicates))
            tail = Mux(head.gap_count == count, Cat(*used, *duplicates, padding), tail)
        bytes_total = max(most, width)
        chunk_bits = Cat(*header, tail, Const(0, 8 * (bytes_total - most)))

        # Out one beat per cycle from a shift register.
        shifter = Signal(8 * bytes_total)
        left = Signal(range(most + 1))
        loaded = Signal()
        out = self.payload
        m.d.comb += [
            out.valid.eq(loaded),
            out.payload.data.eq(shifter[:8 * width]),
            out.payload.keep.eq(thermometer(left, width)),
            out.payload.last.eq(left <= width),
            kept.source.ready.eq(~loaded),
        ]
        with m.If(~loaded & kept.source.valid):
            m.d.sync += [shifter.eq(chunk_bits), left.eq(length), loaded.eq(1)]
        with m.If(out.valid & out.ready):
            m.d.sync += [shifter.eq(shifter >> (8 * width)), left.eq(left - width)]
            with m.If(out.payload.last):
                m.d.sync += loaded.eq(0)
        return m
