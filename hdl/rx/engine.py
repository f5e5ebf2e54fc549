"""The receive offload engine: Ethernet frames in, DDP payloads in host memory, reports out.

::

    s_axis ─► FrameReceiver ─pkt─► ChunkParser ─seg─► DdpHeaderValidator ─► PlacementCheck ─► DmaWriter ─► m_axi
                   │ exc                │ exc  │ errors                          │ verdict          │ done
                   └──► PacketArbiter ◄─┘ │    └──────────────► ReportEngine ◄──┴──────────────────┘
                             │              └─► m_axis_ack            │  └─► stream error (bad BRESP) ─► PlacementCheck
                        m_axis_exc                             DeliveryOrder ─► buffer retired ─► PlacementCheck
                                                                      │ (DDP-SSN order per stream)
                                                                ReportFilter (per-message reports)
                                                                      │
                                                                m_axis_report
    s_axil ─► RegisterFile ─► local MAC/IP, UDP port, drop_when_full, segment_reports, association / region /
                              stream tables, posted buffers and their revocation; counters

Ports (industry standard, so cocotbext-axi and FPGA shells bind directly):

* ``s_axis``: AXI4-Stream, W bytes, Ethernet II frames without FCS;
* ``m_axi``: AXI4 manager, 64-bit addresses, 8W-bit data: placement
  into host memory (only bytes the placement check allowed, RFC 5041 7.1);
  the engine only writes: the read channels are present so that a full AXI4
  port binds whole, and tied off (``arvalid`` and ``rready`` 0);
* ``s_axil``: AXI4-Lite, the :func:`register_map` (tables and counters);
* ``m_axis_exc``: AXI4-Stream, W bytes, frames and chunks for the host's
  control plane, ``tuser`` = :func:`abi.rx.exception_record_layout`
  on every beat;
* ``m_axis_report``: AXI4-Stream, one beat per record of
  :func:`abi.rx.report_layout` (``tdata`` = the record's bits,
  padded to whole bytes); with the ``segment_reports`` register at 0 (its
  reset value) per message: the records of accepted middle segments are
  left out (:func:`abi.rx.report_withheld`, :mod:`hdl.rx.report_filter`),
  counted in ``reports_withheld``; at 1 one record per segment;
* ``m_axis_ack``: AXI4-Stream, one beat per record of
  :func:`abi.rx.ack_layout`, one per DATA chunk, for the host's SACKs
  (RFC 4960 6.2). A port of its own, so that small segments (a report and
  an ack each) never need two records a cycle on one stream; back-pressure
  on it stops the chunk parser, never drops a record;
* ``local_mac``, ``local_ip``, ``udp_port``: this end's addresses as the
  configuration words hold them (the transmit engine's, in :class:`hdl.rnic.Rnic`).
* ``m_axis_rr`` (only with ``read_responder``, :class:`RxEngine`): AXI4-Stream,
  one beat per accepted inbound RDMA Read Request, ``tdata`` =
  :func:`abi.tx.read_response_layout`, for the transmit engine's ``s_axis_rr``;
  taken out of the report stream after the delivery order
  (:mod:`hdl.rx.read_request_split`).

Frame-buffer overflow: with the ``drop_when_full`` register at 1, ``s_axis``
never waits; a frame that meets a full receive buffer (its consumers held
up by ``m_axi`` or the output streams) is dropped whole, nothing of it
placed or passed on, and counted in ``frames`` and ``overflow``. At 0 (the
reset value) ``s_axis`` waits instead.

Verilog port names follow the AXI convention, ``<port>_<signal>``
(``s_axis_tdata``, ``m_axi_awaddr``, ``s_axil_arvalid``,
``m_axis_report_tvalid``): convert with :func:`hdl.bus.ports.convert`.

Every stage moves one beat per cycle; see each block for its latency. Every
block boundary, and every port, goes through a :class:`hdl.stream.queue.Queue`
(registered valid and registered ready), so no combinational path joins two
blocks. That costs six cycles against the hand-wired FIFOs it replaced
(medians of ``rnic bench rx``, from a frame's last beat): at W = 8 the first
memory write 50 cycles (44 before) and the report 64 (58 before), at W = 64
48 (42) and 55 (49); still one beat per cycle with no stall at W = 8 to 64.
The report filter's stage and skid buffer add two cycles to the report (`rnic
bench rx --widths 8`: 79 cycles against 77 for 64-byte Writes, 1196 against
1194 for 9000-byte ones), still one beat per cycle with no stall. The chunk
parser's register ahead of its beat slice and the DMA writer's input skid
buffer add one cycle each, for the top's timing (`rnic bench rx --widths 8
--payloads 64 9000`: the first memory write 60 cycles against 58, the
report 81 against 79 and 1198 against 1196); the SACK unit's row writes wait
a cycle in a skid buffer. Still one beat per cycle with no stall.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.utils import exact_log2
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect

from abi.rx import (ADDRESS_BITS, FRAME_COUNTERS, RX_PARAMS, RX_TABLES, SACK_TICK_CYCLES, SEGMENT_COUNTERS, SEQUENCE_WINDOW,
                    STAG_KEY_BITS, ExceptionSource, SegmentStatus, ack_bytes, ack_layout, exception_record_layout,
                    check_address_bits, register_map, report_bytes, report_layout)
from abi.tx import peer_sack_bytes, read_response_bytes, read_response_layout
from hdl.bus.axi import Axi4LiteSignature, Axi4Signature
from hdl.bus.axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream, axis_payload_layout
from hdl.bus.register_file import RegisterFile
from hdl.layout import as_layout, connect_fields, struct_layout
from hdl.rx.chunk_parser import ChunkParser
from hdl.rx.sack_reader import SackReader
from hdl.rx.ddp_header import DdpHeaderValidator
from hdl.rx.delivery_order import DeliveryOrder
from hdl.rx.dma_writer import DmaWriter
from hdl.rx.frame_receiver import FrameReceiver
from hdl.rx.placement_check import PlacementCheck
from hdl.rx.read_request_split import ReadRequestSplit
from hdl.rx.report_engine import ReportEngine
from hdl.rx.report_filter import ReportFilter
from hdl.rx.sack_unit import SackUnit, sack_chunk_layout, sack_record_bytes
from hdl.stream.arbiter import PacketArbiter
from hdl.stream.packet import packet_layout
from hdl.stream.queue import Queue

__all__ = ["RxEngine"]


class RxEngine(wiring.Component):
    """The receive engine for a ``width_bytes`` datapath (8, 16, 32 or 64).

    ``associations`` and ``stream_ids`` are powers of two; DDP streams are
    numbered ``association * stream_ids + stream_id`` in the stream table and
    for posted buffers. An STag is ``row << key_bits | key`` (``regions``
    rows; ``key_bits`` from :data:`abi.rx.STAG_KEY_BITS`, range
    :func:`abi.rx.check_key_bits`; RFC 5041 8.2). ``buffer_bytes`` is the store-and-forward buffer: at
    32 KiB it holds a jumbo frame being read out and the next one coming in,
    so 9000-byte payloads flow back to back (16 KiB stalled the input 16% of
    the time at W = 8). ``address_bits`` and ``block_ram_queues``: as :class:`hdl.rnic.Rnic`'s.

    ``read_responder`` (off by default; off, the engine is exactly the one without it): inbound RDMA
    Read Requests (untagged, QN 1, opcode 1, RFC 5040 4.4) are checked and answered in the engine,
    never placed nor reported. The header validator decodes the request whole; it must be one
    28-byte message (L = 1, MO = 0, else RDMAP 0x2/0xFF); the placement check looks its Data Source
    (SrcSTag, SrcTO, RDMA Read Message Size) up in the region table as tagged Writes are looked up,
    with REMOTE_READ, the stream's PD and binding, bounds and no 64-bit wrap (RFC 5040 5.2, 7.2;
    RFC 5041 7.1, 8.2). A refused request is a SEGMENT record with status ERROR and the RDMAP Remote
    Protection Error (0x1/0x00 invalid STag, 0x1/0x03 PD or stream, 0x1/0x02 access, 0x1/0x01
    bounds, 0x1/0x04 wrap), ``stag``/``to`` its SinkSTag/SinkTO, and latches the stream's error: the
    host sends the Terminate. An accepted one leaves, in DDP-SSN order with its stream's records
    (RFC 5040 5.5), on ``m_axis_rr``: one AXI4-Stream beat of :func:`abi.tx.read_response_layout`
    (the transmit engine's ``s_axis_rr`` record; :class:`hdl.rnic.Rnic` connects the two), its
    ``host_address`` the translated Data Source. The QN 1 MSN is not checked (no buffers; the
    transmit engine's IRD bounds the requests). The host must not post QN 1 buffers with the option
    on: none is used, and a posted one would only sit there.
    """

    def __init__(self, width_bytes: int, *, associations: int = 2, stream_ids: int = 4, regions: int = 16,
                 key_bits: int = STAG_KEY_BITS, buffers_per_queue: int = 8, buffer_bytes: int = 32768,
                 tick_cycles: int = SACK_TICK_CYCLES, peer_sacks: bool = False, external_tick: bool = False,
                 address_bits: int = ADDRESS_BITS, block_ram_queues: bool = True, read_responder: bool = False):
        check_address_bits(address_bits)
        self.read_responder = read_responder
        self.block_ram_queues = block_ram_queues
        self.width_bytes, self.tick_cycles, self.peer_sacks = width_bytes, tick_cycles, peer_sacks
        self.address_bits = address_bits
        self.external_tick = external_tick
        self.associations, self.stream_ids, self.regions = associations, stream_ids, regions
        self.key_bits = key_bits
        self._buffers_per_queue, self._buffer_bytes = buffers_per_queue, buffer_bytes
        self.map = register_map(associations, stream_ids, regions, key_bits)
        super().__init__({
            "s_axis": In(AxiStreamSignature(width_bytes)),
            "m_axi": Out(Axi4Signature(addr_width=address_bits, data_width=8 * width_bytes, id_width=4)),
            "s_axil": In(Axi4LiteSignature(addr_width=12, data_width=32)),
            "m_axis_exc": Out(AxiStreamSignature(width_bytes, exception_record_layout().size)),
            "m_axis_report": Out(AxiStreamSignature(report_bytes())),
            "m_axis_ack": Out(AxiStreamSignature(ack_bytes())),
            "local_mac": Out(48),
            "local_ip": Out(32),
            "udp_port": Out(16),
            "m_axis_sack": Out(AxiStreamSignature(sack_record_bytes())),
            "tick": Out(1),          # the timer's tick: one cycle every `tick_cycles`
            # With `external_tick` (a simulation's clock, which advances the timer with its own time), the
            # tick is `tick_in`'s, and `tick_busy` says the last one is not yet taken.
            **({"tick_in": In(1), "tick_busy": Out(1)} if external_tick else {}),
            # With `peer_sacks`, for the transmit engine's transport unit (hdl/rx/sack_reader.py).
            **({"m_axis_peer_sack": Out(AxiStreamSignature(peer_sack_bytes()))} if peer_sacks else {}),
            # With `read_responder`, the accepted Read Requests for the transmit engine's s_axis_rr.
            **({"m_axis_rr": Out(AxiStreamSignature(read_response_bytes()))} if read_responder else {}),
        })

    def elaborate(self, platform):
        m = Module()
        width = self.width_bytes
        m.submodules.registers = registers = RegisterFile(self.map, params_words=2)
        m.submodules.frames = frames = FrameReceiver(width, associations=self.associations,
                                                     buffer_bytes=self._buffer_bytes)
        m.submodules.chunks = chunks = ChunkParser(width)
        block_ram = self.block_ram_queues
        reads = self.read_responder
        m.submodules.headers = headers = DdpHeaderValidator(width, block_ram=block_ram,
                                                            **({"read_requests": True} if reads else {}))
        m.submodules.placement = placement = PlacementCheck(
            width, regions=self.regions, associations=self.associations, stream_ids=self.stream_ids,
            depth=self._buffers_per_queue, address_bits=self.address_bits, window=SEQUENCE_WINDOW,
            key_bits=self.key_bits, block_ram=block_ram, **({"read_requests": True} if reads else {}))
        m.submodules.dma = dma = DmaWriter(width, self.address_bits)
        m.submodules.exceptions = exceptions = PacketArbiter(width, struct_layout(exception_record_layout()), inputs=2)
        m.submodules.reports = reports = ReportEngine(self.address_bits, block_ram=block_ram)
        m.submodules.delivery = delivery = DeliveryOrder(associations=self.associations, stream_ids=self.stream_ids,
                                                         window=SEQUENCE_WINDOW, address_bits=self.address_bits,
                                                         block_ram=block_ram)

        # Network in: AXI4-Stream, then a queue, so tready comes from a flip-flop.
        m.submodules.net_in = net_in = AxiStreamToPacket(width)
        m.submodules.net_queue = net_queue = Queue(packet_layout(width))
        connect(m, wiring.flipped(self.s_axis), net_in.axis)
        connect(m, net_in.packets, net_queue.sink)
        connect(m, net_queue.source, frames.net)

        # Configuration and tables; this end's addresses also go out (the transmit engine's).
        m.d.comb += [
            self.local_mac.eq(registers.config_local_mac_low | (registers.config_local_mac_high << 32)),
            self.local_ip.eq(registers.config_local_ip),
            self.udp_port.eq(registers.config_udp_port),
            frames.local_mac.eq(self.local_mac),
            frames.local_ip.eq(self.local_ip),
            frames.udp_port.eq(self.udp_port),
            frames.drop_when_full.eq(registers.config_drop_when_full),
            registers.params.eq(RX_PARAMS.pack({
                "width_bytes": width, "associations": self.associations,
                "stream_ids_log2": exact_log2(self.stream_ids), "buffers_log2": exact_log2(self._buffers_per_queue),
                "key_bits": self.key_bits}) | RX_TABLES.pack({"regions": self.regions}) << 32),
        ]
        connect(m, wiring.flipped(self.s_axil), registers.axil)
        connect(m, registers.table_association, frames.assoc_write)
        # Rows and posts carry the host's 64-bit addresses; the tables keep `address_bits` of them.
        connect_fields(m, registers.table_region, placement.region_write)
        # Stream rows pass the delivery order first: a rewritten row restarts its DDP-SSN order there.
        connect(m, registers.table_stream, delivery.stream_write_in)
        connect(m, delivery.stream_write_out, placement.stream_write)
        if reads:
            # A Read Request consumed no buffer: its delivery retires none (QN 1 takes no posts).
            retire = delivery.retire
            m.d.comb += [placement.retire.payload.eq(retire.payload),
                         placement.retire.valid.eq(retire.valid & (retire.payload.qn != 1)),
                         retire.ready.eq(placement.retire.ready)]
        else:
            connect(m, delivery.retire, placement.retire)
        connect_fields(m, registers.table_buffer, placement.post)
        connect(m, registers.table_revoke, placement.revoke)

        # The receive pipeline.
        connect(m, frames.pkt, chunks.pkt)
        connect(m, frames.pkt_meta, chunks.pkt_meta)
        connect(m, chunks.seg, headers.seg)
        connect(m, chunks.seg_meta, headers.seg_meta)
        connect(m, headers.segment, placement.segment)
        connect(m, headers.payload, placement.payload_in)
        connect(m, placement.cmd, dma.cmd)
        connect(m, placement.payload_out, dma.payload)
        # The DMA writer's write channels onto m_axi; the read channels are tied off.
        for name, member in dma.axi.signature.members.items():
            if member.flow == Out:
                m.d.comb += getattr(self.m_axi, name).eq(getattr(dma.axi, name))
            else:
                m.d.comb += getattr(dma.axi, name).eq(getattr(self.m_axi, name))
        for name in ("arid", "araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot", "arvalid",
                     "rready"):
            m.d.comb += getattr(self.m_axi, name).eq(0)

        # The peer's SACK chunks of the rows whose transport is the transmit engine's leave for it; the
        # other chunks, and whole frames, make one stream of exceptions for the host.
        peer_sack_rows = Signal(self.associations)
        host_chunks, host_meta, malformed = chunks.exc, chunks.exc_meta, Const(0, 32)
        if self.peer_sacks:
            m.submodules.peer_sacks = reader = SackReader(width, self.associations)
            connect(m, chunks.exc, reader.chunks)
            connect(m, chunks.exc_meta, reader.meta)
            m.d.comb += [
                reader.rows.eq(peer_sack_rows),
                self.m_axis_peer_sack.tdata.eq(reader.sacks.payload.as_value()), self.m_axis_peer_sack.tkeep.eq(-1),
                self.m_axis_peer_sack.tlast.eq(1), self.m_axis_peer_sack.tvalid.eq(reader.sacks.valid),
                reader.sacks.ready.eq(self.m_axis_peer_sack.tready),
            ]
            host_chunks, host_meta, malformed = reader.host_chunks, reader.host_meta, reader.malformed
        frame_meta = Signal(struct_layout(exception_record_layout()))
        chunk_meta = Signal(struct_layout(exception_record_layout()))
        m.d.comb += [
            frame_meta.source.eq(ExceptionSource.FRAME),
            frame_meta.reason.eq(frames.exc_meta.payload.reason),
            frame_meta.length.eq(frames.exc_meta.payload.length),
            chunk_meta.source.eq(ExceptionSource.CHUNK),
            chunk_meta.reason.eq(host_meta.payload.reason),
            chunk_meta.association.eq(host_meta.payload.association),
            chunk_meta.length.eq(host_meta.payload.length),
        ]
        for index, (packets, meta, record) in enumerate(
                ((frames.exc, frames.exc_meta, frame_meta), (host_chunks, host_meta, chunk_meta))):
            connect(m, packets, getattr(exceptions, f"packets_{index}"))
            port = getattr(exceptions, f"meta_{index}")
            m.d.comb += [port.payload.eq(record), port.valid.eq(meta.valid), meta.ready.eq(port.ready)]
        out = exceptions.packets_out
        user_bits = exception_record_layout().size
        m.submodules.exc_queue = exc_queue = Queue(axis_payload_layout(width, user_bits))
        m.submodules.exc_out = exc_out = PacketToAxiStream(width, user_bits)
        m.d.comb += [
            exc_queue.sink.payload.data.eq(out.payload.data),
            exc_queue.sink.payload.keep.eq(out.payload.keep),
            exc_queue.sink.payload.last.eq(out.payload.last),
            exc_queue.sink.payload.user.eq(exceptions.meta_out),
            exc_queue.sink.valid.eq(out.valid),
            out.ready.eq(exc_queue.sink.ready),
        ]
        connect(m, exc_queue.source, exc_out.packets)
        connect(m, exc_out.axis, wiring.flipped(self.m_axis_exc))

        # Reports.
        connect(m, placement.verdict, reports.verdict)
        connect(m, dma.done, reports.done)
        connect(m, chunks.errors, reports.chunk_errors)
        # A bad write response latches the stream's error bit (row = association * stream_ids + stream id).
        fault = reports.stream_fault.payload
        association_bits = (self.associations - 1).bit_length()
        stream_id_bits = (self.stream_ids - 1).bit_length()
        m.d.comb += [
            placement.fault.valid.eq(reports.stream_fault.valid),
            placement.fault.payload.eq(Cat(fault.stream_id[:stream_id_bits], fault.association[:association_bits])),
            reports.stream_fault.ready.eq(placement.fault.ready),
        ]

        # The acknowledgement unit (RFC 4960 6.2): the ack records of the associations it SACKs (its rows
        # written enabled), through a queue; the others' go to the host on m_axis_ack. Its timer ticks
        # every `tick_cycles` cycles.
        m.submodules.sack = sack = SackUnit(self.associations)
        # The row writes through a skid buffer: its ready (a flip-flop) is the register file's, so the
        # unit's IDLE priorities, which decide when it takes a row, stay within the unit.
        sack_rows = m.submodules.sack_rows = Queue(registers.table_sack.payload.shape())
        connect(m, registers.table_sack, sack_rows.sink)
        connect(m, sack_rows.source, sack.resets)
        m.d.comb += [
            self.m_axis_sack.tdata.eq(sack.sacks.payload.as_value()), self.m_axis_sack.tkeep.eq(-1),
            self.m_axis_sack.tlast.eq(1), self.m_axis_sack.tvalid.eq(sack.sacks.valid),
            sack.sacks.ready.eq(self.m_axis_sack.tready),
        ]
        engine_sacks = Signal(self.associations)
        row = registers.table_sack.payload
        with m.If(registers.table_sack.valid & registers.table_sack.ready & (row.association < self.associations)
                  & ~row.flush):
            m.d.sync += [engine_sacks.bit_select(row.association[:max(1, association_bits)], 1).eq(row.enabled),
                         peer_sack_rows.bit_select(row.association[:max(1, association_bits)], 1).eq(row.peer_sacks)]
        if self.external_tick:
            m.d.sync += sack.tick.eq(self.tick_in)
            m.d.comb += self.tick_busy.eq(self.tick_in | sack.tick | sack.tick_pending)
        else:
            ticks = Signal(range(self.tick_cycles))
            m.d.sync += [ticks.eq(Mux(ticks == self.tick_cycles - 1, 0, ticks + 1)),
                         sack.tick.eq(ticks == self.tick_cycles - 1)]
        m.d.comb += self.tick.eq(sack.tick)
        sack_queue = m.submodules.sack_in = Queue(sack_chunk_layout(), 8)
        connect(m, sack_queue.source, sack.chunks)
        ack = chunks.acks.payload
        to_unit = engine_sacks.bit_select(ack.association[:max(1, association_bits)], 1)
        host_acks = stream.Signature(struct_layout(ack_layout())).create()
        m.d.comb += [
            sack_queue.sink.payload.association.eq(ack.association),
            sack_queue.sink.payload.tsn.eq(ack.tsn),
            sack_queue.sink.payload.packet_end.eq(ack.packet_end),
            sack_queue.sink.payload.immediate.eq(ack.immediate),
            sack_queue.sink.valid.eq(chunks.acks.valid & to_unit),
            host_acks.payload.eq(ack),
            host_acks.valid.eq(chunks.acks.valid & ~to_unit),
            chunks.acks.ready.eq(Mux(to_unit, sack_queue.sink.ready, host_acks.ready)),
        ]

        # Records out, one beat per record, straight from the output registers of the queues they
        # leave (the report filter's skid buffer, the chunk parser's ack queue): a second register
        # stage would only add a 436-bit enable for the port's ready to drive. The filter leaves out
        # the records of accepted middle segments unless `segment_reports` is set (per-message reports).
        connect(m, reports.report, delivery.records_in)
        m.submodules.report_filter = report_filter = ReportFilter(self.address_bits)
        if reads:
            # Accepted Read Requests leave for the transmit engine, in DDP-SSN order (RFC 5040 5.5).
            m.submodules.read_requests = split = ReadRequestSplit(self.address_bits)
            connect(m, delivery.records_out, split.records_in)
            connect(m, split.records_out, report_filter.records_in)
            m.submodules.rr_out = rr_out = PacketToAxiStream(read_response_bytes())
            request = as_layout(m, split.requests.payload, struct_layout(read_response_layout(ADDRESS_BITS)))
            m.d.comb += [
                rr_out.packets.payload.data.eq(request.as_value()),
                rr_out.packets.payload.keep.eq(-1),
                rr_out.packets.payload.last.eq(1),
                rr_out.packets.valid.eq(split.requests.valid),
                split.requests.ready.eq(rr_out.packets.ready),
            ]
            connect(m, rr_out.axis, wiring.flipped(self.m_axis_rr))
        else:
            connect(m, delivery.records_out, report_filter.records_in)
        m.d.comb += report_filter.segment_reports.eq(registers.config_segment_reports)
        for name, records, size in (("report", report_filter.records_out, report_bytes()),
                                    ("ack", host_acks, ack_bytes())):
            axis = m.submodules[f"{name}_out"] = PacketToAxiStream(size)
            record = records.payload
            if name == "report":   # the host's record: its addresses of ADDRESS_BITS
                record = as_layout(m, record, struct_layout(report_layout(ADDRESS_BITS)))
            m.d.comb += [
                axis.packets.payload.data.eq(record.as_value()),
                axis.packets.payload.keep.eq(-1),
                axis.packets.payload.last.eq(1),
                axis.packets.valid.eq(records.valid),
                records.ready.eq(axis.packets.ready),
            ]
            connect(m, axis.axis, wiring.flipped(getattr(self, f"m_axis_{name}")))

        # Counters.
        for name in FRAME_COUNTERS:
            m.d.comb += getattr(registers, f"counter_{name}").eq(getattr(frames, name))
        counted = {name: Signal(32, name=name) for name in SEGMENT_COUNTERS if not name.startswith("reports_")}
        counted["peer_sacks_malformed"] = malformed
        m.d.comb += [registers.counter_reports_waiting.eq(delivery.waiting),
                     registers.counter_reports_discarded.eq(delivery.discarded),
                     registers.counter_reports_withheld.eq(report_filter.withheld)]
        verdict = placement.verdict
        with m.If(verdict.valid & verdict.ready):
            for status in SegmentStatus:
                name = f"segments_{status.name.lower()}"
                with m.If(verdict.payload.status == status):
                    m.d.sync += counted[name].eq(counted[name] + 1)
        with m.If(chunks.errors.valid & chunks.errors.ready):
            m.d.sync += counted["chunk_errors"].eq(counted["chunk_errors"] + 1)
        with m.If(dma.done.valid & dma.done.ready & dma.done.payload.error):
            m.d.sync += counted["dma_errors"].eq(counted["dma_errors"] + 1)
        with m.If(host_acks.valid & host_acks.ready):   # the host's: those of `m_axis_ack`, as the model's
            m.d.sync += counted["acks"].eq(counted["acks"] + 1)
        for name, signal in counted.items():
            m.d.comb += getattr(registers, f"counter_{name}").eq(signal)
        return m
