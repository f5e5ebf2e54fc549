"""The memory-region (STag) table and the tagged placement checks.

A tagged DDP segment names its target buffer by STag and Tagged Offset
(RFC 5041 4.2). The STag is ``index << key_bits | key``: the upper
``32 - key_bits`` bits select a row of this table, the low ``key_bits``
(default 8, :func:`abi.rx.check_key_bits` gives the range) must equal the
row's ``key`` (so a re-registered row with a new key refuses segments aimed
at the old one; RFC 5041 8.2 leaves the STag's structure to us). A
row holds the registration of RFC 5041 8.3.1 items 4-5: the Tagged Offset
range ``[base_to, base_to + length)``, the host address of ``base_to``, the
access rights and the Protection Domain; ``stream_bound`` limits the STag to
one DDP Stream (association, stream id) (RFC 5041 8.2).

:class:`RegionTable` computes, for each lookup, every fault flag of the
tagged list of RFC 5041 7.1 independently; the caller applies the order of
``MemoryTable.check_tagged`` (the golden model):

1. ``invalid``: index beyond the table, row not valid, or key mismatch
   (7.1 tagged item 1; DDP 0x1/0x00);
2. ``pd_mismatch``: the region's PD is not the stream's (``stream_pd``,
   given by the caller), or ``stream_mismatch`` (8.2; DDP 0x1/0x02);
3. ``access_denied``: the right the opcode needs is missing (7.1 item 2;
   RDMA Write needs remote write, RDMA Read Response local write; RDMAP
   0x1/0x02, RFC 5040 7.2);
4. ``below_base``: TO < base_to (item 3; DDP 0x1/0x01);
5. ``past_end``: TO + length > base_to + length of the region (item 4;
   DDP 0x1/0x01);
6. ``wrap``: the 64-bit sum TO + length carries out (item 5; DDP 0x1/0x03),
   so a segment ending on TO 2**64 - 1 is refused as the model does.

``address`` is ``host_address + (TO - base_to)``, meaningful only when no
flag is set. All sums are exact (65 bits): a row whose ``base_to + length``
exceeds 2**64 is checked as written, never wrapped.

Writes and invalidation (RFC 5041 8.3.1 items 4-6): the host writes whole
rows through ``write``; revoking an STag is a write with ``valid = 0``. A
write is accepted only on a cycle where ``hold`` is low; the user of the
table (:class:`hdl.rx.placement_check.PlacementCheck`) holds it while any lookup
is in flight, so every lookup sees the table either wholly before or wholly
after a write, and a write that has been accepted affects every later
lookup. See PlacementCheck for the ordering guarantee this gives.

Latency: a lookup presented on a cycle with ``en`` high has its ``result``
after three more cycles with ``en`` high (the result registers of the third
stage); ``en`` low freezes all three stages. Throughput: one lookup per
cycle.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import (ASSOCIATION_BITS, STAG_BITS, STAG_KEY_BITS, STREAM_BITS, check_key_bits, region_entry_layout,
                    region_write_layout)
from hdl.layout import struct_layout

__all__ = ["region_lookup_layout", "region_result_layout", "RegionTable"]

_TO_BITS = 64



def region_lookup_layout(read_requests: bool = False) -> data.StructLayout:
    """A tagged access to check: ``length`` bytes at ``to`` of ``stag``. With ``read_requests`` the length
    has 32 bits (an RDMA Read Message Size, RFC 5040 4.4) and ``remote_read`` asks for the Data Source's
    right instead of a write's."""
    return data.StructLayout({
        "stag": unsigned(STAG_BITS),
        "to": unsigned(_TO_BITS),
        "length": unsigned(32 if read_requests else 16),
        "association": unsigned(ASSOCIATION_BITS),
        "stream_id": unsigned(STREAM_BITS),
        "local_write": unsigned(1),            # 1: needs local write (Read Response), 0: remote write
        **({"remote_read": unsigned(1)} if read_requests else {}),   # 1: needs remote read (RFC 5040 5.2)
    })


def region_result_layout(pd_bits: int = 16, address_bits: int = 64) -> data.StructLayout:
    """Every fault flag of a tagged lookup, unprioritised, and the host address."""
    return data.StructLayout({
        "invalid": unsigned(1),
        "pd": unsigned(pd_bits),
        "pd_mismatch": unsigned(1),
        "stream_mismatch": unsigned(1),
        "access_denied": unsigned(1),
        "below_base": unsigned(1),
        "past_end": unsigned(1),
        "wrap": unsigned(1),
        "fault": unsigned(1),          # any of the flags above (invalid .. wrap)
        "address": unsigned(address_bits),
    })


class RegionTable(wiring.Component):
    """Memory-region table of ``entries`` rows with a three-stage tagged check.

    Parameters
    ----------
    entries : int
        Rows; STag indices ``0 .. entries - 1`` exist, any other is invalid.
    pd_bits : int
        Width of a Protection Domain identifier.
    address_bits : int
        Width of a host address.
    key_bits : int
        The STag's low bits that hold the key (:func:`abi.rx.check_key_bits`).
    read_requests : bool
        Lookups may be an RDMA Read Request's Data Source (:func:`region_lookup_layout`).

    Ports
    -----
    write : ``In(stream.Signature(region_write_layout(...)))``
        Host writes of whole rows; accepted on cycles with ``hold`` low.
    hold : ``In(1)``
        Keeps ``write.ready`` low (set by the user while lookups are in flight).
    en : ``In(1)``
        Pipeline advance: ``lookup`` is taken and every stage moves when high.
    lookup : ``In(region_lookup_layout())``
        The access to check, sampled on cycles with ``en`` high.
    stream_pd : ``In(pd_bits)``
        The PD of the lookup's stream, presented two advances after the lookup
        (when the caller has read its stream table); compared on stage 2.
    result : ``Out(region_result_layout(...))``
        Flags and address of the lookup taken three advances earlier.

    Stages: (0) row read, (1) key/PD/stream/rights compare, ``TO < base``,
    the 65-bit sums ``TO + length``, ``base + length`` and the offset
    ``TO - base``; (2) ``end`` and PD compares and ``host_address + offset``. No
    stage chains two 64-bit carry paths.
    """

    def __init__(self, entries: int, *, pd_bits: int = 16, address_bits: int = 64, key_bits: int = STAG_KEY_BITS,
                 read_requests: bool = False):
        if entries < 1:
            raise ValueError(f"A region table needs at least one entry, not {entries}")
        check_key_bits(key_bits, entries)
        self._entries = entries
        self._pd_bits = pd_bits
        self._address_bits = address_bits
        self._key_bits = key_bits
        self._read_requests = read_requests
        super().__init__({
            "write": In(stream.Signature(struct_layout(region_write_layout(entries, pd_bits, address_bits,
                                                                           key_bits)))),
            "hold": In(1),
            "en": In(1),
            "lookup": In(region_lookup_layout(read_requests)),
            "stream_pd": In(pd_bits),
            "result": Out(region_result_layout(pd_bits, address_bits)),
        })

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def key_bits(self) -> int:
        return self._key_bits

    #: Advances from a lookup to its result.
    latency = 3

    def elaborate(self, platform):
        m = Module()
        entry_layout = struct_layout(region_entry_layout(self._pd_bits, self._address_bits, self._key_bits))
        table = m.submodules.table = memory.Memory(shape=entry_layout, depth=self._entries, init=[])
        write_port = table.write_port()
        read_port = table.read_port()

        m.d.comb += [
            self.write.ready.eq(~self.hold),
            write_port.addr.eq(self.write.payload.index),
            write_port.data.eq(self.write.payload.entry),
            write_port.en.eq(self.write.valid & ~self.hold),
        ]

        # Stage 0: read the row the STag indexes.
        index = self.lookup.stag[self._key_bits:]
        m.d.comb += [read_port.addr.eq(index), read_port.en.eq(self.en)]
        request = Signal(region_lookup_layout(self._read_requests))
        in_range = Signal()
        with m.If(self.en):
            m.d.sync += [request.eq(self.lookup), in_range.eq(index < self._entries)]

        # Stage 1: everything that needs one compare or one adder.
        entry = read_port.data
        s2 = Signal(data.StructLayout({
            "invalid": 1, "pd": self._pd_bits, "stream_mismatch": 1, "access_denied": 1,
            "below_base": 1, "segment_end": _TO_BITS + 1, "region_end": _TO_BITS + 1,
            "offset": _TO_BITS, "host_address": self._address_bits,
        }))
        with m.If(self.en):
            m.d.sync += [
                s2.invalid.eq(~in_range | ~entry.valid | (entry.key != request.stag[:self._key_bits])),
                s2.pd.eq(entry.pd),
                s2.stream_mismatch.eq(entry.stream_bound & (
                    (entry.association != request.association) | (entry.stream_id != request.stream_id))),
                s2.access_denied.eq(
                    Mux(request.remote_read, ~entry.remote_read,
                        Mux(request.local_write, ~entry.local_write, ~entry.remote_write))
                    if self._read_requests else Mux(request.local_write, ~entry.local_write, ~entry.remote_write)),
                s2.below_base.eq(request.to < entry.base_to),
                s2.segment_end.eq(request.to + request.length),
                s2.region_end.eq(entry.base_to + entry.length),
                s2.offset.eq(request.to - entry.base_to),
                s2.host_address.eq(entry.host_address),
            ]

        # Stage 2: the end compare, the carry out and the host address.
        pd_mismatch = s2.pd != self.stream_pd
        # The 65-bit compare as two halves side by side, not one carry chain through all of it.
        half = (_TO_BITS + 1) // 2
        segment_high, region_high = s2.segment_end[half:], s2.region_end[half:]
        past_end = (segment_high > region_high) | ((segment_high == region_high)
                                                   & (s2.segment_end[:half] > s2.region_end[:half]))
        wrap = s2.segment_end[_TO_BITS]
        with m.If(self.en):
            m.d.sync += [
                self.result.fault.eq(s2.invalid | pd_mismatch | s2.stream_mismatch | s2.access_denied
                                     | s2.below_base | past_end | wrap),
                self.result.invalid.eq(s2.invalid),
                self.result.pd.eq(s2.pd),
                self.result.pd_mismatch.eq(pd_mismatch),
                self.result.stream_mismatch.eq(s2.stream_mismatch),
                self.result.access_denied.eq(s2.access_denied),
                self.result.below_base.eq(s2.below_base),
                self.result.past_end.eq(past_end),
                self.result.wrap.eq(wrap),
                self.result.address.eq(s2.host_address + s2.offset),
            ]
        return m
