"""The receive offload engine: Ethernet frames in, DDP payloads in host memory, reports out.

::

    s_axis ─► FrameReceiver ─pkt─► ChunkParser ─seg─► DdpHeaderValidator ─► PlacementCheck ─► DmaWriter ─► m_axi
                   │ exc                │ exc  │ errors                          │ verdict          │ done
                   └──► PacketArbiter ◄─┘      └──────────────► ReportEngine ◄──┴──────────────────┘
                             │                                        │
                        m_axis_exc                              m_axis_report
    s_axil ─► RegisterFile ─► local MAC/IP, UDP port, association / region / stream tables, posted buffers; counters

Ports (industry standard, so cocotbext-axi and FPGA shells bind directly):

* ``s_axis``: AXI4-Stream, W bytes, Ethernet II frames without FCS;
* ``m_axi``: AXI4 write manager, 64-bit addresses, 8W-bit data: placement
  into host memory (only bytes the placement check allowed, RFC 5041 7.1);
* ``s_axil``: AXI4-Lite, the :func:`register_map` (tables and counters);
* ``m_axis_exc``: AXI4-Stream, W bytes, frames and chunks for the host's
  control plane, ``tuser`` = :func:`hdl.abi.exception_record_layout`
  on every beat;
* ``m_axis_report``: AXI4-Stream, one beat per record of
  :func:`hdl.abi.report_layout` (``tdata`` = the record's bits,
  padded to whole bytes).

Every stage moves one beat per cycle; see each block for its latency.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from hdl.abi import (
    ADDRESS_BITS,
    FRAME_COUNTERS,
    SEGMENT_COUNTERS,
    ExceptionSource,
    SegmentStatus,
    exception_record_layout,
    register_map,
    report_bytes,
)
from hdl.bus.axi import Axi4LiteSignature, Axi4WriteSignature
from hdl.bus.axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from hdl.bus.register_file import RegisterFile
from hdl.rx.chunk_parser import ChunkParser
from hdl.rx.ddp_header import DdpHeaderValidator
from hdl.rx.dma_writer import DmaWriter
from hdl.rx.frame_receiver import FrameReceiver
from hdl.rx.placement_check import PlacementCheck
from hdl.rx.report_engine import ReportEngine
from hdl.stream.arbiter import PacketArbiter
from hdl.stream.queue import Queue

__all__ = ["RxEngine"]


class RxEngine(wiring.Component):
    """The receive engine for a ``width_bytes`` datapath (8, 16, 32 or 64).

    ``associations`` and ``stream_ids`` are powers of two; DDP streams are
    numbered ``association * stream_ids + stream_id`` in the stream table and
    for posted buffers. ``buffer_bytes`` is the store-and-forward buffer: at
    32 KiB it holds a jumbo frame being read out and the next one coming in,
    so 9000-byte payloads flow back to back (16 KiB stalled the input 16% of
    the time at W = 8).
    """

    def __init__(self, width_bytes: int, *, associations: int = 2, stream_ids: int = 4, regions: int = 16,
                 buffers_per_queue: int = 8, buffer_bytes: int = 32768):
        self.width_bytes = width_bytes
        self.associations, self.stream_ids, self.regions = associations, stream_ids, regions
        self._buffers_per_queue, self._buffer_bytes = buffers_per_queue, buffer_bytes
        self.map = register_map(associations, stream_ids, regions)
        super().__init__({
            "s_axis": In(AxiStreamSignature(width_bytes)),
            "m_axi": Out(Axi4WriteSignature(addr_width=ADDRESS_BITS, data_width=8 * width_bytes, id_width=4)),
            "s_axil": In(Axi4LiteSignature(addr_width=12, data_width=32)),
            "m_axis_exc": Out(AxiStreamSignature(width_bytes, exception_record_layout().size)),
            "m_axis_report": Out(AxiStreamSignature(report_bytes())),
        })

    def elaborate(self, platform):
        m = Module()
        width = self.width_bytes
        m.submodules.registers = registers = RegisterFile(self.map)
        m.submodules.frames = frames = FrameReceiver(width, associations=self.associations,
                                                     buffer_bytes=self._buffer_bytes)
        m.submodules.chunks = chunks = ChunkParser(width)
        m.submodules.headers = headers = DdpHeaderValidator(width)
        m.submodules.placement = placement = PlacementCheck(
            width, regions=self.regions, associations=self.associations, stream_ids=self.stream_ids,
            depth=self._buffers_per_queue, address_bits=ADDRESS_BITS)
        m.submodules.dma = dma = DmaWriter(width, ADDRESS_BITS)
        m.submodules.exceptions = exceptions = PacketArbiter(width, exception_record_layout(), inputs=2)
        m.submodules.reports = reports = ReportEngine(ADDRESS_BITS)

        def join(source, sink, name):
            queue = m.submodules[f"{name}_queue"] = Queue(source.payload.shape())
            connect(m, source, queue.sink)
            connect(m, queue.source, sink)

        # Network in.
        m.submodules.net_in = net_in = AxiStreamToPacket(width)
        connect(m, wiring.flipped(self.s_axis), net_in.axis)
        join(net_in.packets, frames.net, "net")

        # Configuration and tables.
        m.d.comb += [
            frames.local_mac.eq(registers.config_local_mac_low | (registers.config_local_mac_high << 32)),
            frames.local_ip.eq(registers.config_local_ip),
            frames.udp_port.eq(registers.config_udp_port),
            registers.params.eq(width | (self.associations << 8) | (self.regions << 16)
                                | ((self.associations * self.stream_ids) << 24)),
        ]
        connect(m, wiring.flipped(self.s_axil), registers.axil)
        connect(m, registers.table_association, frames.assoc_write)
        connect(m, registers.table_region, placement.region_write)
        connect(m, registers.table_stream, placement.stream_write)
        connect(m, registers.table_buffer, placement.post)

        # The receive pipeline: a Queue (registered valid and ready) at every boundary.
        join(frames.pkt, chunks.pkt, "pkt")
        join(frames.pkt_meta, chunks.pkt_meta, "pkt_meta")
        join(chunks.seg, headers.seg, "seg")
        join(chunks.seg_meta, headers.seg_meta, "seg_meta")
        join(headers.segment, placement.segment, "segment")
        join(headers.payload, placement.payload_in, "payload")
        join(placement.cmd, dma.cmd, "cmd")
        join(placement.payload_out, dma.payload, "placed")
        connect(m, dma.axi, wiring.flipped(self.m_axi))

        # Exceptions: whole frames and single chunks, one stream for the host.
        frame_meta = Signal(exception_record_layout())
        chunk_meta = Signal(exception_record_layout())
        m.d.comb += [
            frame_meta.source.eq(ExceptionSource.FRAME),
            frame_meta.reason.eq(frames.exc_meta.payload.reason),
            frame_meta.length.eq(frames.exc_meta.payload.length),
            chunk_meta.source.eq(ExceptionSource.CHUNK),
            chunk_meta.reason.eq(chunks.exc_meta.payload.reason),
            chunk_meta.association.eq(chunks.exc_meta.payload.association),
            chunk_meta.length.eq(chunks.exc_meta.payload.length),
        ]
        for index, (packets, meta, record) in enumerate(
                ((frames.exc, frames.exc_meta, frame_meta), (chunks.exc, chunks.exc_meta, chunk_meta))):
            join(packets, getattr(exceptions, f"packets_{index}"), f"exc_{index}")
            port = getattr(exceptions, f"meta_{index}")
            queue = m.submodules[f"exc_meta_{index}_queue"] = Queue(port.payload.shape())
            m.d.comb += [queue.sink.payload.eq(record), queue.sink.valid.eq(meta.valid), meta.ready.eq(queue.sink.ready)]
            connect(m, queue.source, port)
        m.submodules.exc_out = exc_out = PacketToAxiStream(width, exception_record_layout().size)
        connect(m, exceptions.packets_out, exc_out.packets)
        m.d.comb += exc_out.user.eq(exceptions.meta_out)
        connect(m, exc_out.axis, wiring.flipped(self.m_axis_exc))

        # Reports.
        join(placement.verdict, reports.verdict, "verdict")
        join(dma.done, reports.done, "done")
        join(chunks.errors, reports.chunk_errors, "chunk_errors")
        m.d.comb += [
            self.m_axis_report.tdata.eq(reports.report.payload.as_value()),
            self.m_axis_report.tkeep.eq(-1),
            self.m_axis_report.tlast.eq(1),
            self.m_axis_report.tvalid.eq(reports.report.valid),
            reports.report.ready.eq(self.m_axis_report.tready),
        ]

        # Counters.
        for name in FRAME_COUNTERS:
            m.d.comb += getattr(registers, f"counter_{name}").eq(getattr(frames, name))
        counted = {name: Signal(32, name=name) for name in SEGMENT_COUNTERS}
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
        for name, signal in counted.items():
            m.d.comb += getattr(registers, f"counter_{name}").eq(signal)
        return m
