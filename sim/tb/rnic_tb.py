"""A reusable cocotb testbench for the RNIC top level (:class:`hdl.rnic.Rnic`): both engines' bus models.

:class:`RnicTB` is :class:`~sim.tb.rx_engine_tb.RxEngineTB` (the receive
engine's ports, tables and records, its AXI RAM on AW/W/B) plus the transmit
side: cocotbext-axi's ``AxiRamRead`` on AR/R over the same memory,
``AxiStreamSource`` on ``s_axis_wr``, ``s_axis_rr``, ``s_axis_ctl`` and
``s_axis_tsn``, ``AxiStreamSink`` on ``m_axis`` (frames),
``m_axis_completion``, ``m_axis_tsn_refused`` and ``m_axis_rr_refused``; the
transmit engine's rows are written at ``TX_REGISTER_BASE`` over the same
``AxiLiteMaster``. Records go in and come out as the dicts of their
``abi`` layouts. A top built with the transport unit also has a source on
``s_axis_peer_sack`` and a sink on ``m_axis_transport_stopped``; one built with
``external_tick`` has its timer ticked by :meth:`RnicTB.tick_to`.
"""

from __future__ import annotations

import ipaddress

from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiReadBus, AxiRamRead, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from abi.rx import register_map
from abi.tx import (TX_REGISTER_BASE, completion_layout, control_request_layout, peer_sack_layout, read_response_layout,
                    transport_record_layout, tsn_request_layout, tx_register_map, work_request_layout)
from driver.records import record_bytes
from hdl.rnic import Rnic
from sim.tb.rx_engine_tb import RxEngineTB, _fields, pause_pattern
from sim.traffic.rx import EngineShape

__all__ = ["RnicTB", "record_bytes", "rnic_top", "rnic_driver_top", "RNIC_IRD", "RX_TOP_VALIDS"]

RNIC_IRD = EngineShape().buffers_per_queue
"""The transmit engine's IRD in the simulated top: a host keeps IRD + 1 Read Request buffers posted per
stream, so the receive engine's buffers bound the IRD a host offers below this."""
RX_TOP_VALIDS = ("s_axis_tvalid", "m_axis_report_tvalid", "m_axis_ack_tvalid", "m_axis_exc_tvalid",
                 "m_axi_awvalid", "m_axi_wvalid", "m_axi_bvalid")
"""The top level's valids of the receive side (the receive engine's ports, the AXI write channels)."""


def rnic_top(width_bytes: int, shape: EngineShape = EngineShape(), **options) -> Rnic:
    """The RNIC top as its cocotb testbenches build it (one Verilator build per width); `options`: `Rnic`'s
    (`transport`, `external_tick`)."""
    return Rnic(width_bytes, associations=shape.associations, stream_ids=shape.stream_ids, regions=shape.regions,
                buffers_per_queue=shape.buffers_per_queue, ird=RNIC_IRD, **options)


def rnic_driver_top(width_bytes: int, shape: EngineShape = EngineShape()) -> Rnic:
    """The RNIC top of the driver's `sim` backend: with the transport unit, its timer ticked by the fabric's
    clock (`Rnic`'s `external_tick`), so the gateware's delayed SACKs and T3-rtx follow simulated time."""
    return rnic_top(width_bytes, shape, transport=True, external_tick=True)


def _has(dut, name: str) -> bool:
    try:
        getattr(dut, name)
    except AttributeError:
        return False
    return True


class RnicTB(RxEngineTB):
    """Owns the clock, reset and bus models of a running ``Rnic`` DUT."""

    def __init__(self, dut, width_bytes: int, shape: EngineShape = EngineShape(), **options) -> None:
        super().__init__(dut, width_bytes, register_map(shape.associations, shape.stream_ids, shape.regions), shape,
                         **options)
        self.transport = _has(dut, "s_axis_peer_sack_tvalid")
        self.external_tick = _has(dut, "tick_busy")
        self.tx_map = tx_register_map(shape.associations, shape.stream_ids, self.transport)
        self.ticks = 0
        """Ticks of the timer so far (a top with `external_tick`)."""
        if self.external_tick:
            dut.tick.value = 0
        # `drain` waits for the receive side alone: a transmit row held by its LIMIT keeps a valid up.
        self._valids = {name: valid for name, valid in self._valids.items()
                        if name.startswith("rx.") or name in RX_TOP_VALIDS}
        if not any(name.startswith("rx.") for name in self._valids):
            raise RuntimeError("the receive engine's streams are not visible under `rx.`")
        self.ram_read = AxiRamRead(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, mem=self.ram.mem)
        self.ram_read.log.setLevel("WARNING")
        sources = {}
        for name in ("s_axis_wr", "s_axis_rr", "s_axis_ctl", "s_axis_tsn"):
            sources[name] = AxiStreamSource(AxiStreamBus.from_prefix(dut, name), dut.clk, dut.rst)
            sources[name].log.setLevel("WARNING")
        self.wr_source, self.rr_source = sources["s_axis_wr"], sources["s_axis_rr"]
        self.ctl_source, self.tsn_source = sources["s_axis_ctl"], sources["s_axis_tsn"]
        sinks = {}
        for name in ("m_axis", "m_axis_completion", "m_axis_tsn_refused", "m_axis_rr_refused"):
            sinks[name] = AxiStreamSink(AxiStreamBus.from_prefix(dut, name), dut.clk, dut.rst)
            sinks[name].log.setLevel("WARNING")
        self.frame_sink, self.completion_sink = sinks["m_axis"], sinks["m_axis_completion"]
        self.tsn_refused_sink, self.rr_refused_sink = sinks["m_axis_tsn_refused"], sinks["m_axis_rr_refused"]
        if self.transport:
            self.peer_sack_source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_peer_sack"), dut.clk,
                                                    dut.rst)
            self.transport_stopped_sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_transport_stopped"),
                                                        dut.clk, dut.rst)
            for port in (self.peer_sack_source, self.transport_stopped_sink):
                port.log.setLevel("WARNING")

    # -- the timer -------------------------------------------------------------

    async def tick_to(self, ticks: int) -> None:
        """Tick the timer (a top with `external_tick`) until it has ticked `ticks` times, one tick at a time,
        each taken by the acknowledgement and transport units before the next (`tick_busy`)."""
        dut = self.dut
        while self.ticks < ticks:
            dut.tick.value = 1
            await RisingEdge(dut.clk)
            dut.tick.value = 0
            await RisingEdge(dut.clk)
            while dut.tick_busy.value:
                await RisingEdge(dut.clk)
            self.ticks += 1

    # -- back-pressure ---------------------------------------------------------

    def set_read_stall(self, busy: float) -> None:
        """Random stalls on AR (ARREADY low) and R (RVALID held back): memory read latency and gaps."""
        for channel in (self.ram_read.ar_channel, self.ram_read.r_channel):
            channel.set_pause_generator(pause_pattern(self.rng, busy) if busy else None)

    def set_network_stall(self, busy: float) -> None:
        """Random stalls on ``m_axis`` (TREADY low)."""
        self.frame_sink.set_pause_generator(pause_pattern(self.rng, busy) if busy else None)

    # -- tables ----------------------------------------------------------------

    async def set_addresses(self, mac: bytes, ip: str, udp_port: int = 9899) -> None:
        """This end's MAC, IPv4 address and UDP port (the receive engine's words, both engines use them)."""
        value = int.from_bytes(mac, "big")
        for name, word in (("local_mac_low", value & 0xFFFFFFFF), ("local_mac_high", value >> 32),
                           ("local_ip", int(ipaddress.IPv4Address(ip))), ("udp_port", udp_port)):
            await self.axil.write_dword(self.map.config_offset(name), word)

    async def write_tx_table(self, table: str, fields: dict) -> None:
        window = self.tx_map.tables[table]
        base = TX_REGISTER_BASE + window.base
        for i, word in enumerate(window.encode(fields)):
            await self.axil.write_dword(base + 4 * i, word)
        await self.axil.write_dword(TX_REGISTER_BASE + window.commit, 1)
        for _ in range(1000):
            if not await self.axil.read_dword(TX_REGISTER_BASE + window.commit):
                return
        raise AssertionError(f"transmit table {table}: a write was never taken (COMMIT stayed 1)")

    # -- requests and records --------------------------------------------------

    async def post_work(self, fields: dict) -> None:
        await self.wr_source.send(AxiStreamFrame(record_bytes(work_request_layout(), fields)))

    async def post_read_response(self, fields: dict) -> None:
        await self.rr_source.send(AxiStreamFrame(record_bytes(read_response_layout(), fields)))

    async def post_control(self, fields: dict) -> None:
        await self.ctl_source.send(AxiStreamFrame(record_bytes(control_request_layout(), fields)))

    async def post_tsn(self, fields: dict) -> None:
        await self.tsn_source.send(AxiStreamFrame(record_bytes(tsn_request_layout(), fields)))

    async def post_peer_sack(self, fields: dict) -> None:
        await self.peer_sack_source.send(AxiStreamFrame(record_bytes(peer_sack_layout(), fields)))

    async def next_transport_stopped(self) -> dict:
        frame = await self.transport_stopped_sink.recv()
        return _fields(transport_record_layout(), int.from_bytes(bytes(frame.tdata), "little"))

    async def next_frame(self) -> bytes:
        return bytes((await self.frame_sink.recv()).tdata)

    async def next_completion(self) -> dict:
        return _fields(completion_layout(), int.from_bytes(bytes((await self.completion_sink.recv()).tdata), "little"))

    async def next_refused_read(self) -> dict:
        frame = await self.rr_refused_sink.recv()
        return _fields(read_response_layout(), int.from_bytes(bytes(frame.tdata), "little"))
