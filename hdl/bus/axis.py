"""AXI4-Stream ports (AMBA AXI4-Stream, ARM IHI 0051) for the engine's top level.

Inside the engine packets travel as :mod:`hdl.stream.packet` packet streams; at the
top level they become AXI4-Stream ports so that FPGA shells and
cocotbext-axi (``AxiStreamBus.from_prefix(dut, "s_axis_")``) bind to them
directly. Members are flat and named as the specification's signals:
``tdata`` (lane 0 = bits 7:0 = first byte), ``tkeep``, ``tlast``, ``tuser``,
``tvalid``, ``tready``; the signature is the transmitter's view.
"""

from amaranth.hdl import Module, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.packet import packet_signature

__all__ = ["AxiStreamSignature", "axis_payload_layout", "AxiStreamToPacket", "PacketToAxiStream"]


class AxiStreamSignature(wiring.Signature):
    """AXI4-Stream, transmitter's view: ``Out(...)`` transmits, ``In(...)`` receives."""

    def __init__(self, data_bytes: int, user_bits: int = 0):
        self.data_bytes, self.user_bits = data_bytes, user_bits
        members = {
            "tdata": Out(8 * data_bytes),
            "tkeep": Out(data_bytes),
            "tlast": Out(1),
            "tvalid": Out(1),
            "tready": In(1),
        }
        if user_bits:
            members["tuser"] = Out(user_bits)
        super().__init__(members)

    def __eq__(self, other):
        other = other.flip() if type(other) is wiring.FlippedSignature else other
        return type(other) is AxiStreamSignature and (self.data_bytes, self.user_bits) == (
            other.data_bytes, other.user_bits)

    def __hash__(self):
        return hash((AxiStreamSignature, self.data_bytes, self.user_bits))

    def __repr__(self):
        return f"AxiStreamSignature({self.data_bytes}, user_bits={self.user_bits})"


def axis_payload_layout(data_bytes: int, user_bits: int = 0) -> data.StructLayout:
    """A beat of ``data_bytes`` lanes (the fields of :func:`hdl.stream.packet.packet_layout`, any
    width) with a ``user`` word beside it, if any."""
    fields = {"data": unsigned(8 * data_bytes), "keep": unsigned(data_bytes), "last": unsigned(1)}
    if user_bits:
        fields["user"] = unsigned(user_bits)
    return data.StructLayout(fields)


class AxiStreamToPacket(wiring.Component):
    """An AXI4-Stream receiver port feeding a packet stream (wires only, no latency).

    Put a :class:`hdl.stream.queue.Queue` behind it to register ``tready``.
    """

    def __init__(self, width_bytes: int):
        super().__init__({
            "axis": In(AxiStreamSignature(width_bytes)),
            "packets": Out(packet_signature(width_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.packets.payload.data.eq(self.axis.tdata),
            self.packets.payload.keep.eq(self.axis.tkeep),
            self.packets.payload.last.eq(self.axis.tlast),
            self.packets.valid.eq(self.axis.tvalid),
            self.axis.tready.eq(self.packets.ready),
        ]
        return m


class PacketToAxiStream(wiring.Component):
    """A packet stream, each beat with its ``user`` word (:func:`axis_payload_layout`), onto an
    AXI4-Stream transmitter port; wires only (a :class:`hdl.stream.queue.Queue` in front registers
    ``tvalid``, ``tdata`` and ``tuser``)."""

    def __init__(self, width_bytes: int, user_bits: int = 0):
        super().__init__({
            "packets": In(stream.Signature(axis_payload_layout(width_bytes, user_bits))),
            "axis": Out(AxiStreamSignature(width_bytes, user_bits)),
        })
        self._user_bits = user_bits

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.axis.tdata.eq(self.packets.payload.data),
            self.axis.tkeep.eq(self.packets.payload.keep),
            self.axis.tlast.eq(self.packets.payload.last),
            self.axis.tvalid.eq(self.packets.valid),
            self.packets.ready.eq(self.axis.tready),
        ]
        if self._user_bits:
            m.d.comb += self.axis.tuser.eq(self.packets.payload.user)
        return m
