"""A reusable cocotb testbench for :class:`hdl.rx.engine.RxEngine`, scored by the golden model.

:class:`RxEngineTB` binds to a running DUT (it builds nothing): cocotbext-axi's
``AxiStreamSource`` on ``s_axis``, :class:`RefusingRam` (cocotbext-axi's
``AxiRamWrite``, filled with :data:`CANARY`, answering SLVERR for ranges the
test refuses) on ``m_axi``, ``AxiLiteMaster`` on ``s_axil`` and
``AxiStreamSink`` on ``m_axis_exc``, ``m_axis_report`` and ``m_axis_ack``, each bound with ``from_prefix(dut,
"<port>")`` to the AXI names of :mod:`hdl.bus.ports` (``s_axis_tdata``,
``m_axi_awaddr``...). A bus monitor records
every byte the engine writes (from AW and the W strobes).

:meth:`RxEngineTB.restart` resets the engine and the testbench's records,
and :meth:`RxEngineTB.configure` takes back every posted buffer (whole-queue
revocation) before writing a configuration, so one simulation runs any
number of configurations.

:meth:`RxEngineTB.drain` waits until the engine has consumed every frame sent
and every output has drained, judged from the engine itself (its counters,
its ports and the valid of every stream inside it), never from a quiet spell
of guessed length; past a cycle budget it raises :class:`EngineNotDrained`.

:meth:`RxEngineTB.compare_with_model` checks everything against a
:class:`model.engine.rx.ReceiveEngineModel` fed the same frames and returns
one message per mismatch: the whole RAM (so a write outside the model's
writes, i.e. outside registered regions and posted buffers, fails, RFC 5041
7.1), every byte the bus wrote, every report record (segment verdicts in
order; chunk errors in order), every exception frame and chunk with its
reason, every ack record, and every counter. An engine built with its read
responder (``read_responder``) also has ``m_axis_rr`` bound to a sink, its
records compared with the model's ``read_responses`` in order.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import cocotb
from cocotb.clock import Clock
from cocotb.handle import HierarchyArrayObject, HierarchyObject, LogicObject
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiRamWrite, AxiStreamBus, AxiStreamFrame, AxiStreamSink,
                           AxiStreamSource, AxiWriteBus)

from driver.records import record_fields
from abi.rx import ExceptionSource, ReportKind, ack_layout, exception_record_layout, report_layout
from abi.register_file import RegisterMap
from abi.tx import read_response_layout
from model.ddp.memory import Access
from model.engine.config import ReceiveConfig
from model.engine.rx import FrameAction, FrameResult, ReceiveEngineModel, SegmentStatus
from sim.traffic.rx import ConfigDoesNotFit, EngineShape, check_config_fits

__all__ = ["CANARY", "RxEngineTB", "RefusingRam", "ReportRecord", "ExceptionPacket", "EngineResults",
           "pause_pattern", "ConfigDoesNotFit", "EngineNotDrained", "check_config_fits", "stream_valids"]

CANARY = 0xC3
ADDRESS_BITS = 64
#: Cycles in a row with no stream inside the engine offering a transfer before it counts as drained.
#: Work of data-dependent length (a frame read out, a refused payload discarded, a burst waiting for
#: memory) always waits behind some stream's valid; only a register stage between two streams goes
#: without one (1 cycle at most, measured on the sample capture and the malformed catalogue).
SETTLE_CYCLES = 8


class EngineNotDrained(AssertionError):
    """The engine did not consume every frame and drain its outputs within the cycle budget."""


def stream_valids(dut) -> dict[str, LogicObject]:
    """The valid of every stream in the design, by hierarchical name: each 1-bit signal Amaranth names
    ``<interface>__valid`` in any module, and the top level's AXI valids; not the register bus, which the
    testbench drives itself. Verilator shows inner signals because cocotb-test builds with
    ``--public-flat-rw``."""
    found: dict[str, LogicObject] = {}

    def walk(handle, path: str) -> None:
        for child in handle:
            name = child._name.strip()
            if isinstance(child, (HierarchyObject, HierarchyArrayObject)):
                walk(child, f"{path}{name}.")
            elif (isinstance(child, LogicObject) and len(child) == 1 and name.endswith("valid")
                  and "." not in name and ("__" in name or not path) and "axil" not in name):
                found[path + name] = child

    walk(dut, "")
    if not any("." in name for name in found):
        raise RuntimeError("no stream inside the engine is visible to the testbench "
                           "(a simulator build without --public-flat-rw?)")
    return found


def pause_pattern(rng: random.Random, busy: float) -> Iterator[bool]:
    """An endless cocotbext-axi pause generator: stalled with probability ``busy``, in short runs."""
    while True:
        stalled = rng.random() < busy
        for _ in range(rng.randint(1, 6)):
            yield stalled


_fields = record_fields


class RefusingRam(AxiRamWrite):
    """cocotbext-axi's AXI RAM whose ``refused`` ranges (start, end) answer writes with SLVERR: the
    bytes there are not written, the rest of the burst is (the AXI RAM answers SLVERR when its
    ``_write`` raises)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.refused: list[tuple[int, int]] = []

    async def _write(self, address, data):
        end = address + len(data)
        if not any(start < end and address < stop for start, stop in self.refused):
            return await super()._write(address, data)
        for offset, byte in enumerate(data):
            if not any(start <= address + offset < stop for start, stop in self.refused):
                self.write(address + offset, bytes([byte]))
        raise PermissionError(f"write at {address:#x} refused")


@dataclass(frozen=True)
class ReportRecord:
    """One decoded :func:`abi.rx.report_layout` record."""

    fields: dict

    def __getattr__(self, name: str):
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class ExceptionPacket:
    source: int
    reason: int
    association: int
    length: int
    data: bytes
    uniform_tuser: bool  # tuser held the same record on every beat


@dataclass
class EngineResults:
    segments: list[ReportRecord] = field(default_factory=list)
    chunk_errors: list[ReportRecord] = field(default_factory=list)
    frame_exceptions: list[ExceptionPacket] = field(default_factory=list)
    chunk_exceptions: list[ExceptionPacket] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    written: list[tuple[int, int]] = field(default_factory=list)  # (address, length) runs the bus wrote
    acks: list[ReportRecord] = field(default_factory=list)
    read_requests: list[ReportRecord] = field(default_factory=list)   # m_axis_rr, with the read responder


class RxEngineTB:
    """Owns the clock, reset and bus models of a running ``RxEngine`` DUT (``clock``: start its clock; a
    second testbench on the same clock does not)."""

    def __init__(self, dut, width_bytes: int, register_map: RegisterMap, shape: EngineShape = EngineShape(), *,
                 memory_bytes: int = 1 << 22, seed: int = 1, clock: bool = True, read_responder: bool = False) -> None:
        self.dut, self.width_bytes, self.map, self.shape = dut, width_bytes, register_map, shape
        self.memory_bytes = memory_bytes
        self.rng = random.Random(seed)
        if len(dut.s_axis_tdata) != 8 * width_bytes:
            raise ValueError(f"DUT s_axis is {len(dut.s_axis_tdata)} bits wide, not {8 * width_bytes}")
        if clock:
            cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
        self.ram = RefusingRam(AxiWriteBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=memory_bytes)
        self.ram.log.setLevel("ERROR")  # a refused write is a test's intent, not a warning
        self.ram.write(0, bytes([CANARY]) * memory_bytes)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.exc_sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_exc"), dut.clk, dut.rst)
        self.report_sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_report"), dut.clk, dut.rst)
        self.ack_sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_ack"), dut.clk, dut.rst)
        self.read_responder = read_responder
        self.rr_sink = (AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_rr"), dut.clk, dut.rst)
                        if read_responder else None)
        self._rr_layout = read_response_layout(ADDRESS_BITS)
        self._report_layout = report_layout(ADDRESS_BITS)
        self._ack_layout = ack_layout()
        self._exception_layout = exception_record_layout()
        self.cycle = 0
        self._bursts: list[int] = []  # AW addresses not yet finished on W
        self._beat = 0
        self._w_beats: list[tuple[int, bool]] = []  # (WSTRB, WLAST) of beats whose AW has not been seen
        self._valids = stream_valids(dut)
        self._forget()
        cocotb.start_soon(self._monitor())

    def _forget(self) -> None:
        """Start the records afresh: frames sent, bytes written, transfers seen on the output ports."""
        self.written: list[tuple[int, int]] = []
        self.sent: list[bytes] = []
        self._unsent = 0  # frames of `sent` not yet queued on the source
        # Transfers seen on the output ports, to account for the counters (see `drain`).
        self.report_records = 0
        self.ack_records = 0
        self.rr_records = 0
        self.frame_exception_packets = 0
        self.write_bursts = 0
        self.write_responses = 0

    # -- clock, reset, back-pressure --------------------------------------

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 4)

    async def restart(self) -> None:
        """Reset a drained engine (counters and pipeline; its tables and posted buffers outlive a reset,
        :meth:`configure` rewrites and revokes them) and start the records and the RAM afresh."""
        await self.reset()
        self._forget()
        self.ram.refused.clear()
        self.ram.write(0, bytes([CANARY]) * self.memory_bytes)

    def refuse_writes(self, address: int, length: int) -> None:
        """From now on the RAM answers writes to ``[address, address + length)`` with SLVERR."""
        self.ram.refused.append((address, address + length))

    def hold_outputs(self, held: bool) -> None:
        """Hold (or release) every output of the engine: the RAM's AW and W channels and the three sinks."""
        for channel in (self.ram.aw_channel, self.ram.w_channel, *self._record_sinks()):
            channel.pause = held

    def set_backpressure(self, busy: float) -> None:
        """Random stalls on the RAM's AW, W and B channels and on both output sinks (0 = none)."""
        self.set_memory_stall(busy)
        for channel in self._record_sinks():
            channel.set_pause_generator(pause_pattern(self.rng, busy) if busy else None)

    def _record_sinks(self) -> list[AxiStreamSink]:
        return [self.exc_sink, self.report_sink, self.ack_sink] + ([self.rr_sink] if self.rr_sink else [])

    def set_memory_stall(self, busy: float) -> None:
        """Random stalls on the RAM's AW, W and B channels only: memory back-pressure (0 = none)."""
        for channel in (self.ram.aw_channel, self.ram.w_channel, self.ram.b_channel):
            channel.set_pause_generator(pause_pattern(self.rng, busy) if busy else None)

    async def _monitor(self) -> None:
        """Records written byte runs and counts the transfers on the output ports."""
        dut, width = self.dut, self.width_bytes
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1
            if dut.m_axis_report_tvalid.value and dut.m_axis_report_tready.value:
                self.report_records += 1
            if dut.m_axis_ack_tvalid.value and dut.m_axis_ack_tready.value:
                self.ack_records += 1
            if self.read_responder and dut.m_axis_rr_tvalid.value and dut.m_axis_rr_tready.value:
                self.rr_records += 1
            if dut.m_axis_exc_tvalid.value and dut.m_axis_exc_tready.value and dut.m_axis_exc_tlast.value:
                record = _fields(self._exception_layout, int(dut.m_axis_exc_tuser.value))
                self.frame_exception_packets += record["source"] == ExceptionSource.FRAME
            if dut.m_axi_bvalid.value and dut.m_axi_bready.value:
                self.write_responses += 1
            if dut.m_axi_awvalid.value and dut.m_axi_awready.value:
                self.write_bursts += 1
                self._bursts.append(int(dut.m_axi_awaddr.value) & -width)
            if dut.m_axi_wvalid.value and dut.m_axi_wready.value:
                # AXI lets W run ahead of its AW: beats wait here for their burst's address.
                self._w_beats.append((int(dut.m_axi_wstrb.value), bool(dut.m_axi_wlast.value)))
            while self._bursts and self._w_beats:
                strobe, last = self._w_beats.pop(0)
                address = self._bursts[0] + self._beat * width
                lane = 0
                while strobe >> lane:
                    if strobe >> lane & 1:
                        start = lane
                        while strobe >> lane & 1:
                            lane += 1
                        self.written.append((address + start, lane - start))
                    else:
                        lane += 1
                self._beat += 1
                if last:
                    self._bursts.pop(0)
                    self._beat = 0

    # -- registers ----------------------------------------------------------

    async def read_register(self, offset: int) -> int:
        return await self.axil.read_dword(offset)

    async def write_table(self, table: str, fields: dict) -> None:
        window = self.map.tables[table]
        for i, word in enumerate(window.encode(fields)):
            await self.axil.write_dword(window.base + 4 * i, word)
        await self.axil.write_dword(window.commit, 1)
        for _ in range(1000):  # COMMIT reads 1 until the table took the write
            if not await self.axil.read_dword(window.commit):
                return
        raise AssertionError(f"table {table}: a write was never taken (COMMIT stayed 1)")

    async def configure(self, config: ReceiveConfig, *, drop_when_full: bool = False, fresh: bool = False) -> None:
        """Invalidate every association, region and stream row, take back every posted buffer (the
        queues outlive a reset), then write ``config`` (buffers last), each queue's MSNs from 1.
        ``fresh``: an engine just out of its first reset, whose rows are all invalid and queues empty,
        gets ``config`` alone."""
        check_config_fits(config, self.shape, self.memory_bytes)
        shape = self.shape
        mac = int.from_bytes(config.local_mac, "big")
        for name, value in (("local_mac_low", mac & 0xFFFFFFFF), ("local_mac_high", mac >> 32),
                            ("local_ip", int(ipaddress.IPv4Address(config.local_ip))), ("udp_port", config.udp_port),
                            ("drop_when_full", int(drop_when_full)),
                            ("segment_reports", int(config.segment_reports))):
            await self.axil.write_dword(self.map.config_offset(name), value)
        for index in range(0 if fresh else shape.associations):
            await self.write_table("association", {"index": index, "valid": 0})
        for index in range(0 if fresh else shape.regions):
            await self.write_table("region", {"index": index, "entry": {"valid": 0}})
        for index in range(0 if fresh else shape.associations * shape.stream_ids):
            await self.write_table("stream", {"index": index, "entry": {"valid": 0}})
            for qn in range(3):
                await self.revoke_queue(index, qn)
        for a in config.associations:
            await self.write_table("association", {
                "index": a.index, "valid": 1, "ddp": int(a.ddp), "local_port": a.local_port,
                "peer_port": a.peer_port, "peer_ip": int(ipaddress.IPv4Address(a.peer_ip)), "tag": a.tag})
        for s in config.streams:
            await self.arm_stream(s.association, s.stream_id, s.pd, s.first_ssn)
        for r in config.regions:
            bound = r.stream or (0, 0)
            await self.write_table("region", {"index": shape.stag_index(r.stag), "entry": {
                "valid": 1, "key": shape.stag_key(r.stag), "pd": r.pd, "stream_bound": int(r.stream is not None),
                "association": bound[0], "stream_id": bound[1],
                "remote_read": int(Access.REMOTE_READ in r.access), "remote_write": int(Access.REMOTE_WRITE in r.access),
                "local_write": int(Access.LOCAL_WRITE in r.access),
                "base_to": r.base_to, "length": r.length, "host_address": r.host_address}})
        for b in config.buffers:
            await self.post_buffer(b.association, b.stream_id, b.qn, b.host_address, b.length)

    async def arm_stream(self, association: int, stream_id: int, pd: int, first_ssn: int) -> None:
        """Write the stream's row: armed in ``pd``, its error bit cleared (re-arms a stream in error),
        its DDP-SSN window starting at ``first_ssn``."""
        await self.write_table("stream", {"index": self.shape.stream_row(association, stream_id),
                                          "entry": {"valid": 1, "pd": pd}, "first_ssn": first_ssn})

    async def post_buffer(self, association: int, stream_id: int, qn: int, address: int, length: int) -> None:
        await self.write_table("buffer", {"stream": self.shape.stream_row(association, stream_id), "qn": qn,
                                          "address": address, "length": length})

    async def revoke_buffer(self, association: int, stream_id: int, qn: int, msn: int) -> None:
        await self.write_table("revoke", {"stream": self.shape.stream_row(association, stream_id), "qn": qn,
                                          "msn": msn, "whole_queue": 0})

    async def revoke_queue(self, row: int, qn: int) -> None:
        """Take back every buffer of stream row ``row``, queue ``qn``; its next post takes MSN 1."""
        await self.write_table("revoke", {"stream": row, "qn": qn, "msn": 0, "whole_queue": 1})

    # -- traffic --------------------------------------------------------------

    async def send_frames(self, frames: Iterable[bytes], gaps: Iterable[int] | None = None) -> None:
        """Queue the frames on ``s_axis``, ``gaps[i]`` idle cycles before frame ``i`` (back to back if None).

        The frames count as sent from the call on, so :meth:`drain` may run beside this coroutine."""
        frames = [bytes(frame) for frame in frames]
        self.sent.extend(frames)
        self._unsent += len(frames)
        gaps = iter(gaps) if gaps is not None else None
        for frame in frames:
            idle = next(gaps, 0) if gaps is not None else 0
            if idle:
                await self.source.wait()
                await ClockCycles(self.dut.clk, idle)
            await self.source.send(AxiStreamFrame(frame))
            self._unsent -= 1

    async def drain(self, timeout_cycles: int = 2_000_000) -> None:
        """Wait until the engine has consumed every frame sent and every output has drained.

        Drained means: every frame went into ``s_axis``; the frame receiver counted every one (the
        ``frames`` counter); every segment verdict and chunk error it counted left as a report record
        (or was withheld, ``reports_withheld``), and every frame exception as a packet; every write burst
        has its response; and no stream in
        the engine has offered a transfer for :data:`SETTLE_CYCLES` cycles. Raises
        :class:`EngineNotDrained`, saying how many frames were consumed, when ``timeout_cycles`` pass
        first."""
        start, quiet = self.cycle, 0
        valids = list(self._valids.values())
        while True:
            await RisingEdge(self.dut.clk)
            if self.cycle - start > timeout_cycles:
                raise EngineNotDrained(await self._not_drained(timeout_cycles))
            if self._unsent or not self.source.idle() or any(valid.value for valid in valids):
                quiet = 0
                continue
            quiet += 1
            if quiet >= SETTLE_CYCLES:
                if not await self._unaccounted():
                    return
                quiet = 0

    async def _unaccounted(self) -> list[str]:
        """What the counters say the engine did that has not (yet) shown on its ports."""
        counters = await self.counters()
        segments = sum(counters[f"segments_{status.name.lower()}"] for status in SegmentStatus)
        problems = []
        if counters["frames"] != len(self.sent) % (1 << 32):
            problems.append(f"it consumed {counters['frames']} of the {len(self.sent)} frames sent")
        # An accepted Read Request of the read responder leaves on m_axis_rr instead of as a report.
        if (self.report_records + self.rr_records + counters["reports_waiting"] + counters["reports_discarded"]
                + counters["reports_withheld"] != segments + counters["chunk_errors"]):
            problems.append(f"{self.report_records} report records left it, its counters say "
                            f"{segments} segments and {counters['chunk_errors']} chunk errors")
        if self.ack_records != counters["acks"]:
            problems.append(f"{self.ack_records} ack records left it, its counters say {counters['acks']}")
        if self.frame_exception_packets != counters["exceptions"]:
            problems.append(f"{self.frame_exception_packets} frames left on its exception stream, its counters "
                            f"say {counters['exceptions']}")
        if self.write_bursts != self.write_responses:
            problems.append(f"{self.write_bursts - self.write_responses} write bursts wait for their response")
        return problems

    async def _not_drained(self, timeout_cycles: int) -> str:
        problems = await self._unaccounted() or [f"it consumed all {len(self.sent)} frames sent"]
        if self._unsent or not self.source.idle():
            problems.append(f"{self._unsent} frames not yet queued on s_axis, the source "
                            f"{'busy' if not self.source.idle() else 'idle'}")
        busy = [name for name, valid in self._valids.items() if valid.value]
        if busy:
            problems.append("streams still offering a transfer: " + ", ".join(busy[:8])
                            + (f" and {len(busy) - 8} more" if len(busy) > 8 else ""))
        return f"the engine did not drain within {timeout_cycles} cycles: " + "; ".join(problems)

    async def counters(self) -> dict[str, int]:
        """Every counter of the register map, read over AXI4-Lite."""
        return {name: await self.read_register(offset) for name, offset in self.map.counters.items()}

    # -- results ----------------------------------------------------------------

    def _report(self, frame: AxiStreamFrame) -> ReportRecord:
        value = int.from_bytes(bytes(frame.tdata), "little")
        return ReportRecord(_fields(self._report_layout, value))

    def _exception(self, frame: AxiStreamFrame) -> ExceptionPacket:
        users = frame.tuser if isinstance(frame.tuser, list) else [frame.tuser]  # compacted: one value if uniform
        record = _fields(self._exception_layout, int(users[0]))
        return ExceptionPacket(record["source"], record["reason"], record["association"], record["length"],
                               bytes(frame.tdata), len(set(map(int, users))) == 1)

    async def results(self) -> EngineResults:
        out = EngineResults(written=list(self.written))
        while not self.report_sink.empty():
            record = self._report(self.report_sink.recv_nowait())
            (out.segments if record.kind == ReportKind.SEGMENT else out.chunk_errors).append(record)
        while not self.ack_sink.empty():
            frame = self.ack_sink.recv_nowait()
            out.acks.append(ReportRecord(_fields(self._ack_layout, int.from_bytes(bytes(frame.tdata), "little"))))
        while self.rr_sink is not None and not self.rr_sink.empty():
            frame = self.rr_sink.recv_nowait()
            out.read_requests.append(
                ReportRecord(_fields(self._rr_layout, int.from_bytes(bytes(frame.tdata), "little"))))
        while not self.exc_sink.empty():
            packet = self._exception(self.exc_sink.recv_nowait())
            (out.frame_exceptions if packet.source == ExceptionSource.FRAME else out.chunk_exceptions).append(packet)
        out.counters = await self.counters()
        return out

    async def compare_with_model(self, model: ReceiveEngineModel, frame_results: list[FrameResult]) -> list[str]:
        """Every difference between the engine and ``model``, which was fed the frames sent so far
        (:attr:`sent`), in order, giving ``frame_results``."""
        if len(frame_results) != len(self.sent):
            raise ValueError(f"{len(frame_results)} model results for {len(self.sent)} frames sent")
        results = await self.results()
        problems: list[str] = []
        problems += _compare_segments(results.segments, [s for r in frame_results for s in r.segments])
        problems += _compare_chunk_errors(results.chunk_errors, [f for r in frame_results for f in r.chunk_faults])
        problems += _compare_acks(results.acks, [a for r in frame_results for a in r.acks])
        if self.read_responder:
            problems += _compare_read_requests(results.read_requests,
                                               [q for r in frame_results for q in r.read_responses])
        problems += _compare_exceptions(results, self.sent, frame_results)
        problems += _compare_counters(results.counters, model, frame_results)
        problems += self._compare_memory(model, results.written)
        return problems

    def _compare_memory(self, model: ReceiveEngineModel, written: list[tuple[int, int]]) -> list[str]:
        problems = []
        # The bus may also write where the RAM refuses writes (the model writes nothing there).
        allowed = sorted([(a, a + n) for a, n in model.memory.writes if n] + self.ram.refused)
        for address, length in written:
            if not any(start <= address and address + length <= end for start, end in allowed):
                problems.append(f"bus wrote {length} bytes at {address:#x}, outside every write of the model "
                                f"(registered regions and posted buffers)")
                if len(problems) > 10:
                    break
        expected = bytearray([CANARY]) * self.memory_bytes
        for address, length in model.memory.writes:
            if address + length > self.memory_bytes:
                problems.append(f"model wrote {length} bytes at {address:#x}, past the {self.memory_bytes:#x}-byte RAM")
                continue
            expected[address : address + length] = model.memory.read(address, length)
        actual = self.ram.read(0, self.memory_bytes)
        if actual != expected:
            differing = [i for i in range(0, self.memory_bytes, 4096)
                         if actual[i : i + 4096] != expected[i : i + 4096]]
            for page in differing[:8]:
                first = next(i for i in range(page, page + 4096) if actual[i] != expected[i])
                last = max(i for i in range(page, min(page + 4096, self.memory_bytes)) if actual[i] != expected[i])
                problems.append(f"host memory {first:#x}..{last:#x} differs: engine {actual[first:first + 8].hex()}..., "
                                f"model {expected[first:first + 8].hex()}...")
        return problems


# -- comparisons -----------------------------------------------------------------


def _segment_key(verdict) -> str:
    return f"segment assoc {verdict.association} stream {verdict.stream_id} TSN {verdict.tsn:#x} DDP-SSN {verdict.ddp_ssn}"


def _compare_segments(records: list[ReportRecord], verdicts: list) -> list[str]:
    problems = []
    if len(records) != len(verdicts):
        problems.append(f"{len(records)} segment records from the engine, {len(verdicts)} verdicts from the model")
    for i, (record, verdict) in enumerate(zip(records, verdicts)):
        error = verdict.error
        expected = {
            "association": verdict.association, "stream_id": verdict.stream_id, "tsn": verdict.tsn,
            "ddp_ssn": verdict.ddp_ssn, "status": verdict.status.value,
            "error": ({"valid": 1, "layer": int(error.layer), "etype": error.etype, "code": error.code}
                      if error is not None else {"valid": 0, "layer": 0, "etype": 0, "code": 0}),
            "tagged": int(verdict.tagged), "last": int(verdict.last), "opcode": verdict.opcode,
            "payload_length": verdict.payload_length, "host_address": verdict.host_address or 0,
            "message_length": verdict.message_length or 0, "dma_error": int(verdict.dma_error),
            "stag": verdict.stag, "to": verdict.to, "qn": verdict.qn, "msn": verdict.msn, "mo": verdict.mo,
            "invalidate_stag": verdict.invalidate_stag,
        }
        for name, value in expected.items():
            if record.fields[name] != value:
                problems.append(f"record {i} ({_segment_key(verdict)}, model {verdict.status.name}): {name} is "
                                f"{_show(record.fields[name])}, model {_show(value)}")
                if name in ("tsn", "association"):
                    return problems + ["(records out of step: later records not compared)"]
    return problems


def _compare_read_requests(records: list[ReportRecord], requests: list) -> list[str]:
    """The read responder's records (``m_axis_rr``) against the model's ``read_responses``, in order."""
    names = ("association", "stream_id", "host_address", "length", "sink_stag", "sink_to", "msn")
    got = [tuple(record.fields[name] for name in names) for record in records]
    want = [tuple(getattr(request, name) for name in names) for request in requests]
    if got == want:
        return []
    problems = [f"{len(got)} read requests on m_axis_rr, {len(want)} from the model"] if len(got) != len(want) else []
    for i, (engine, model) in enumerate(zip(got, want)):
        if engine != model:
            problems.append(f"read request {i}: engine {dict(zip(names, map(_show, engine)))}, "
                            f"model {dict(zip(names, map(_show, model)))}")
            if len(problems) > 10:
                break
    return problems


def _show(value) -> str:
    return f"{value:#x}" if isinstance(value, int) and value > 9 else str(value)


def _compare_chunk_errors(records: list[ReportRecord], faults: list) -> list[str]:
    problems = []
    if len(records) != len(faults):
        problems.append(f"{len(records)} chunk-error records from the engine, {len(faults)} chunk faults from the model: "
                        f"engine {[(r.association, hex(r.tsn), r.chunk_error) for r in records]}, "
                        f"model {[(f.association, hex(f.tsn), int(f.kind)) for f in faults]}")
    for i, (record, fault) in enumerate(zip(records, faults)):
        got = (record.association, record.tsn, record.chunk_error)
        want = (fault.association, fault.tsn, int(fault.kind))
        if got != want:
            problems.append(f"chunk error {i}: engine (assoc, TSN, kind) {got}, model {want} ({fault.kind.name})")
    return problems


def _compare_acks(records: list[ReportRecord], acks: list) -> list[str]:
    got = [(r.association, r.tsn, r.disposition, r.length, r.packet_end, r.immediate) for r in records]
    want = [(a.association, a.tsn, int(a.disposition), a.length, int(a.packet_end), int(a.immediate)) for a in acks]
    if got == want:
        return []
    problems = [f"{len(got)} ack records from the engine, {len(want)} from the model"] if len(got) != len(want) else []
    for i, (engine, model) in enumerate(zip(got, want)):
        if engine != model:
            problems.append(f"ack {i}: engine (assoc, TSN, disposition, length, packet end, I bit) {engine}, "
                            f"model {model}")
            if len(problems) > 10:
                break
    return problems


def _compare_exceptions(results: EngineResults, frames: list[bytes], frame_results: list[FrameResult]) -> list[str]:
    problems = []
    frames_expected = [(int(r.reason), frame) for frame, r in zip(frames, frame_results)
                       if r.action is FrameAction.EXCEPTION]
    chunks_expected = [(int(c.reason), c.association, c.chunk) for r in frame_results for c in r.chunks_to_host]
    for kind, got, want in (("frame", results.frame_exceptions, frames_expected),
                            ("chunk", results.chunk_exceptions, chunks_expected)):
        if len(got) != len(want):
            problems.append(f"{len(got)} {kind} exceptions from the engine, {len(want)} from the model: engine "
                            f"reasons {[p.reason for p in got]}, model {[w[0] for w in want]}")
        for i, (packet, expected) in enumerate(zip(got, want)):
            reason, data = expected[0], expected[-1]
            where = f"{kind} exception {i} (model reason {reason})"
            if packet.reason != reason:
                problems.append(f"{where}: reason {packet.reason}")
            if kind == "chunk" and packet.association != expected[1]:
                problems.append(f"{where}: association {packet.association}, model {expected[1]}")
            if packet.data != data:
                problems.append(f"{where}: {len(packet.data)} bytes {packet.data[:16].hex()}..., model {len(data)} "
                                f"bytes {data[:16].hex()}...")
            if packet.length != len(data):
                problems.append(f"{where}: tuser length {packet.length}, model {len(data)}")
            if not packet.uniform_tuser:
                problems.append(f"{where}: tuser changed within the packet")
    return problems


def _compare_counters(counters: dict[str, int], model: ReceiveEngineModel, frame_results: list[FrameResult]) -> list[str]:
    verdicts = [s for r in frame_results for s in r.arrivals]
    expected = {name: getattr(model.counters, name) for name in
                ("frames", "delivered", "exceptions", "ip_checksum_errors", "crc_errors", "tag_errors", "length_errors",
                 "overflow")}
    expected.update({
        "dma_errors": sum(v.dma_error for v in verdicts),
        "acks": sum(len(r.acks) for r in frame_results),
        # The segment counters count placement decisions: a failed write was accepted (dma_errors counts it).
        "segments_accepted": sum(v.status is SegmentStatus.ACCEPTED or v.dma_error for v in verdicts),
        "segments_error": sum(v.status is SegmentStatus.ERROR and not v.dma_error for v in verdicts),
        "segments_dropped": sum(v.status is SegmentStatus.DROPPED for v in verdicts),
        "segments_no_stream": sum(v.status is SegmentStatus.NO_STREAM for v in verdicts),
        "segments_duplicate": sum(v.status is SegmentStatus.DUPLICATE for v in verdicts),
        "segments_invalid_ssn": sum(v.status is SegmentStatus.INVALID_SSN for v in verdicts),
        "chunk_errors": sum(len(r.chunk_faults) for r in frame_results),
        "reports_waiting": model.reports_waiting,
        "reports_discarded": model.reports_discarded,
        "reports_withheld": model.reports_withheld,
    })
    return [f"counter {name} is {counters.get(name)}, model {value}"
            for name, value in expected.items() if counters.get(name) != value]
