"""Write each SCTP packet's CRC32c into its common header on the way out (RFC 4960 6.8).

The packets arrive whole in a buffer with the checksum field zero, and their
CRC32c values (from :class:`~hdl.stream.crc32c.Crc32c`, in packet order) come
after each packet's last byte: a packet leaves only once its CRC is known, so
the buffer in front of this block is the path's store-and-forward stage. The
field is bytes 8..11 of the packet, least significant byte first, so it sits
in a fixed beat at fixed lanes and the insertion is a 2:1 choice on 32 bits.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.bits import check_width
from hdl.stream.packet import packet_signature

__all__ = ["CrcInsert", "CHECKSUM_OFFSET"]

#: The checksum field of the SCTP common header (RFC 4960 3.1).
CHECKSUM_OFFSET = 8


class CrcInsert(wiring.Component):
    """``sink`` packets out on ``source`` with ``crc`` written at :data:`CHECKSUM_OFFSET`.

    Ports
    -----
    sink : ``In(packet_signature(W))``
        SCTP packets (at least 12 bytes); a beat passes only while its packet's CRC is on ``crc``.
    crc : ``In(stream.Signature(unsigned(32)))``
        One per packet, taken with the packet's last beat.
    source : ``Out(packet_signature(W))``
        Combinational from ``sink`` and ``crc``: put a registered stage behind it.
    """

    def __init__(self, width_bytes: int):
        check_width(width_bytes)
        self._width = width_bytes
        super().__init__({
            "sink": In(packet_signature(width_bytes)),
            "crc": In(stream.Signature(unsigned(32))),
            "source": Out(packet_signature(width_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        field_beat, field_lane = divmod(CHECKSUM_OFFSET, width)
        beat = Signal(range(field_beat + 2))     # beats of the packet sent, saturating past the field's
        at_field = beat == field_beat
        data = self.sink.payload.data
        low, high = 8 * field_lane, 8 * field_lane + 32
        m.d.comb += [
            self.source.payload.keep.eq(self.sink.payload.keep),
            self.source.payload.last.eq(self.sink.payload.last),
            self.source.payload.data.eq(Cat(data[:low], Mux(at_field, self.crc.payload, data[low:high]),
                                            data[high:])),
            self.source.valid.eq(self.sink.valid & self.crc.valid),
            self.sink.ready.eq(self.source.ready & self.crc.valid),
            self.crc.ready.eq(self.source.ready & self.sink.valid & self.sink.payload.last),
        ]
        with m.If(self.source.valid & self.source.ready):
            with m.If(self.sink.payload.last):
                m.d.sync += beat.eq(0)
            with m.Elif(beat != field_beat + 1):
                m.d.sync += beat.eq(beat + 1)
        return m
