"""cocotb test of ``boards.ecpix5_top.BoardCore`` from GMII bytes and UART bits (run by tests/boards/test_board.py).

The host is ``driver.link.AsyncLink`` on a UART written here from the 8N1
definition (a start bit, eight bits least significant first, a stop bit);
the network is GMII bytes, a frame on the wire being seven ``0x55``,
``0xD5``, the frame and its FCS, ``zlib.crc32`` least significant byte
first (IEEE 802.3 3.2.9). Through the link, the host programs the engine
(an association, a stream, a region, a posted buffer), the frames built with
the golden model's encoders arrive on GMII, and the host pops the records
and reads host memory back; all is compared with
``model.engine.rx.ReceiveEngineModel`` fed the same frames. A raw frame sent
over the link must leave on GMII with its preamble and FCS. Then the
transmit engine: its rows written and an RDMA Write pushed over the link,
its frames must leave on GMII byte for byte as
``model.engine.tx.TransmitEngineModel`` sends them, and the completion
popped after the TSN request that acknowledges them must be the model's
(RFC 5041 5.4). Bytes of the
requests and of the responses are dropped and flipped on the way
(parameters ``request_faults``, ``response_faults``: byte positions), and
every operation must still complete, by retry.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Edge, Event, FallingEdge, First, RisingEdge, Timer

from driver.link import AsyncLink
from driver.records import record_bytes, tx_association_fields, work_request_fields
from abi.link import TxInput, TxOutput
from abi.rx import ExceptionSource, ReportKind, ack_layout, exception_record_layout, register_map, report_layout
from abi.tx import (TX_REGISTER_BASE, TsnOpcode, completion_layout, tsn_request_layout, tx_register_map,
                    work_request_layout)
from model.ddp.memory import Access, SparseMemory
from model.ddp.segment import TaggedHeader, UntaggedHeader
from model.engine.config import AssociationEntry, BufferEntry, ReceiveConfig, RegionEntry, StreamEntry
from model.engine.rx import ReceiveEngineModel
from model.engine.tx import Completion, CompletionStatus, TransmitConfig, TransmitEngineModel, TxAssociationRow, \
    WorkOpcode, WorkRequest
from model.net.frames import build_frame
from model.rdmap.messages import Opcode
from sim.runner import test_parameters
from sim.tb.tx_engine import data_tsn
from sim.tb.rx_engine_tb import (EngineResults, ExceptionPacket, ReportRecord, RxEngineTB, _compare_acks,
                                 _compare_counters, _compare_exceptions, _compare_segments, _fields)
from sim.traffic.rx import LOCAL_IP, LOCAL_MAC, PEER_MAC, EngineShape, Sender

CORE_NS, GMII_NS = 16, 8   # the board's 62.5 MHz core, the 125 MHz GMII clocks
SHAPE = EngineShape()
REGION = RegionEntry(stag=1 << 8 | 0x42, pd=1, base_to=0x8000, length=4096,
                     access=Access.REMOTE_WRITE | Access.REMOTE_READ | Access.LOCAL_WRITE, host_address=0x1000)
BUFFER = BufferEntry(association=0, stream_id=1, qn=0, host_address=0x3000, length=512)
CONFIG = ReceiveConfig(
    local_mac=LOCAL_MAC, local_ip=LOCAL_IP,
    associations=(AssociationEntry(index=0, local_port=5002, peer_port=5001, peer_ip="10.0.0.1", tag=0x5E6F7080),),
    streams=(StreamEntry(0, 0, pd=1), StreamEntry(0, 1, pd=1)),
    regions=(REGION,), buffers=(BUFFER,))


async def start_board(dut) -> None:
    """The core's clock (10 ns) and the GMII clocks (8 ns) started, the wires idle, the three resets pulsed."""
    for clock, period in ((dut.clk, CORE_NS), (dut.gmii_rx_clk, GMII_NS), (dut.gmii_tx_clk, GMII_NS)):
        cocotb.start_soon(Clock(clock, period, unit="ns", impl="gpi").start())
    dut.gmii_rx.value = 0
    dut.uart_rx.value = 1
    for reset in (dut.rst, dut.gmii_rx_rst, dut.gmii_tx_rst):
        reset.value = 1
    await ClockCycles(dut.clk, 10)
    for reset in (dut.rst, dut.gmii_rx_rst, dut.gmii_tx_rst):
        reset.value = 0


async def uart_send_byte(dut, byte: int, bit_ns: int) -> None:
    """One byte on ``uart_rx`` as 8N1 bits: a start bit, eight bits least significant first, a stop bit."""
    for bit in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
        dut.uart_rx.value = bit
        await Timer(bit_ns, unit="ns")


async def uart_monitor(dut, bit_ns: int, deliver: Callable[[int], None]) -> None:
    """Every byte decoded from ``uart_tx`` (8N1, each bit sampled mid-bit) to ``deliver``, for ever."""
    while True:
        await FallingEdge(dut.uart_tx)
        await Timer(bit_ns // 2, unit="ns")
        byte = 0
        for i in range(8):
            await Timer(bit_ns, unit="ns")
            byte |= int(dut.uart_tx.value) << i
        await Timer(bit_ns, unit="ns")
        assert int(dut.uart_tx.value) == 1, "a byte from the board without its stop bit"
        deliver(byte)


class HostUart:
    """The host's end of the UART wires: bytes to ``uart_rx`` as 8N1 bits, bytes decoded from ``uart_tx``;
    :class:`driver.link.AsyncTransport` for the link, damaging the bytes at the positions given."""

    def __init__(self, dut, bit_clocks: int, request_faults=(), response_faults=()):
        self.dut, self.bit_clocks = dut, bit_clocks
        self.incoming: list[int] = []
        self.arrived = Event()
        self.bit_ns = bit_clocks * CORE_NS
        self.request_faults, self.response_faults = set(request_faults), set(response_faults)
        self.sent = self.received = self.damaged = 0
        dut.uart_rx.value = 1
        cocotb.start_soon(uart_monitor(dut, self.bit_ns, self._arrive))

    def _arrive(self, byte: int) -> None:
        self.incoming.append(byte)
        self.arrived.set()

    def _damage(self, position: int, faults: set[int], byte: int) -> bytes:
        if position not in faults:
            return bytes([byte])
        self.damaged += 1
        return b"" if position % 2 else bytes([byte ^ 0x21])  # odd positions dropped, even ones flipped

    async def send(self, data: bytes) -> None:
        for byte in data:
            for wire_byte in self._damage(self.sent, self.request_faults, byte):
                await uart_send_byte(self.dut, wire_byte, self.bit_ns)
            self.sent += 1

    async def receive(self, timeout: float) -> bytes:
        if not self.incoming:
            self.arrived.clear()
            await First(self.arrived.wait(), Timer(max(1, round(timeout * 1e9)), unit="ns"))
        data = b""
        while self.incoming:
            data += self._damage(self.received, self.response_faults, self.incoming.pop(0))
            self.received += 1
        return data


class _LinkRegisters:
    """The AXI4-Lite master's two calls that ``RxEngineTB`` makes, over the link."""

    def __init__(self, link: AsyncLink):
        self.link = link

    async def write_dword(self, offset: int, value: int) -> None:
        await self.link.write_register(offset, value)

    async def read_dword(self, offset: int) -> int:
        return await self.link.read_register(offset)


class LinkHost(RxEngineTB):
    """``RxEngineTB``'s host commands (configuration, tables, counters) over the control link, and the
    engine's results popped over it."""

    def __init__(self, link: AsyncLink):  # noqa: the bus models of RxEngineTB are not made: the link is the bus
        self.link, self.shape, self.memory_bytes = link, SHAPE, link.info.memory_bytes
        self.map = register_map(SHAPE.associations, SHAPE.stream_ids, SHAPE.regions)
        self.axil = _LinkRegisters(link)

    async def pop_results(self, segments: int, acks: int, exceptions: int, *, polls: int = 200) -> EngineResults:
        """Pop until the records expected are in (or ``polls`` pops found none), then once more each."""
        out = EngineResults()
        wanted = {"report": segments, "ack": acks, "exception": exceptions}
        got = {"report": 0, "ack": 0, "exception": 0}
        for _ in range(polls):
            progress = False
            for kind in wanted:
                if got[kind] > wanted[kind]:
                    continue
                item = await getattr(self.link, f"pop_{kind}")()
                if item is None:
                    continue
                progress = True
                got[kind] += 1
                if kind == "report":
                    record = ReportRecord(_fields(report_layout(), int.from_bytes(item, "little")))
                    (out.segments if record.kind == ReportKind.SEGMENT else out.chunk_errors).append(record)
                elif kind == "ack":
                    out.acks.append(ReportRecord(_fields(ack_layout(), int.from_bytes(item, "little"))))
                else:
                    fields = _fields(exception_record_layout(), item.record)
                    packet = ExceptionPacket(fields["source"], fields["reason"], fields["association"],
                                             fields["length"], item.data, True)
                    (out.frame_exceptions if packet.source == ExceptionSource.FRAME
                     else out.chunk_exceptions).append(packet)
            if all(got[kind] >= wanted[kind] for kind in wanted) and not progress:
                break
        out.counters = await self.counters()
        return out


def wire_image(frame: bytes) -> bytes:
    """A frame as it goes on the wire: preamble, SFD, the frame padded to 60 bytes, its FCS."""
    body = frame + bytes(max(0, 60 - len(frame)))
    return b"\x55" * 7 + b"\xd5" + body + struct.pack("<I", zlib.crc32(body))


# The GMII ports are ``hdl.mac.gmii.gmii_layout()`` vectors: data in bits 7:0, the enable bit 8, the error bit 9.
GMII_EN, GMII_ER = 1 << 8, 1 << 9


async def gmii_send(dut, images: list[bytes]) -> None:
    for image in images:
        for byte in image:
            dut.gmii_rx.value = GMII_EN | byte
            await RisingEdge(dut.gmii_rx_clk)
        dut.gmii_rx.value = 0
        await ClockCycles(dut.gmii_rx_clk, 12)


async def gmii_record(dut, carriers: list[bytes]) -> None:
    current = b""
    while True:
        if not current and not int(dut.gmii_tx.value) & GMII_EN:
            await Edge(dut.gmii_tx)                   # idle until the transmitter starts
        await FallingEdge(dut.gmii_tx_clk)            # mid-clock: the symbol the last rising edge put out
        symbol = int(dut.gmii_tx.value)
        assert not symbol & GMII_ER, "TX_ER set"
        if symbol & GMII_EN:
            current += bytes([symbol & 0xFF])
        elif current:
            carriers.append(current)
            current = b""


def traffic(rng: random.Random) -> list[bytes]:
    """An RDMA Write into the region, a Send into the posted buffer (RFC 5040 4.3, 4.1), a frame for
    another station (to the host whole)."""
    sender = Sender(rng, CONFIG)
    write = TaggedHeader(last=True, rsvd_ulp=0x40 | Opcode.RDMA_WRITE, stag=REGION.stag, to=0x8000 + 100).encode()
    send = UntaggedHeader(last=True, rsvd_ulp=(0x40 | Opcode.SEND) << 32, qn=0, msn=1, mo=0).encode()
    segments = [(0, write + rng.randbytes(300)), (1, send + rng.randbytes(100))]
    frames = [sender.frame(0, sender.packet(0, [sender.segment(0, stream, segment)])) for stream, segment in segments]
    other = build_frame(sender.packet(0, [sender.segment(0, 0, write + rng.randbytes(16), lost=True)]), PEER_MAC,
                        bytes.fromhex("02000000ffff"), "10.0.0.1", LOCAL_IP)
    return frames + [other]


async def transmit_over_the_link(dut, link: AsyncLink, rng: random.Random, carriers: list[bytes]) -> int:
    """An RDMA Write of three segments from the board's host memory, through the link; the frames on GMII and
    the completion compared with the transmit engine's golden model. Returns the frames sent."""
    memory = SparseMemory()
    model = TransmitEngineModel(TransmitConfig(LOCAL_MAC, LOCAL_IP, associations=SHAPE.associations,
                                               stream_ids=SHAPE.stream_ids), memory)
    tx_map = tx_register_map(SHAPE.associations, SHAPE.stream_ids)
    row = TxAssociationRow(index=0, peer_mac=PEER_MAC, peer_ip="10.0.0.1", local_port=5002, peer_port=5001,
                           tag=0x10203040, mulpdu=214, next_tsn=0xFFFFFFFE)   # 200 bytes a tagged segment
    payload = rng.randbytes(555)
    memory.write(0x6000, payload)
    await link.write_memory(0x6000, payload)
    model.write_association(row)
    await link.write_table(tx_map.tables["tx_association"], tx_association_fields(row), base=TX_REGISTER_BASE)
    model.write_stream(0, 1, 1)
    await link.write_table(tx_map.tables["tx_stream"], {"index": 1, "first_ssn": 1}, base=TX_REGISTER_BASE)
    request = WorkRequest(WorkOpcode.RDMA_WRITE, 0, 1, 0x6000, len(payload), stag=REGION.stag, to=0x8010, wr_id=77)
    model.post_work(request)
    carriers.clear()
    assert await link.push_record(TxInput.WORK, record_bytes(work_request_layout(), work_request_fields(request)))
    expected = model.data_to_send()
    assert len(expected) == 3
    for _ in range(5000):
        if len(carriers) >= len(expected):
            break
        await ClockCycles(dut.clk, 10)
    assert carriers == [wire_image(frame) for frame in expected]
    # Nothing completes before its last chunk is acknowledged (RFC 5041 5.4, Data Source).
    assert await link.pop_record(TxOutput.COMPLETION) is None
    _, last_tsn = data_tsn(expected[-1])
    model.tsn_request(TsnOpcode.ACK, 0, last_tsn)
    assert await link.push_record(TxInput.TSN, record_bytes(tsn_request_layout(), {
        "opcode": int(TsnOpcode.ACK), "association": 0, "tsn": last_tsn}))
    for _ in range(20):
        popped = await link.pop_record(TxOutput.COMPLETION)
        if popped is not None:
            break
    fields = _fields(completion_layout(), int.from_bytes(popped, "little"))
    completion = Completion(fields["wr_id"], fields["opcode"], fields["association"], CompletionStatus(fields["status"]))
    assert [completion] == model.next_events()
    return len(expected)


@cocotb.test()
async def board_over_the_link(dut):
    parameters = test_parameters()
    bit_clocks = int(parameters["bit_clocks"])
    await start_board(dut)
    carriers: list[bytes] = []
    cocotb.start_soon(gmii_record(dut, carriers))

    uart = HostUart(dut, bit_clocks, parameters.get("request_faults", ()), parameters.get("response_faults", ()))
    link = AsyncLink(uart, baud=1e9 / (CORE_NS * bit_clocks), latency=4000 * CORE_NS * 1e-9, seed=1)
    info = await link.open()
    assert info.memory_bytes == int(parameters["memory_bytes"])
    host = LinkHost(link)
    await host.configure(CONFIG, drop_when_full=True, fresh=True)

    rng = random.Random(int(parameters.get("seed", 1)))
    frames = traffic(rng)
    await gmii_send(dut, [wire_image(frame) for frame in frames])
    model = ReceiveEngineModel(CONFIG, SparseMemory())
    for index, frame in enumerate(frames):
        model.receive(frame, float(index))
    frame_results = model.next_events()

    results = await host.pop_results(segments=sum(len(r.segments) for r in frame_results),
                                     acks=sum(len(r.acks) for r in frame_results),
                                     exceptions=sum(r.action.name == "EXCEPTION" for r in frame_results))
    problems = _compare_segments(results.segments, [s for r in frame_results for s in r.segments])
    problems += _compare_acks(results.acks, [a for r in frame_results for a in r.acks])
    problems += _compare_exceptions(results, frames, frame_results)
    problems += _compare_counters(results.counters, model, frame_results)
    # Host memory where the model placed payloads, with 16 bytes either side (nothing spilt).
    for verdict in (s for r in frame_results for s in r.segments if s.host_address is not None):
        start, length = verdict.host_address - 16, verdict.payload_length + 32
        placed = await link.read_memory(start, length)
        if placed != model.memory.read(start, length):
            problems.append(f"host memory at {start:#x} differs from the model's")
    assert not problems, "\n".join(problems)
    assert len(results.segments) == 2 and len(results.frame_exceptions) == 1  # the traffic did what it meant

    # A raw frame out through the MAC: on the wire with its preamble, padding and FCS.
    raw = build_frame(b"\x00" * 12, LOCAL_MAC, PEER_MAC, LOCAL_IP, "10.0.0.1")[:42]
    await link.send_frame(raw)
    for _ in range(2000):
        if carriers:
            break
        await ClockCycles(dut.clk, 10)
    assert carriers == [wire_image(raw)]
    sent = await transmit_over_the_link(dut, link, rng, carriers)
    counters = await link.mac_counters()
    assert (counters["rx_frames"], counters["tx_frames"], counters["rx_fcs_errors"]) == (len(frames), 1 + sent, 0)
    if parameters.get("request_faults") or parameters.get("response_faults"):
        assert uart.damaged >= 3 and link.client.retried >= 3, (uart.damaged, link.client.retried)
    dut._log.info(f"{uart.sent} bytes to the board, {uart.received} back, {uart.damaged} damaged, "
                  f"{link.client.retried} retries")
