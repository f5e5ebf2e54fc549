"""The RNIC core: the receive engine and the transmit engine behind one set of standard ports.

::

    s_axis ──► RxEngine ──m_axi (AW, W, B)──┐
                 │  └─► m_axis_report, m_axis_ack, m_axis_exc
                 │ local MAC, IP, UDP port  ├──► m_axi (host memory)
                 ▼                          │
    s_axis_wr, s_axis_rr, s_axis_ctl,       │
    s_axis_tsn,                             │
    s_axis_peer_sack ──► TxEngine ──m_axi (AR, R)─┘
                     │  └─► m_axis_completion, m_axis_tsn_refused, m_axis_rr_refused,
                     │      m_axis_transport_stopped
                     └─► m_axis

    s_axil ─► AxiLiteSplit ─┬─ 0x0000: the receive engine's registers (abi.rx.register_map)
                            └─ 0x1000: the transmit engine's tables (abi.tx.tx_register_map)

Ports (all AXI, so cocotbext-axi and FPGA shells bind them):

* ``s_axis``, ``m_axis``: AXI4-Stream, W bytes, Ethernet II frames without
  FCS, in and out;
* ``m_axi``: AXI4 manager, 64-bit addresses, 8W-bit data, to host memory:
  the receive engine's placement writes on AW, W and B, the transmit
  engine's payload reads on AR and R (each half has the channels to itself,
  so nothing is arbitrated and neither waits for the other);
* ``s_axil``: AXI4-Lite, 13-bit addresses: the receive engine's
  :func:`abi.rx.register_map` at 0 (this end's MAC, IPv4 address and UDP
  port among its configuration words serve both engines), the transmit
  engine's association, stream and transport rows at
  :data:`abi.tx.TX_REGISTER_BASE` (:func:`abi.tx.tx_register_map`);
* receive records: ``m_axis_report``, ``m_axis_ack``, ``m_axis_exc``
  (:class:`hdl.rx.engine.RxEngine`);
* transmit requests and records: ``s_axis_wr``, ``s_axis_rr``,
  ``s_axis_ctl``, ``s_axis_tsn``, ``m_axis_completion``,
  ``m_axis_tsn_refused``, ``m_axis_rr_refused``
  (:class:`hdl.tx.engine.TxEngine`);
* the transport unit (:mod:`hdl.tx.transport_unit`, RFC 4960 6.1-6.3, 7.2,
  8.1) of a row the host hands it (the ``tx_transport`` table row): the
  receive engine sends it the peer's SACK chunks of the rows whose SACK row
  says ``peer_sacks`` (:mod:`hdl.rx.sack_reader`); ``s_axis_peer_sack`` takes
  the host's (a SHUTDOWN's Cumulative TSN Ack, RFC 4960 9.2);
  ``m_axis_transport_stopped`` tells the host the unit stopped a row
  (association failure, protocol violation). Its timer ticks with the
  receive engine's acknowledgement unit.

An inbound RDMA Read Request reaches the host as a report record (its
untagged segment placed in a posted Read Request buffer, RFC 5040 5.2.2);
the host checks its Data Source against the region it registered and
writes the ``s_axis_rr`` record, or sends the Terminate (RFC 5040 7.2).

With ``read_responder`` (off by default) the receive engine does that itself
(:class:`hdl.rx.engine.RxEngine`): it checks the request's Data Source in its
region table and sends each accepted request, in DDP-SSN order, to the
transmit engine's read queue, ahead of any record the host writes on
``s_axis_rr`` (kept, for a host that answers a request itself; one beat each,
so the two never interleave). The Read Response leaves on ``m_axis`` with no
host action. A refused request is an error report record (RDMAP Remote
Protection Error, RFC 5040 7.2): the host sends the Terminate. The host then
posts no QN 1 buffers.
"""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from abi.rx import ADDRESS_BITS, SACK_TICK_CYCLES, STAG_KEY_BITS, ack_bytes, exception_record_layout, report_bytes
from abi.tx import (TX_PARAMS, completion_bytes, control_request_bytes, peer_sack_bytes, read_response_bytes,
                    transport_record_bytes, tsn_request_bytes, tx_register_map, work_request_bytes)
from hdl.bus.axi import Axi4LiteSignature, Axi4Signature
from hdl.bus.axil_split import AxiLiteSplit
from hdl.bus.axis import AxiStreamSignature
from hdl.bus.register_file import RegisterFile
from hdl.layout import struct_layout
from hdl.rx.engine import RxEngine
from hdl.tx.engine import TxEngine

__all__ = ["Rnic"]

#: Ports that pass straight through to the engine of the same name.
RX_PORTS = ("s_axis", "m_axis_report", "m_axis_ack", "m_axis_exc")
TX_PORTS = ("m_axis", "s_axis_wr", "s_axis_rr", "s_axis_ctl", "s_axis_tsn", "m_axis_completion",
            "m_axis_tsn_refused", "m_axis_rr_refused")


class Rnic(wiring.Component):
    """The receive and transmit engines for a ``width_bytes`` datapath (8, 16, 32 or 64) with their
    tables sized alike: ``associations`` of ``stream_ids`` streams, ``regions`` memory regions
    (STag = row << ``key_bits`` | key, :func:`abi.rx.check_key_bits`),
    ``buffers_per_queue`` posted buffers, IRD ``ird``, ``ring_tsns`` DATA chunks in flight per
    association; with ``transport``, the transmit engine's transport unit and its ports (not yet by
    default: it does not meet the core clock, docs/architecture/transport.md); with
    ``external_tick``, the timer ticks once per cycle of the ``tick`` input instead of every
    ``tick_cycles``, and ``tick_busy`` says the last tick is not yet taken by the acknowledgement and
    transport units (for a simulation whose own clock advances the timer, ``sim.driver_sim``).
    ``address_bits`` of a host memory address are kept (``m_axi``'s width, from
    :data:`abi.rx.MIN_ADDRESS_BITS` to the host records' 64): a device whose memory is small keeps its
    rows, requests and queues that much narrower. The host's records still carry 64-bit addresses;
    the bits above ``address_bits`` are left out, and the driver places nothing there.
    ``block_ram_queues``: the six wide FIFOs (the receive path's segment records, verdicts, reports
    and delivered records, the transmit path's header queues) in block RAM, for the top's timing; without, in
    LUT RAM, as many DP16KD fewer (some 67 at W = 8), for a device whose routing runs short beside them.
    ``read_responder``: RDMA Read Requests answered by the engines themselves (the module docstring;
    off by default, and off the top is exactly the one without the option)."""

    def __init__(self, width_bytes: int, *, associations: int = 2, stream_ids: int = 4, regions: int = 16,
                 key_bits: int = STAG_KEY_BITS, buffers_per_queue: int = 8, rx_buffer_bytes: int = 32768,
                 ird: int = 4, tx_buffer_bytes: int = 8192, ring_tsns: int = 64, tick_cycles: int = SACK_TICK_CYCLES,
                 transport: bool = False, external_tick: bool = False, address_bits: int = ADDRESS_BITS,
                 block_ram_queues: bool = True, read_responder: bool = False):
        self.read_responder = read_responder
        self.width_bytes, self.external_tick, self.address_bits = width_bytes, external_tick, address_bits
        self.associations, self.stream_ids, self.ird, self.ring_tsns = associations, stream_ids, ird, ring_tsns
        self.rx = RxEngine(width_bytes, associations=associations, stream_ids=stream_ids, regions=regions,
                           key_bits=key_bits, buffers_per_queue=buffers_per_queue, buffer_bytes=rx_buffer_bytes,
                           tick_cycles=tick_cycles, peer_sacks=transport, external_tick=external_tick,
                           address_bits=address_bits, block_ram_queues=block_ram_queues,
                           read_responder=read_responder)
        self.tx = TxEngine(width_bytes, associations=associations, stream_ids=stream_ids, ird=ird,
                           buffer_bytes=tx_buffer_bytes, ring_tsns=ring_tsns, transport=transport,
                           address_bits=address_bits, block_ram_queues=block_ram_queues)
        self.transport = transport
        self.tx_map = tx_register_map(associations, stream_ids, transport)
        members = {
            "s_axil": In(Axi4LiteSignature(addr_width=13, data_width=32)),
            "m_axi": Out(Axi4Signature(addr_width=address_bits, data_width=8 * width_bytes, id_width=4)),
            "s_axis": In(AxiStreamSignature(width_bytes)),
            "m_axis_report": Out(AxiStreamSignature(report_bytes())),
            "m_axis_ack": Out(AxiStreamSignature(ack_bytes())),
            "m_axis_exc": Out(AxiStreamSignature(width_bytes, exception_record_layout().size)),
            "m_axis": Out(AxiStreamSignature(width_bytes)),
            "s_axis_wr": In(AxiStreamSignature(work_request_bytes())),
            "s_axis_rr": In(AxiStreamSignature(read_response_bytes())),
            "s_axis_ctl": In(AxiStreamSignature(control_request_bytes())),
            "s_axis_tsn": In(AxiStreamSignature(tsn_request_bytes())),
            "m_axis_completion": Out(AxiStreamSignature(completion_bytes())),
            "m_axis_tsn_refused": Out(AxiStreamSignature(tsn_request_bytes())),
            "m_axis_rr_refused": Out(AxiStreamSignature(read_response_bytes())),
        }
        if transport:
            members |= {"s_axis_peer_sack": In(AxiStreamSignature(peer_sack_bytes())),
                        "m_axis_transport_stopped": Out(AxiStreamSignature(transport_record_bytes()))}
        if external_tick:
            members |= {"tick": In(1), "tick_busy": Out(1)}
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        rx, tx = m.submodules.rx, m.submodules.tx = self.rx, self.tx
        m.submodules.split = split = AxiLiteSplit(13, 2)
        m.submodules.tx_registers = tx_registers = RegisterFile(self.tx_map)

        connect(m, wiring.flipped(self.s_axil), split.bus)
        connect(m, split.sub_0, rx.s_axil)
        connect(m, split.sub_1, tx_registers.axil)
        connect(m, tx_registers.table_tx_association, tx.association_write)
        connect(m, tx_registers.table_tx_stream, tx.stream_write)
        m.d.comb += [tx_registers.counter_sacks_sent.eq(tx.sacks_sent),
                     tx_registers.counter_request_frames.eq(tx.request_frames)]
        connect(m, rx.m_axis_sack, tx.s_axis_sack)   # the receive engine's SACKs leave through the transmit path
        if self.transport:
            self._elaborate_transport(m, rx, tx, tx_registers)
        m.d.comb += [
            tx_registers.params.eq(TX_PARAMS.pack({"width_bytes": self.width_bytes, "ird": self.ird,
                                                   "ring_tsns": self.ring_tsns,
                                                   "transport": int(self.transport)})),
            tx.local_mac.eq(rx.local_mac), tx.local_ip.eq(rx.local_ip), tx.udp_port.eq(rx.udp_port),
        ]

        if self.external_tick:
            busy = rx.tick_busy | (~self.tx.transport.idle if self.transport else 0)
            m.d.comb += [rx.tick_in.eq(self.tick), self.tick_busy.eq(busy)]
        for name in RX_PORTS:
            connect(m, wiring.flipped(getattr(self, name)), getattr(rx, name))
        for name in TX_PORTS + (("m_axis_transport_stopped",) if self.transport else ()):
            if name == "s_axis_rr" and self.read_responder:
                continue
            connect(m, wiring.flipped(getattr(self, name)), getattr(tx, name))
        if self.read_responder:
            # The receive engine's accepted Read Requests, ahead of the host's records (one beat each).
            from_rx, from_host, into = rx.m_axis_rr, self.s_axis_rr, tx.s_axis_rr
            m.d.comb += [
                into.tdata.eq(Mux(from_rx.tvalid, from_rx.tdata, from_host.tdata)), into.tkeep.eq(-1),
                into.tlast.eq(1), into.tvalid.eq(from_rx.tvalid | from_host.tvalid),
                from_rx.tready.eq(into.tready), from_host.tready.eq(into.tready & ~from_rx.tvalid),
            ]

        # Host memory: the receive engine's write channels, the transmit engine's read channels.
        host = self.m_axi
        for name, member in host.signature.members.items():
            source = rx.m_axi if name.startswith(("aw", "w", "b")) else tx.m_axi
            if member.flow is Out:
                m.d.comb += getattr(host, name).eq(getattr(source, name))
            else:
                m.d.comb += getattr(source, name).eq(getattr(host, name))
        return m

    def _elaborate_transport(self, m, rx, tx, tx_registers):
        # A transport row write; the transport unit's timer ticks with the acknowledgement unit's.
        transport_row = tx_registers.table_tx_transport
        m.d.comb += tx_registers.counter_messages_started.eq(tx.messages_started)
        for row in range(self.associations):
            m.d.comb += getattr(tx_registers, f"counter_cumulative_tsn_ack_{row}").eq(tx.cumulative_tsn_acks[row])
        m.d.comb += [tx.s_axis_transport.tdata.eq(transport_row.payload.as_value()), tx.s_axis_transport.tkeep.eq(-1),
                     tx.s_axis_transport.tlast.eq(1), tx.s_axis_transport.tvalid.eq(transport_row.valid),
                     transport_row.ready.eq(tx.s_axis_transport.tready), tx.tick.eq(rx.tick)]
        # The peer's SACKs from the receive engine, ahead of the host's (a SHUTDOWN's Cumulative TSN Ack).
        from_rx, from_host, into = rx.m_axis_peer_sack, self.s_axis_peer_sack, tx.s_axis_peer_sack
        m.d.comb += [
            into.tdata.eq(Mux(from_rx.tvalid, from_rx.tdata, from_host.tdata)), into.tkeep.eq(-1), into.tlast.eq(1),
            into.tvalid.eq(from_rx.tvalid | from_host.tvalid),
            from_rx.tready.eq(into.tready), from_host.tready.eq(into.tready & ~from_rx.tvalid),
        ]
