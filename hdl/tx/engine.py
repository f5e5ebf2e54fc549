"""The transmit engine: work requests in, DDP segments in Ethernet frames out.

::

                                           s_axis_ctl
                                               ▼ (control first, then responses)
    s_axis_rr ─► ReadRequestQueue ─responses─► WorkArbiter ─work─► Segmenter (below)
                   │        ▲                          ▲
                   │        └─ Segmenter.response_sent │
                   └─refused─► m_axis_rr_refused   s_axis_wr

    Segmenter ─segment─► RetransmitRing ◄─ s_axis_tsn (ACK, RESEND)
                           │  │   └─► m_axis_tsn_refused, m_axis_completion
        ┌───────segment────┘  │
        ▼                     │
    HeaderBuilder ─sctp_header─► Prepend ─► Crc32c ─crc──┐
        │                │    (SCTP) ▲  └──► buffer ─► CrcInsert ─► Prepend ─► m_axis
        │  PayloadFetcher ◄─fetch────┘ (payload)         (frame) ▲
        │     ▲ m_axi (AR, R)                                    │
        └─prefix (Ethernet, IPv4, UDP)───────────────────────────┘

* :class:`~hdl.tx.read_queue.ReadRequestQueue`: inbound RDMA Read Requests,
  at most ``ird`` per stream row, the rest refused;
* :class:`~hdl.tx.arbiter.WorkArbiter`: the next message for the segmenter, a
  control request ahead of a Read Response ahead of a local work request;
* :class:`~hdl.tx.segmenter.Segmenter`: RFC 5041 5.2 segmentation to the
  association's MULPDU, TSN, DDP-SSN and MSN counters;
* :class:`~hdl.tx.ring.RetransmitRing`: every DATA chunk not yet acknowledged,
  by TSN, sent again on request; acknowledgements retire them and complete
  the work requests;
* :class:`~hdl.tx.transport_unit.TransportUnit`: for a row the host hands it,
  the peer's SACKs, the retransmission timer and the windows (RFC 4960 6.1-6.3,
  7.2, 8.1): its decisions reach the ring as the host's ACK, RESEND and LIMIT
  did;
* :class:`~hdl.tx.payload_fetcher.PayloadFetcher`: each segment's payload over
  AXI4 reads, realigned to lane 0;
* :class:`~hdl.tx.headers.HeaderBuilder`: the SCTP packet's headers and the
  Ethernet/IPv4(/UDP) prefix of each segment;
* the SCTP packet (headers, payload, padding) is built by a
  :class:`~hdl.stream.prepend.Prepend`, its CRC32c computed while it enters a
  BRAM buffer of ``buffer_bytes``; it leaves once its CRC is known
  (:class:`~hdl.tx.crc_insert.CrcInsert`), behind its prefix (a second
  Prepend).

Ports:

* ``s_axis_wr``: AXI4-Stream, one beat per work request, ``tdata`` =
  :func:`abi.tx.work_request_layout` (see there for the fields);
* ``s_axis_rr``: AXI4-Stream, one beat per inbound RDMA Read Request to
  answer, ``tdata`` = :func:`abi.tx.read_response_layout` (see there: who
  translates the Data Source, IRD, refusal); ``m_axis_rr_refused``: the
  records refused, one beat each, same layout;
* ``s_axis_ctl``: AXI4-Stream, one beat per control request (a control
  packet's chunks or a session-control message to send), ``tdata`` =
  :func:`abi.tx.control_request_layout`;
* ``s_axis_tsn``: AXI4-Stream, one beat per acknowledgement, sending limit or
  retransmission request of the host's SCTP, ``tdata`` =
  :func:`abi.tx.tsn_request_layout`; ``m_axis_tsn_refused``: resends of TSNs
  not in the ring, same layout; ``m_axis_completion``: one beat per work
  request (or session-control message) whose last DATA chunk is acknowledged,
  :func:`abi.tx.completion_layout`;
* ``s_axis_transport``: one beat per transport row write
  (:func:`abi.tx.transport_write_layout`): the row's window is the transport
  unit's from its next TSN on, and the host's ACK, RESEND and LIMIT for it are
  refused (on ``m_axis_tsn_refused``) until an association row write gives it
  back; ``s_axis_peer_sack``: the peer's SACK chunks of such a row
  (:func:`abi.tx.peer_sack_layout`); ``m_axis_transport_stopped``: the unit's
  FAILURE and VIOLATION records (:func:`abi.tx.transport_record_layout`), after
  which the row sends no new chunk; ``tick``: the unit's timer, one cycle per
  tick;
* ``association_write``, ``stream_write``: table rows
  (:func:`abi.tx.tx_association_write_layout`,
  :func:`abi.tx.tx_stream_write_layout`), always ready; ``local_mac``,
  ``local_ip``, ``udp_port``: this end's addresses;
* ``m_axi``: AXI4 read manager, 64-bit addresses, 8W-bit data;
* ``m_axis``: AXI4-Stream, W bytes, Ethernet II frames without FCS.

The buffer holds every SCTP packet whole before it leaves: an association's
MULPDU is at most ``buffer_bytes / 2 - 80`` for two packets to overlap (one
leaving while the next fills it), and must stay below ``buffer_bytes - 80``.
Every block boundary is a :class:`~hdl.stream.queue.Queue` or a registered
stage.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.data import ArrayLayout
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out, connect
from amaranth.lib import stream

from abi.rx import ADDRESS_BITS, check_address_bits
from abi.tx import (TransportOpcode, TsnOpcode, completion_bytes, control_request_bytes, control_request_layout,
                    peer_sack_bytes, peer_sack_layout, read_response_bytes, read_response_layout,
                    transport_record_bytes, transport_record_layout, transport_write_bytes, transport_write_layout,
                    tsn_request_bytes, tsn_request_layout, tx_association_write_layout, tx_stream_write_layout,
                    work_request_bytes, work_request_layout)
from hdl.bus.axi import Axi4ReadSignature
from hdl.bus.axis import AxiStreamSignature, PacketToAxiStream
from hdl.layout import as_layout, struct_layout
from hdl.stream.crc32c import Crc32c
from hdl.stream.packet import packet_layout
from hdl.stream.prepend import Prepend
from hdl.stream.queue import Queue
from hdl.tx.arbiter import WorkArbiter
from hdl.tx.crc_insert import CrcInsert
from hdl.tx.headers import PREFIX_LENGTHS, SCTP_HEADER_LENGTHS, HeaderBuilder, user_data_bytes
from hdl.tx.layouts import fetch_layout, segment_layout
from hdl.tx.payload_fetcher import PayloadFetcher
from hdl.tx.read_queue import ReadRequestQueue
from hdl.tx.ring import RetransmitRing
from hdl.tx.sack_sender import SackSender
from hdl.tx.segmenter import Segmenter
from hdl.tx.transport_unit import TransportUnit, transport_sent_layout
from hdl.rx.sack_unit import sack_record_bytes, sack_record_layout

__all__ = ["TxEngine"]


def _from_host(m, tdata, layout_of, address_bits: int):
    """The host's record in a beat's ``tdata`` (``layout_of(ADDRESS_BITS)``) as the engine keeps it
    (``layout_of(address_bits)``): a host address's bits above ``address_bits`` are left out (the
    driver places nothing there: they lie past the device's memory)."""
    wide = struct_layout(layout_of(ADDRESS_BITS))
    return as_layout(m, wide(tdata[:wide.size]), struct_layout(layout_of(address_bits)))


def _to_host(m, record, layout_of):
    """The engine's ``record`` as the host's (``layout_of(ADDRESS_BITS)``): its addresses zero-extended."""
    return as_layout(m, record, struct_layout(layout_of(ADDRESS_BITS)))


class TxEngine(wiring.Component):
    """The transmit engine for a ``width_bytes`` datapath (8, 16, 32 or 64), ``associations``
    associations of ``stream_ids`` streams each (a power of two; stream row ``association *
    stream_ids + stream_id``), answering up to ``ird`` inbound RDMA Read Requests per stream row, with
    ``ring_tsns`` DATA chunks per association in flight. With ``transport`` it holds the transport unit and
    its ports (``s_axis_transport``, ``s_axis_peer_sack``, ``m_axis_transport_stopped``, ``tick``); without,
    the host's SCTP keeps every row's window. It is not built by default (docs/architecture/transport.md,
    "The transport in the gateware"). ``address_bits`` and ``block_ram_queues``: as :class:`hdl.rnic.Rnic`'s."""

    def __init__(self, width_bytes: int, *, associations: int = 2, stream_ids: int = 4, ird: int = 4,
                 buffer_bytes: int = 8192, ring_tsns: int = 64, transport: bool = False,
                 address_bits: int = ADDRESS_BITS, block_ram_queues: bool = True):
        if stream_ids & (stream_ids - 1):
            raise ValueError(f"stream_ids must be a power of two, not {stream_ids}")
        check_address_bits(address_bits)
        self.width_bytes, self.address_bits, self.block_ram_queues = width_bytes, address_bits, block_ram_queues
        self.associations, self.stream_ids, self.ird = associations, stream_ids, ird
        self.buffer_bytes, self.ring_tsns = buffer_bytes, ring_tsns
        self.transport = TransportUnit(associations, ring_tsns=ring_tsns) if transport else None
        transport_ports = {
            "s_axis_transport": In(AxiStreamSignature(transport_write_bytes())),
            "s_axis_peer_sack": In(AxiStreamSignature(peer_sack_bytes())),
            "m_axis_transport_stopped": Out(AxiStreamSignature(transport_record_bytes())),
            "tick": In(1),
            # The messages the segmenter has taken from the arbiter (control, Read Responses, work: RFC 5040
            # 5.5's order), and each row's Cumulative TSN Ack: a host pushing one request a message reads them.
            "messages_started": Out(32),
            "cumulative_tsn_acks": Out(ArrayLayout(32, associations)),
        } if transport else {}
        super().__init__({
            "s_axis_wr": In(AxiStreamSignature(work_request_bytes())),
            "s_axis_rr": In(AxiStreamSignature(read_response_bytes())),
            "m_axis_rr_refused": Out(AxiStreamSignature(read_response_bytes())),
            "s_axis_ctl": In(AxiStreamSignature(control_request_bytes())),
            "s_axis_tsn": In(AxiStreamSignature(tsn_request_bytes())),
            "m_axis_tsn_refused": Out(AxiStreamSignature(tsn_request_bytes())),
            "m_axis_completion": Out(AxiStreamSignature(completion_bytes())),
            "association_write": In(stream.Signature(struct_layout(tx_association_write_layout()))),
            "stream_write": In(stream.Signature(struct_layout(tx_stream_write_layout(associations * stream_ids)))),
            "local_mac": In(48),
            "local_ip": In(32),
            "udp_port": In(16),
            "m_axi": Out(Axi4ReadSignature(addr_width=address_bits, data_width=8 * width_bytes, id_width=4)),
            "m_axis": Out(AxiStreamSignature(width_bytes)),
            "s_axis_sack": In(AxiStreamSignature(sack_record_bytes())),
            **transport_ports,
            "sacks_sent": Out(32),
            "request_frames": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        width, address_bits = self.width_bytes, self.address_bits
        segmenter = m.submodules.segmenter = Segmenter(associations=self.associations, stream_ids=self.stream_ids,
                                                       address_bits=address_bits)
        headers = m.submodules.headers = HeaderBuilder(associations=self.associations, address_bits=address_bits,
                                                       block_ram=self.block_ram_queues)
        ring = m.submodules.ring = RetransmitRing(associations=self.associations, ring_tsns=self.ring_tsns,
                                                  address_bits=address_bits)
        fetcher = m.submodules.fetcher = PayloadFetcher(width, address_bits)
        sctp = m.submodules.sctp = Prepend(width, SCTP_HEADER_LENGTHS, pad_to=4)
        crc = m.submodules.crc = Crc32c(width)
        buffer = m.submodules.buffer = SyncFIFOBuffered(width=packet_layout(width).size,
                                                        depth=self.buffer_bytes // width)
        insert = m.submodules.insert = CrcInsert(width)
        frame = m.submodules.frame = Prepend(width, PREFIX_LENGTHS)

        # Work requests: one AXI4-Stream beat each, through a queue.
        # Read straight from LUT RAM (as every request queue into the arbiter): the segmenter's late
        # `ready` reaches a read counter, not a wide output register's enable; the fields the
        # segmenter decodes when it stages a request are kept in flip-flops too.
        work_queue = m.submodules.work_queue = Queue(struct_layout(work_request_layout(address_bits)), 4,
                                                     memory_output=True, registered_fields=("opcode", "association"))
        m.d.comb += [
            work_queue.sink.payload.eq(_from_host(m, self.s_axis_wr.tdata, work_request_layout, address_bits)),
            work_queue.sink.valid.eq(self.s_axis_wr.tvalid),
            self.s_axis_wr.tready.eq(work_queue.sink.ready),
        ]

        # Inbound Read Requests: one beat each, through a queue, into the IRD queue; refusals out.
        layout = struct_layout(read_response_layout(address_bits))
        # From the queue's LUT RAM: no wide output register whose enable is the IRD stage's ready.
        request_queue = m.submodules.request_queue = Queue(layout, 4, memory_output=True)
        reads = m.submodules.reads = ReadRequestQueue(associations=self.associations, stream_ids=self.stream_ids,
                                                      ird=self.ird, address_bits=address_bits)
        m.d.comb += [
            request_queue.sink.payload.eq(_from_host(m, self.s_axis_rr.tdata, read_response_layout, address_bits)),
            request_queue.sink.valid.eq(self.s_axis_rr.tvalid),
            self.s_axis_rr.tready.eq(request_queue.sink.ready),
            self.m_axis_rr_refused.tdata.eq(_to_host(m, reads.refused.payload, read_response_layout)),
            self.m_axis_rr_refused.tkeep.eq(-1),
            self.m_axis_rr_refused.tlast.eq(1),
            self.m_axis_rr_refused.tvalid.eq(reads.refused.valid),
            reads.refused.ready.eq(self.m_axis_rr_refused.tready),
            reads.sent.eq(segmenter.response_sent), reads.sent_row.eq(segmenter.response_sent_row),
        ]
        connect(m, request_queue.source, reads.requests)

        # The host SCTP's ACKs and RESENDs, through a queue; refusals and completions out.
        tsn_queue = m.submodules.tsn_queue = Queue(struct_layout(tsn_request_layout()))
        m.d.comb += [
            tsn_queue.sink.payload.eq(self.s_axis_tsn.tdata[:tsn_request_layout().size]),
            tsn_queue.sink.valid.eq(self.s_axis_tsn.tvalid),
            self.s_axis_tsn.tready.eq(tsn_queue.sink.ready),
        ]
        refused = self.m_axis_tsn_refused
        if self.transport is not None:
            host_refused = self._elaborate_transport(m, ring, tsn_queue.source)
            # Refusals: the ring's (a RESEND of a TSN it does not hold), then the host's requests for a row
            # whose window is the transport unit's.
            m.d.comb += [
                refused.tdata.eq(Mux(ring.refused.valid, ring.refused.payload, host_refused.payload)),
                refused.tkeep.eq(-1), refused.tlast.eq(1),
                refused.tvalid.eq(ring.refused.valid | host_refused.valid),
                ring.refused.ready.eq(refused.tready),
                host_refused.ready.eq(refused.tready & ~ring.refused.valid),
            ]
        else:
            connect(m, tsn_queue.source, ring.tsn_requests)
        for port, source in (((refused, ring.refused),) if self.transport is None else ()) + (
                (self.m_axis_completion, ring.completions),):
            m.d.comb += [port.tdata.eq(source.payload), port.tkeep.eq(-1), port.tlast.eq(1),
                         port.tvalid.eq(source.valid), source.ready.eq(port.tready)]

        # Control requests: one beat each, through a queue.
        control_queue = m.submodules.control_queue = Queue(struct_layout(control_request_layout(address_bits)), 4,
                                                           memory_output=True,
                                                           registered_fields=("opcode", "association"))
        m.d.comb += [
            control_queue.sink.payload.eq(_from_host(m, self.s_axis_ctl.tdata, control_request_layout,
                                                     address_bits)),
            control_queue.sink.valid.eq(self.s_axis_ctl.tvalid),
            self.s_axis_ctl.tready.eq(control_queue.sink.ready),
        ]

        # The segmenter's next message: a control request, else a waiting Read Response, else a local request.
        arbiter = m.submodules.arbiter = WorkArbiter(address_bits)
        connect(m, control_queue.source, arbiter.control)
        connect(m, work_queue.source, arbiter.local)
        connect(m, reads.responses, arbiter.responses)
        sack_sender = m.submodules.sack_sender = SackSender(width, address_bits=address_bits)
        m.d.comb += [
            sack_sender.records.payload.eq(self.s_axis_sack.tdata[:sack_record_layout().size]),
            sack_sender.records.valid.eq(self.s_axis_sack.tvalid),
            self.s_axis_sack.tready.eq(sack_sender.records.ready),
        ]

        connect(m, arbiter.work, segmenter.work)
        if self.transport is not None:
            with m.If(arbiter.work.valid & arbiter.work.ready):
                m.d.sync += self.messages_started.eq(self.messages_started + 1)
            m.d.comb += self.cumulative_tsn_acks.eq(ring.retired)

        # Tables and addresses.
        for block in (segmenter, headers, ring):
            # A registered copy for each block: the row's wide write enables stay local to it.
            m.d.sync += [block.association_write.payload.eq(self.association_write.payload),
                         block.association_write.valid.eq(self.association_write.valid)]
        m.d.comb += self.association_write.ready.eq(1)
        connect(m, wiring.flipped(self.stream_write), segmenter.stream_write)
        m.d.comb += [headers.local_mac.eq(self.local_mac), headers.local_ip.eq(self.local_ip),
                     headers.udp_port.eq(self.udp_port)]

        # Segments through the ring, then to headers, fetches to the payload fetcher, each through a queue.
        # Straight from LUT RAM: the ring's late `ready` reaches a read counter, not the enable of a
        # segment-wide register; the fields the ring decides on are kept in flip-flops too.
        numbered_queue = m.submodules.numbered_queue = Queue(segment_layout(address_bits), 4, memory_output=True,
                                                             registered_fields=("numbered", "association", "fetch"))
        connect(m, segmenter.segments, numbered_queue.sink)
        connect(m, numbered_queue.source, ring.segments)
        segment_queue = m.submodules.segment_queue = Queue(segment_layout(address_bits))
        fetch_queue = m.submodules.fetch_queue = Queue(fetch_layout(address_bits))
        # The SACK sender's segments beside the ring's output, first when one waits (RFC 4960 6.2: a SACK is
        # due at once; it never waits behind DATA the window holds back). Its choice is a flip-flop, the
        # valid of the sender's queue; a segment and its fetch enter their queues together. The ring's
        # readies take a replica of that flip-flop, placed beside the ring, not beside the muxes.
        sack_first = sack_sender.segments.valid
        sack_first_at_ring = sack_sender.segments_valid_replica
        both_ready = segment_queue.sink.ready & fetch_queue.sink.ready
        m.d.comb += [
            segment_queue.sink.payload.eq(Mux(sack_first, sack_sender.segments.payload, ring.sent.payload)),
            segment_queue.sink.valid.eq(Mux(sack_first, fetch_queue.sink.ready, ring.sent.valid)),
            fetch_queue.sink.payload.eq(Mux(sack_first, sack_sender.fetches.payload, ring.fetches.payload)),
            fetch_queue.sink.valid.eq(Mux(sack_first, segment_queue.sink.ready, ring.fetches.valid)),
            ring.sent.ready.eq(~sack_first_at_ring & segment_queue.sink.ready),
            ring.fetches.ready.eq(~sack_first_at_ring & fetch_queue.sink.ready),
            sack_sender.segments.ready.eq(both_ready),
            sack_sender.fetches.ready.eq(both_ready),
        ]
        sack_taken = sack_first & both_ready
        with m.If(sack_taken):
            m.d.sync += self.sacks_sent.eq(self.sacks_sent + 1)
        # Frames out of m_axis less SACKs taken in: the frames of the host's requests sent, never ahead of
        # them (a SACK counts from when it is taken, before its frame leaves).
        frame_out = self.m_axis.tvalid & self.m_axis.tready & self.m_axis.tlast
        with m.If(frame_out & ~sack_taken):
            m.d.sync += self.request_frames.eq(self.request_frames + 1)
        with m.Elif(sack_taken & ~frame_out):
            m.d.sync += self.request_frames.eq(self.request_frames - 1)
        connect(m, segment_queue.source, headers.segments)
        connect(m, fetcher.axi, wiring.flipped(self.m_axi))

        # Payloads: a fetch from memory to the fetcher, a SACK's (local) from the SACK sender; the order
        # of the two kinds kept, one bit per fetch, for the payload's turn. Both through queues, whose
        # readies are flip-flops, so the fetch queue's consumer is two flip-flops and a bit.
        fetches = m.submodules.fetcher_queue = Queue(fetch_layout(address_bits))
        order = m.submodules.payload_order = Queue(unsigned(1), 32)
        fetch = fetch_queue.source
        m.d.comb += [
            fetches.sink.payload.eq(fetch.payload),
            fetches.sink.valid.eq(fetch.valid & ~fetch.payload.local & order.sink.ready),
            fetch.ready.eq(order.sink.ready & (fetch.payload.local | fetches.sink.ready)),
            order.sink.payload.eq(fetch.payload.local),
            order.sink.valid.eq(fetch.valid & fetch.ready),
        ]
        connect(m, fetches.source, fetcher.fetches)

        # The SCTP packet: headers, then the payload through a queue.
        payload_queue = m.submodules.payload_queue = Queue(packet_layout(width))
        local = order.source.payload
        source_valid = Mux(local, sack_sender.payload.valid, fetcher.payload.valid)
        source_payload = packet_layout(width)(Mux(local, sack_sender.payload.payload, fetcher.payload.payload))
        turn = order.source.valid
        taken = turn & source_valid & payload_queue.sink.ready
        m.d.comb += [
            payload_queue.sink.payload.eq(source_payload),
            payload_queue.sink.valid.eq(turn & source_valid),
            fetcher.payload.ready.eq(turn & ~local & payload_queue.sink.ready),
            sack_sender.payload.ready.eq(turn & local & payload_queue.sink.ready),
            order.source.ready.eq(taken & source_payload.last),
        ]
        connect(m, payload_queue.source, sctp.sink)
        connect(m, headers.sctp_header, sctp.header)

        # Into the CRC and the buffer together. The buffer's room is a flip-flop loaded from its level a
        # cycle old, one place kept free for the beat that may have entered since: its `w_rdy` is a
        # compare of that level, too slow for the packet register's wide enable.
        packet = sctp.source
        buffer_room = Signal()
        m.d.sync += buffer_room.eq(buffer.level < buffer.depth - 1)
        m.d.comb += [
            crc.sink.payload.eq(packet.payload),
            crc.sink.valid.eq(packet.valid & buffer_room),
            buffer.w_data.eq(packet.payload),
            buffer.w_en.eq(packet.valid & crc.sink.ready & buffer_room),
            packet.ready.eq(crc.sink.ready & buffer_room),
        ]

        # Out of the buffer once the CRC is known, behind the prefix.
        stored = packet_layout(width)(buffer.r_data)
        m.d.comb += [
            insert.sink.payload.eq(stored),
            insert.sink.valid.eq(buffer.r_rdy),
            buffer.r_en.eq(insert.sink.ready),
        ]
        checked_queue = m.submodules.checked_queue = Queue(packet_layout(width))
        connect(m, insert.source, checked_queue.sink)
        connect(m, checked_queue.source, frame.sink)

        # A frame starts only once its packet's CRC is known (the packet is then whole in the
        # buffer), so no frame stops between its prefix and its body: each prefix waits for its
        # CRC, and both enter queues together, the prefix for the frame, the CRC for CrcInsert.
        ready_prefixes = m.submodules.ready_prefixes = Queue(headers.prefix.payload.shape())
        ready_crcs = m.submodules.ready_crcs = Queue(unsigned(32), 4)
        prefix, result = headers.prefix, crc.crc
        both = prefix.valid & result.valid
        room = ready_prefixes.sink.ready & ready_crcs.sink.ready
        m.d.comb += [
            ready_prefixes.sink.payload.eq(prefix.payload), ready_prefixes.sink.valid.eq(both & ready_crcs.sink.ready),
            ready_crcs.sink.payload.eq(result.payload), ready_crcs.sink.valid.eq(both & ready_prefixes.sink.ready),
            prefix.ready.eq(result.valid & room), result.ready.eq(prefix.valid & room),
        ]
        connect(m, ready_prefixes.source, frame.header)
        connect(m, ready_crcs.source, insert.crc)

        out_queue = m.submodules.out_queue = Queue(packet_layout(width))
        out = m.submodules.out = PacketToAxiStream(width)
        connect(m, frame.source, out_queue.sink)
        m.d.comb += [out.packets.payload.data.eq(out_queue.source.payload.data),
                     out.packets.payload.keep.eq(out_queue.source.payload.keep),
                     out.packets.payload.last.eq(out_queue.source.payload.last),
                     out.packets.valid.eq(out_queue.source.valid),
                     out_queue.source.ready.eq(out.packets.ready)]
        connect(m, out.axis, wiring.flipped(self.m_axis))
        return m

    def _elaborate_transport(self, m, ring, host_requests):
        """The transport unit (:mod:`hdl.tx.transport_unit`) beside the host's TSN requests: for a row the host
        handed to it (``s_axis_transport``) it hears of each new chunk the ring records, takes the row's peer
        SACKs (``s_axis_peer_sack``) and the timer's ticks, and its decisions go to the ring as the host's
        ACK, RESEND and LIMIT did, first when both wait; a FAILURE or VIOLATION also stops the row's new
        chunks (a LIMIT at the highest TSN sent) and goes to the host on ``m_axis_transport_stopped``. The
        host's own requests for such a row are refused. Returns the stream of those refusals."""
        associations = self.associations
        transport = m.submodules.transport = self.transport
        owned = Signal(associations)      # rows whose window is the transport unit's
        m.d.comb += transport.tick.eq(self.tick)

        # A row write: the unit's first TSN is the ring's next, and the row's new chunks wait for the
        # unit's first LIMIT. Not on a cycle the ring records a chunk of that row (it would be the first).
        writes = m.submodules.transport_writes = Queue(struct_layout(transport_write_layout()), 2)
        m.d.comb += [writes.sink.payload.eq(self.s_axis_transport.tdata[:transport_write_layout().size]),
                     writes.sink.valid.eq(self.s_axis_transport.tvalid),
                     self.s_axis_transport.tready.eq(writes.sink.ready)]
        write = writes.source.payload
        recording_row = ring.recorded & (ring.recorded_segment.association == write.association)
        reset = transport.resets.payload
        m.d.comb += [
            ring.peek_row.eq(write.association),
            *(getattr(reset, name).eq(getattr(write, name)) for name in transport_write_layout().members),
            reset.initial_tsn.eq(ring.peek_next_tsn),
            transport.resets.valid.eq(writes.source.valid & ~recording_row),
            writes.source.ready.eq(transport.resets.ready & ~recording_row),
            ring.hold.eq(writes.source.valid & writes.source.ready), ring.hold_row.eq(write.association),
        ]
        for row in range(associations):
            with m.If(self.association_write.valid & (self.association_write.payload.index == row)):
                m.d.sync += owned[row].eq(0)          # the row is the host's again
            with m.Elif(writes.source.valid & writes.source.ready & (write.association == row)):
                m.d.sync += owned[row].eq(1)

        # Each new chunk of an owned row, at the unit's tick. The ring records at most Max.Burst (15)
        # chunks of a row past what the unit knows (its LIMIT), so the queue never fills.
        sent = m.submodules.transport_sent = Queue(transport_sent_layout(), 16 * associations)
        segment = ring.recorded_segment
        m.d.comb += [
            sent.sink.valid.eq(ring.recorded & owned.bit_select(segment.association, 1)),
            sent.sink.payload.association.eq(segment.association), sent.sink.payload.tsn.eq(segment.tsn),
            sent.sink.payload.size.eq(user_data_bytes(segment)), sent.sink.payload.sent_tick.eq(transport.now),
        ]
        wiring.connect(m, sent.source, transport.sent)

        # The peer's SACKs; one for a row the host owns is dropped.
        sacks = m.submodules.peer_sacks = Queue(struct_layout(peer_sack_layout()), 4)
        m.d.comb += [sacks.sink.payload.eq(self.s_axis_peer_sack.tdata[:peer_sack_layout().size]),
                     sacks.sink.valid.eq(self.s_axis_peer_sack.tvalid),
                     self.s_axis_peer_sack.tready.eq(sacks.sink.ready)]
        sack_owned = owned.bit_select(sacks.source.payload.association, 1)
        m.d.comb += [transport.sacks.payload.eq(sacks.source.payload),
                     transport.sacks.valid.eq(sacks.source.valid & sack_owned),
                     sacks.source.ready.eq(transport.sacks.ready | ~sack_owned)]

        # The unit's records to the ring, ahead of the host's requests; a stop also to the host.
        stops = m.submodules.transport_stops = Queue(struct_layout(transport_record_layout()), 4)
        port = self.m_axis_transport_stopped
        m.d.comb += [port.tdata.eq(stops.source.payload), port.tkeep.eq(-1), port.tlast.eq(1),
                     port.tvalid.eq(stops.source.valid), stops.source.ready.eq(port.tready)]
        record = transport.records.payload
        record_owned = owned.bit_select(record.association, 1)
        stop = record.opcode >= TransportOpcode.FAILURE
        unit_request = Signal(struct_layout(tsn_request_layout()))
        with m.Switch(record.opcode):
            with m.Case(TransportOpcode.RETIRE):
                m.d.comb += unit_request.opcode.eq(TsnOpcode.ACK)
            with m.Case(TransportOpcode.RESEND):
                m.d.comb += unit_request.opcode.eq(TsnOpcode.RESEND)
            with m.Default():
                m.d.comb += unit_request.opcode.eq(TsnOpcode.LIMIT)
        m.d.comb += [unit_request.association.eq(record.association), unit_request.tsn.eq(record.tsn)]
        unit_first = transport.records.valid
        room = ~stop | stops.sink.ready
        host_owned = owned.bit_select(host_requests.payload.association, 1)
        host_refused = m.submodules.host_refused = Queue(struct_layout(tsn_request_layout()), 2)
        requests = ring.tsn_requests
        m.d.comb += [
            requests.payload.eq(Mux(unit_first, unit_request, host_requests.payload)),
            requests.valid.eq(Mux(unit_first, record_owned & room, host_requests.valid & ~host_owned)),
            transport.records.ready.eq(~record_owned | (requests.ready & room)),
            stops.sink.payload.eq(record),
            stops.sink.valid.eq(unit_first & record_owned & stop & requests.ready),
            host_refused.sink.payload.eq(host_requests.payload),
            host_refused.sink.valid.eq(~unit_first & host_requests.valid & host_owned),
            host_requests.ready.eq(~unit_first & Mux(host_owned, host_refused.sink.ready, requests.ready)),
        ]
        return host_refused.source
