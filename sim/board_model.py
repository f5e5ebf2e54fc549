"""A board made of the engines' golden models, behind the control link's calls and an Ethernet port.

`ModelBoard.control` answers what `driver.link.SerialLink` answers (the
register file's ID and PARAMS, table writes, record pops and pushes, host
memory, raw frames, the MAC's counters), from `ReceiveEngineModel` and
`TransmitEngineModel` over one `SparseMemory`; `ModelBoard.port` is the
board's Ethernet as `driver.ethernet.EthernetPort` sees it. Table writes and
records pass through their ABI layouts (`abi`) both ways, so the
backend's encodings meet an independent decoding.

`ModelBoard.serial` is the same board one level down, as a pyserial port:
the bytes `driver.link.SerialLink` writes are taken as the control link's
requests (SLIP, CRC-32, `abi` (the control link), the zero-run coding of
`abi.link`), decoded here, not by the driver's code, executed by
`ModelControl` (a table row as the register file takes it: staging words,
then COMMIT), and answered with the bytes the gateware's link would send
(`hdl/link/link.py`), so the link client's own traffic can be counted
(`rnic perf --backend board`).

`ModelBoard(..., transport=True)` is the board built with the transmit
engine's transport unit (`hdl.rnic.Rnic(transport=True)`; TX_PARAMS says
so): its `tx_transport` row comes over the link like the other rows, the
peer's SACKs go from its receive model to its transmit model inside the board
(the SACK row's `peer_sacks`, `m_axis_peer_sack`), the unit's timers tick on
the board's own clock, its stop records wait on
`TxOutput.TRANSPORT_STOPPED`, and its `messages_started` and
`cumulative_tsn_ack_<row>` registers answer. Every board refuses a push
(FULL) to a request stream whose queue holds `REQUEST_QUEUE_DEPTH` requests
unstarted, as the gateware's queues do. Used to test the `board`
backend's logic without a simulator (tests/driver/test_board_backend.py); the
gateware board is tested in tests/boards/test_board_backend.py.
"""

from __future__ import annotations

import ipaddress
import struct
import time
import zlib
from collections import Counter, deque
from dataclasses import replace

from driver.link import ExceptionPacket, LinkInfo, Polled, SlipFrames, slip_encode
from driver.records import record_bytes, record_fields
from abi.link import (CRC_BYTES, EXCEPTION_HEADER_BYTES, HOLD_BYTES, LINK_MAGIC, LINK_VERSION, MAC_RX_EVENTS,
                      MAC_TX_EVENTS, POLL_BODY_BYTES, REPLAYED_OPS, REQUEST_DATA_BYTES, REQUEST_HEADER_BYTES,
                      RESPONSE_FLAG, ZERO_RUN_RESPONSES, LinkQueue, Op, Status, TxInput, TxOutput, pop_body_bytes,
                      tx_input_bytes, tx_output_bytes, zero_run_decode, zero_run_encode)
from abi.register_file import COMMIT_OFFSET, DEVICE_ID, ID_OFFSET, PARAMS_OFFSET
from abi.rx import (RX_PARAMS, RX_TABLES, STAG_KEY_BITS, check_key_bits, ExceptionSource, ReportKind, ack_bytes, ack_layout,
                    exception_record_layout, register_map, report_bytes, report_layout)
from abi.tx import (TX_PARAMS, TX_REGISTER_BASE, TransportOpcode, completion_layout, control_request_layout,
                    peer_sack_layout, read_response_layout, transport_record_layout, tsn_request_layout,
                    tx_register_map, work_request_layout)
from model.ddp.memory import Access, SparseMemory
from model.engine.config import AssociationEntry, ReceiveConfig, RegionEntry, StreamEntry
from model.engine.rx import FrameAction, ReceiveEngineModel, SegmentVerdict
from model.engine.transport import AssociationFailure
from model.engine.tx import (Completion, ControlOpcode, ControlRequest, ReadResponseRequest, RefusedRead, RefusedTsn,
                             TransmitConfig, TransmitEngineModel, TransportStopped, TsnOpcode, TxAssociationRow,
                             WorkOpcode, WorkRequest, ticks_at)
from model.sctp.packet import SackChunk

ASSOCIATIONS, STREAM_IDS, REGIONS, IRD = 2, 4, 16, 4   # the ECPIX-5 build's engine (hdl.rnic.Rnic)
BUFFERS_PER_QUEUE = 8
MEMORY_BYTES = 64 * 1024
REQUEST_QUEUE_DEPTH = 4
"""Requests each of the transmit engine's request streams holds unstarted (`hdl.tx.engine`'s queues)."""
ADDRESS_REGISTERS = ("local_mac_low", "local_mac_high", "local_ip")
"""The receive engine's configuration words that hold the board's addresses (both engines use them)."""


def _report(verdict: SegmentVerdict) -> bytes:
    error = verdict.error
    return record_bytes(report_layout(), {
        "kind": int(ReportKind.SEGMENT), "status": verdict.status.value, "chunk_error": 0,
        "dma_error": int(verdict.dma_error),
        "error": {"valid": int(error is not None), "layer": error.layer if error else 0,
                  "etype": error.etype if error else 0, "code": error.code if error else 0},
        "association": verdict.association, "stream_id": verdict.stream_id, "tsn": verdict.tsn,
        "ddp_ssn": verdict.ddp_ssn, "tagged": int(verdict.tagged), "last": int(verdict.last),
        "opcode": verdict.opcode, "stag": verdict.stag, "to": verdict.to, "qn": verdict.qn, "msn": verdict.msn,
        "mo": verdict.mo, "invalidate_stag": verdict.invalidate_stag, "payload_length": verdict.payload_length,
        "host_address": verdict.host_address or 0, "message_length": verdict.message_length or 0})


class ModelControl:
    """The control link's calls, answered by the models (see the module docs)."""

    def __init__(self, board: ModelBoard) -> None:
        self.board = board
        self.info = LinkInfo(2, MEMORY_BYTES, 2044)
        self.rx_map = register_map(ASSOCIATIONS, STREAM_IDS, board.regions, board.key_bits)
        self.tx_map = tx_register_map(ASSOCIATIONS, STREAM_IDS, board.transport)
        self._transport_counters = {TX_REGISTER_BASE + offset: name for name, offset in self.tx_map.counters.items()
                                    if name not in ("sacks_sent", "request_frames")}
        self.registers: dict[int, int] = {}
        self._address_offsets = {self.rx_map.config_offset(name) for name in ADDRESS_REGISTERS}
        self._segment_reports_offset = self.rx_map.config_offset("segment_reports")
        self.operations = 0

    def read_register(self, offset: int) -> int:
        self.operations += 1
        if offset == ID_OFFSET:
            return DEVICE_ID
        if offset == PARAMS_OFFSET:
            return RX_PARAMS.pack({"width_bytes": 8, "associations": ASSOCIATIONS,
                                   "stream_ids_log2": STREAM_IDS.bit_length() - 1,
                                   "buffers_log2": BUFFERS_PER_QUEUE.bit_length() - 1,
                                   "key_bits": self.board.key_bits})
        if offset == PARAMS_OFFSET + 4:
            return RX_TABLES.pack({"regions": self.board.regions})
        if offset == TX_REGISTER_BASE + PARAMS_OFFSET:
            return TX_PARAMS.pack({"width_bytes": 8, "ird": IRD, "ring_tsns": 64,
                                   "transport": int(self.board.transport)})
        if offset == self.rx_map.counters["reports_waiting"]:
            return self.board.rx.reports_waiting
        if offset == TX_REGISTER_BASE + self.tx_map.counters["sacks_sent"]:
            return self.board.sacks_sent & 0xFFFFFFFF
        if offset == TX_REGISTER_BASE + self.tx_map.counters["request_frames"]:
            return (self.board.engine_frames - self.board.sacks_sent) & 0xFFFFFFFF
        if offset in self._transport_counters:
            return self._transport_counter(self._transport_counters[offset])
        return self.registers.get(offset, 0)

    def _transport_counter(self, name: str) -> int:
        """`messages_started`, or `cumulative_tsn_ack_<row>`: the row's last TSN retired (0 before its first
        write)."""
        tx = self.board.tx
        if name == "messages_started":
            return tx.messages_started & 0xFFFFFFFF
        row = int(name.removeprefix("cumulative_tsn_ack_"))
        return tx.cumulative_tsn_ack(row) if row in self.board.tx_rows else 0

    def write_register(self, offset: int, value: int) -> None:
        self.operations += 1
        self.registers[offset] = value
        if offset in self._address_offsets:   # the engines' own MAC and IPv4 address, as the gateware takes them
            low, high, ip = (self.registers.get(self.rx_map.config_offset(name), 0) for name in ADDRESS_REGISTERS)
            self.board.set_addresses((high << 32 | low).to_bytes(6, "big"), str(ipaddress.IPv4Address(ip)))
        if offset == self._segment_reports_offset:   # a record per segment, or per message (abi.rx.report_withheld)
            self.board.rx.segment_reports = bool(value & 1)

    def write_table(self, window, fields: dict, *, base: int = 0) -> None:
        self.operations += 1
        self.commit(window, window.encode(fields))

    def commit(self, window, words: list[int]) -> None:
        """A table's row from its staging words, as the engine's table would take it."""
        value = sum(word << (32 * i) for i, word in enumerate(words))
        getattr(self.board, f"_{window.name}")(record_fields(window.layout, value))

    def read_memory(self, address: int, length: int) -> bytes:
        self.operations += 1
        assert 0 <= address and address + length <= MEMORY_BYTES
        return self.board.memory.read(address, length)

    def write_memory(self, address: int, data: bytes) -> None:
        self.operations += 1
        assert 0 <= address and address + len(data) <= MEMORY_BYTES
        self.board.memory.write(address, data)

    def _pop(self, queue: deque, record_bytes: int, limit: int) -> list:
        """As many records as wait and fit in `limit` bytes and the hold RAM (`abi.link.pop_body_bytes`), one
        at least."""
        self.operations += 1
        records = []
        while queue and (not records or pop_body_bytes(record_bytes, len(records) + 1) <= min(limit, HOLD_BYTES)):
            records.append(queue.popleft())
        return records

    def pop_reports(self, limit: int = 0) -> list[bytes]:
        return self._pop(self.board.reports, report_bytes(), limit)

    def pop_acks(self, limit: int = 0) -> list[bytes]:
        return self._pop(self.board.acks, ack_bytes(), limit)

    def pop_records(self, output: TxOutput, limit: int = 0) -> list[bytes]:
        output = TxOutput(output)
        return self._pop(self.board.tx_records[output], tx_output_bytes()[output], limit)

    def pop_report(self) -> bytes | None:
        return next(iter(self.pop_reports()), None)

    def pop_ack(self) -> bytes | None:
        return next(iter(self.pop_acks()), None)

    def pop_record(self, output: TxOutput) -> bytes | None:
        return next(iter(self.pop_records(output)), None)

    def pop_exceptions(self, limit: int = 0) -> list[ExceptionPacket]:
        """The first packet waiting, then the next while one waits and fits whole, by its record's length, in
        `limit` bytes and the hold RAM (`abi.link.Op.POP_EXCEPTION`; packets here are never cut)."""
        self.operations += 1
        queue, packets, used = self.board.exceptions, [], 0
        while queue:
            length = record_fields(exception_record_layout(), queue[0].record)["length"]
            end = used + EXCEPTION_HEADER_BYTES + length
            if packets and end > min(limit, HOLD_BYTES):
                break
            packets.append(queue.popleft())
            used = end + (-end % 8)
        return packets

    def pop_exception(self) -> ExceptionPacket | None:
        return next(iter(self.pop_exceptions()), None)

    def poll(self, register: int = 0, limit: int = 0) -> Polled:
        """The streams holding a record, the register's word, and with a `limit` that holds those 8 bytes and a
        report, the reports that fit behind them (`abi.link.Op.POLL`)."""
        self.operations += 1
        board = self.board
        waiting = LinkQueue(0)
        for flag, queue in ((LinkQueue.REPORT, board.reports), (LinkQueue.ACK, board.acks),
                            (LinkQueue.EXCEPTION, board.exceptions),
                            (LinkQueue.COMPLETION, board.tx_records[TxOutput.COMPLETION]),
                            (LinkQueue.TSN_REFUSED, board.tx_records[TxOutput.TSN_REFUSED]),
                            (LinkQueue.READ_RESPONSE_REFUSED, board.tx_records[TxOutput.READ_RESPONSE_REFUSED]),
                            (LinkQueue.TRANSPORT_STOPPED, board.tx_records[TxOutput.TRANSPORT_STOPPED])):
            if queue:
                waiting |= flag
        self.operations -= 1    # the register's read is this request's
        word = self.read_register(register)
        reports: list[bytes] = []
        if POLL_BODY_BYTES + report_bytes() <= limit and board.reports:
            reports = self.pop_reports(min(limit, HOLD_BYTES) - POLL_BODY_BYTES)
            self.operations -= 1   # the pop is this request's too
        return Polled(waiting, word, tuple(reports))

    def push_record(self, stream: TxInput, record: bytes) -> bool:
        """False (the link's FULL, nothing pushed) when the stream has no room."""
        self.operations += 1
        assert len(record) == tx_input_bytes()[stream]
        return self.board.push(TxInput(stream), int.from_bytes(record, "little"))

    def send_frame(self, frame: bytes) -> None:
        self.operations += 1
        self.board.wire.append(bytes(frame))
        self.board.tx_frames += 1

    def mac_counters(self) -> dict[str, int]:
        self.operations += 1
        counters = dict.fromkeys(MAC_RX_EVENTS + MAC_TX_EVENTS, 0)
        counters.update(rx_frames=self.board.rx_frames, tx_frames=self.board.tx_frames)
        return counters


class ModelSerial:
    """The board's UART as a pyserial port on the computer (`write`, `flush`, `read`, `in_waiting`, `timeout`):
    each request written is executed at once and its response waits to be read (see the module docs). A
    request whose CRC does not match is dropped, as the gateware drops it; a retry of the last request of a
    replayed op (`abi.link.REPLAYED_OPS`) is answered again without being executed."""

    def __init__(self, board: ModelBoard) -> None:
        self.board, self.control = board, board.control
        self.timeout: float | None = None
        self._requests = SlipFrames()
        self._out = bytearray()
        self._last: tuple[int, int, bytes] | None = None   # seq, op, the response's bytes
        self._staging: dict[int, list[int]] = {}             # a table's staging words, by its window's address
        self._windows = {}
        for base, registers in ((0, board.control.rx_map), (TX_REGISTER_BASE, board.control.tx_map)):
            for window in registers.tables.values():
                self._windows[base + window.base] = window
                self._staging[base + window.base] = [0] * window.words

    # -- pyserial -------------------------------------------------------------------------------------

    def write(self, data: bytes) -> int:
        for frame in self._requests.feed(data):
            if frame is not None:  # a bad escape: dropped, as the gateware drops it
                self._out += self._answer(frame)
        return len(data)

    def flush(self) -> None:
        pass

    @property
    def in_waiting(self) -> int:
        return len(self._out)

    def read(self, size: int = 1) -> bytes:
        data = bytes(self._out[:size])
        del self._out[:size]
        return data

    def close(self) -> None:
        pass

    # -- the requests ---------------------------------------------------------------------------------

    def _answer(self, frame: bytes) -> bytes:
        if len(frame) < REQUEST_HEADER_BYTES + CRC_BYTES:
            return b""
        request, (crc,) = frame[:-CRC_BYTES], struct.unpack("<I", frame[-CRC_BYTES:])
        if zlib.crc32(request) != crc:
            return b""
        seq, op, address, length = struct.unpack_from("<BBIH", request)
        data = request[REQUEST_HEADER_BYTES:]
        if self._last is not None and self._last[:2] == (seq, op) and op in REPLAYED_OPS:
            return self._last[2]
        status, body = self._execute(op, address, length, data)
        if op in ZERO_RUN_RESPONSES:   # the body as the gateware sends it: zero-run coded (abi.link)
            body = zero_run_encode(body)
        response = bytes([seq, op | RESPONSE_FLAG, status]) + body
        wire = slip_encode(response + struct.pack("<I", zlib.crc32(response)))
        self._last = (seq, op, wire)
        return wire

    def _execute(self, op: int, address: int, length: int, data: bytes) -> tuple[int, bytes]:
        control = self.control
        if op == Op.PING:
            return Status.OK, (LINK_MAGIC + bytes([LINK_VERSION, MEMORY_BYTES.bit_length() - 1])
                               + REQUEST_DATA_BYTES.to_bytes(2, "little"))
        if op == Op.REG_READ:
            if address - COMMIT_OFFSET in self._windows:
                return Status.OK, bytes(4)   # COMMIT reads 0: the row was taken when it was written
            return Status.OK, struct.pack("<I", control.read_register(address))
        if op in (Op.REG_WRITE, Op.REG_WRITE_WAIT):
            if len(data) != 4:
                return Status.BAD_REQUEST, b""
            (value,) = struct.unpack("<I", data)
            window_base = address - COMMIT_OFFSET
            staged = next(((base, (address - base) // 4) for base, window in self._windows.items()
                           if base <= address < base + 4 * window.words), None)
            if window_base in self._windows:
                control.operations += 1
                control.commit(self._windows[window_base], self._staging[window_base])
            elif staged is not None:
                self._staging[staged[0]][staged[1]] = value
            else:
                control.write_register(address, value)
            if op == Op.REG_WRITE_WAIT:   # read back as the link reads it: a COMMIT reads 0 (the row taken),
                # a staging word what was written
                word = (0 if window_base in self._windows else value if staged is not None
                        else control.read_register(address))
                return (Status.PENDING if word else Status.OK), b""
            return Status.OK, b""
        if op in (Op.MEM_READ, Op.MEM_WRITE):
            size = length if op == Op.MEM_READ else len(data)
            if address + size > MEMORY_BYTES:
                return Status.BAD_ADDRESS, b""
            if op == Op.MEM_READ:
                return Status.OK, control.read_memory(address, length)
            control.write_memory(address, data)
            return Status.OK, b""
        if op in (Op.POP_REPORT, Op.POP_ACK, Op.POP_RECORD):
            if data or (op == Op.POP_RECORD and address not in TxOutput._value2member_map_):
                return Status.BAD_REQUEST, b""
            records = (control.pop_reports(length) if op == Op.POP_REPORT else control.pop_acks(length)
                       if op == Op.POP_ACK else control.pop_records(TxOutput(address), length))
            # Each record but the last padded to whole 8-byte words (abi.link.pop_body_bytes).
            body = b"".join(record + bytes(-len(record) % 8) for record in records[:-1]) + b"".join(records[-1:])
            return (Status.OK, body) if records else (Status.EMPTY, b"")
        if op == Op.POLL:
            if data:
                return Status.BAD_REQUEST, b""
            polled = control.poll(address, length)
            records = polled.reports
            body = (struct.pack("<II", polled.waiting, polled.word)
                    + b"".join(record + bytes(-len(record) % 8) for record in records[:-1]) + b"".join(records[-1:]))
            return Status.OK, body
        if op == Op.POP_EXCEPTION:
            if data:
                return Status.BAD_REQUEST, b""
            packets = control.pop_exceptions(length)
            if not packets:
                return Status.EMPTY, b""
            parts = [struct.pack("<IHBB", packet.record, len(packet.data), int(packet.truncated), 0) + packet.data
                     for packet in packets]
            return Status.OK, b"".join(part + bytes(-len(part) % 8) for part in parts[:-1]) + parts[-1]
        if op == Op.SEND_FRAME:
            control.send_frame(data)
            return Status.OK, b""
        if op == Op.MAC_COUNTERS:
            counters = control.mac_counters()
            names = MAC_RX_EVENTS + MAC_TX_EVENTS
            return Status.OK, struct.pack(f"<{len(names)}I", *(counters[name] for name in names))
        if op == Op.PUSH_RECORD:   # its data zero-run coded (abi.link): one record of the stream decoded
            try:
                data = zero_run_decode(data)
            except ValueError:
                return Status.BAD_REQUEST, b""
            if address not in TxInput._value2member_map_ or len(data) != tx_input_bytes()[TxInput(address)]:
                return Status.BAD_REQUEST, b""
            pushed = control.push_record(TxInput(address), data)
            return (Status.OK if pushed else Status.FULL), b""
        return Status.BAD_REQUEST, b""


class ModelPort:
    """The board's Ethernet as `driver.ethernet.EthernetPort` (the computer's end of the cable)."""

    def __init__(self, board: ModelBoard) -> None:
        self.board = board

    def send(self, frame: bytes) -> None:
        self.board.receive(frame)

    def receive(self) -> list[bytes]:
        self.board.send_engine_frames()
        frames, self.board.wire = self.board.wire, []
        return frames

    def close(self) -> None:
        pass


class ModelBoard:
    """The board (see the module docs), at 02:00:00:00:00:01 / 10.0.0.1 as the backend configures it."""

    def __init__(self, local_mac: bytes, local_ip: str, clock=time.monotonic, *, regions: int = REGIONS,
                 key_bits: int = STAG_KEY_BITS, transport: bool = False) -> None:
        check_key_bits(key_bits, regions)
        self.regions, self.key_bits, self.transport = regions, key_bits, transport
        """The region rows and STag key width of the engine it stands for (`hdl.rnic.Rnic`'s), in its PARAMS words."""
        self.clock, self.started = clock, clock()
        self.memory = SparseMemory()
        self.rx = ReceiveEngineModel(ReceiveConfig(local_mac, local_ip, key_bits=key_bits), self.memory)
        self.tx = TransmitEngineModel(TransmitConfig(local_mac, local_ip, associations=ASSOCIATIONS,
                                                     stream_ids=STREAM_IDS, ird=IRD), self.memory)
        self.reports: deque[bytes] = deque()
        self.acks: deque[bytes] = deque()
        self.exceptions: deque[ExceptionPacket] = deque()
        self.tx_records: dict[TxOutput, deque[bytes]] = {output: deque() for output in TxOutput}
        self.wire: list[bytes] = []
        self.rx_frames = self.tx_frames = self.sacks_sent = self.engine_frames = 0
        self.tx_rows: set[int] = set()   # the transmit engine's association rows written
        self.pushed: Counter[TxInput] = Counter()   # records taken, by request stream
        self.control = ModelControl(self)
        self.port = ModelPort(self)
        self.serial = ModelSerial(self)

    # -- the wire --------------------------------------------------------------------------------

    @staticmethod
    def _exception(source: ExceptionSource, packet: bytes) -> ExceptionPacket:
        """A packet for the host with its record (`abi.rx.exception_record_layout`: source and length)."""
        record = record_fields(exception_record_layout(), 0) | {"source": int(source), "length": len(packet)}
        return ExceptionPacket(int.from_bytes(record_bytes(exception_record_layout(), record), "little"),
                               packet, False)

    def set_addresses(self, local_mac: bytes, local_ip: str) -> None:
        """The board's own MAC and IPv4 address, as the host writes them: what the receive engine takes frames
        for, and the transmit engine's source addresses."""
        self.rx.set_addresses(local_mac, local_ip)
        self.tx.config = replace(self.tx.config, local_mac=local_mac, local_ip=local_ip)

    def now(self) -> float:
        """Seconds since the board started: the receive engine's timer (its delayed SACKs)."""
        return self.clock() - self.started

    def _post_sacks(self) -> None:
        """The acknowledgement unit's SACKs to the transmit engine (`m_axis_sack` to `s_axis_sack`)."""
        for record in self.rx.next_sacks():
            self.tx.post_sack(record)
            self.sacks_sent += 1

    def receive(self, frame: bytes) -> None:
        self.rx_frames += 1
        self.rx.receive(frame, self.now())
        (result,) = self.rx.next_events()
        self._post_sacks()
        for peer_sack in result.peer_sacks:   # m_axis_peer_sack to s_axis_peer_sack (RFC 4960 6.2.1)
            self.tx.take_peer_sack(peer_sack.association, peer_sack.sack, ticks_at(self.now()))
        if result.action is FrameAction.EXCEPTION:
            self.exceptions.append(self._exception(ExceptionSource.FRAME, frame))
            return
        for chunk in result.chunks_to_host:
            self.exceptions.append(self._exception(ExceptionSource.CHUNK, chunk.chunk))
        for ack in result.acks:
            self.acks.append(record_bytes(ack_layout(), {"association": ack.association,
                                                         "disposition": int(ack.disposition),
                                                         "tsn": ack.tsn, "length": ack.length,
                                                         "packet_end": int(ack.packet_end),
                                                         "immediate": int(ack.immediate)}))
        for fault in result.chunk_faults:
            self.reports.append(record_bytes(report_layout(), {"kind": int(ReportKind.CHUNK_ERROR),
                                                               "chunk_error": int(fault.kind), "tsn": fault.tsn,
                                                               "association": fault.association}))
        self.reports.extend(_report(verdict) for verdict in result.segments)

    def send_engine_frames(self) -> None:
        now = self.now()
        self.rx.handle_timeout(now)
        self._post_sacks()
        if self.transport:   # the transport unit's timers on the board's clock (RFC 4960 6.3.3)
            self.tx.tick(ticks_at(now))
        frames = self.tx.data_to_send(now=ticks_at(now))
        self.tx_frames += len(frames)
        self.engine_frames += len(frames)
        self.wire += frames
        for event in self.tx.next_events():
            if isinstance(event, Completion):
                self.tx_records[TxOutput.COMPLETION].append(record_bytes(completion_layout(), {
                    "wr_id": event.wr_id, "opcode": event.opcode, "association": event.association,
                    "status": int(event.status)}))
            elif isinstance(event, TransportStopped):
                self.tx_records[TxOutput.TRANSPORT_STOPPED].append(self._stopped_record(event))
            elif isinstance(event, RefusedRead):
                self.tx_records[TxOutput.READ_RESPONSE_REFUSED].append(
                    record_bytes(read_response_layout(), vars(event.request)))
            else:
                assert isinstance(event, RefusedTsn)
                self.tx_records[TxOutput.TSN_REFUSED].append(record_bytes(tsn_request_layout(), {
                    "opcode": int(event.opcode), "association": event.association, "tsn": event.tsn}))

    @staticmethod
    def _stopped_record(event: TransportStopped) -> bytes:
        """`abi.tx.transport_record_layout`: FAILURE (RFC 4960 8.1) or VIOLATION."""
        record = event.record
        failure = isinstance(record, AssociationFailure)
        return record_bytes(transport_record_layout(), {
            "opcode": TransportOpcode.FAILURE if failure else TransportOpcode.VIOLATION,
            "association": record.association, "tsn": record.highest_tsn_sent,
            "first_tsn": record.cumulative_tsn_ack, "cause": 0, "error_count": record.error_count if failure else 0})

    # -- tables -------------------------------------------------------------------------------

    def _association(self, f: dict) -> None:
        entry = AssociationEntry(f["index"], f["local_port"], f["peer_port"], str(ipaddress.IPv4Address(f["peer_ip"])),
                                 f["tag"], bool(f["ddp"]))
        self.rx.write_association(entry, bool(f["valid"]))

    def _region(self, f: dict) -> None:
        e = f["entry"]
        if not e["valid"]:
            self.rx.write_region(f["index"], None)
            return
        access = ((Access.REMOTE_READ if e["remote_read"] else Access(0))
                  | (Access.REMOTE_WRITE if e["remote_write"] else Access(0))
                  | (Access.LOCAL_WRITE if e["local_write"] else Access(0)))
        stream = (e["association"], e["stream_id"]) if e["stream_bound"] else None
        stag = f["index"] << self.key_bits | e["key"]
        self.rx.write_region(f["index"], RegionEntry(stag, e["pd"], e["base_to"], e["length"], access,
                                                     e["host_address"], stream))

    def _stream(self, f: dict) -> None:
        association, stream_id = divmod(f["index"], STREAM_IDS)
        entry = StreamEntry(association, stream_id, f["entry"]["pd"], f["first_ssn"])
        self.rx.write_stream(entry, bool(f["entry"]["valid"]))

    def _buffer(self, f: dict) -> None:
        association, stream_id = divmod(f["stream"], STREAM_IDS)
        self.rx.post_buffer(association, stream_id, f["qn"], f["address"], f["length"])

    def _revoke(self, f: dict) -> None:
        assert f["whole_queue"]
        association, stream_id = divmod(f["stream"], STREAM_IDS)
        self.rx.reset_queue(association, stream_id, f["qn"])

    def _sack(self, f: dict) -> None:
        if f["flush"]:
            self.rx.flush_sack(f["association"])
            self._post_sacks()
            return
        self.rx.write_sack(f["association"], f["cumulative_tsn"], f["delay"], f["window"], f["held_bytes"],
                           bool(f["enabled"]), peer_sacks=self.transport and bool(f["peer_sacks"]))

    def _tx_association(self, f: dict) -> None:
        self.tx.write_association(TxAssociationRow(
            f["index"], f["peer_mac"].to_bytes(6, "big"), str(ipaddress.IPv4Address(f["peer_ip"])), f["local_port"],
            f["peer_port"], f["tag"], f["mulpdu"], f["next_tsn"], bool(f["udp"]), f["peer_udp_port"]))
        self.tx_rows.add(f["index"])

    def _tx_transport(self, f: dict) -> None:
        """The transport unit takes the row (RFC 4960 6.2.1 A, 7.2.1, 15), from the engine's next TSN."""
        parameters = {name: f[name] for name in ("mtu", "chunk_bytes", "rto_initial", "rto_min", "rto_max",
                                                 "max_retrans", "max_burst")}
        self.tx.write_transport(f["association"], f["peer_a_rwnd"], **parameters)

    def _tx_stream(self, f: dict) -> None:
        association, stream_id = divmod(f["index"], STREAM_IDS)
        self.tx.write_stream(association, stream_id, f["first_ssn"])

    def push(self, stream: TxInput, value: int) -> bool:
        """A record to the transmit engine's stream; False, nothing taken, when the stream has no room."""
        if not self._room(stream):
            return False
        self.pushed[stream] += 1
        if stream is TxInput.WORK:
            f = record_fields(work_request_layout(), value)
            self.tx.post_work(WorkRequest(**{**f, "opcode": WorkOpcode(f["opcode"])}))
        elif stream is TxInput.READ_RESPONSE:
            self.tx.post_read_response(ReadResponseRequest(**record_fields(read_response_layout(), value)))
        elif stream is TxInput.CONTROL:
            f = record_fields(control_request_layout(), value)
            self.tx.post_control(ControlRequest(**{**f, "opcode": ControlOpcode(f["opcode"])}))
        elif stream is TxInput.PEER_SACK:
            self._peer_sack(record_fields(peer_sack_layout(), value))
        else:
            f = record_fields(tsn_request_layout(), value)
            self.tx.tsn_request(TsnOpcode(f["opcode"]), f["association"], f["tsn"])
        self.send_engine_frames()
        return True

    def _room(self, stream: TxInput) -> bool:
        """The request queues hold `REQUEST_QUEUE_DEPTH` requests unstarted each; without the transport unit
        `s_axis_peer_sack` is not there and never takes a record."""
        if stream is TxInput.PEER_SACK:
            return self.transport
        controls, responses, works = self.tx.unstarted()
        waiting = {TxInput.WORK: works, TxInput.READ_RESPONSE: responses, TxInput.CONTROL: controls}
        return waiting.get(stream, 0) < REQUEST_QUEUE_DEPTH

    def _peer_sack(self, f: dict) -> None:
        """The host's record for the transport unit: a SHUTDOWN's Cumulative TSN Ack (RFC 4960 9.2), or a SACK
        chunk with its first Gap Ack Blocks and as many Duplicate TSNs as it counted (the unit reads no more)."""
        now = ticks_at(self.now())
        if f["shutdown"]:
            self.tx.peer_shutdown(f["association"], f["cumulative_tsn_ack"], now)
            return
        gaps = tuple((gap["start"], gap["end"]) for gap in f["gaps"][:min(f["gap_count"], len(f["gaps"]))])
        sack = SackChunk(f["cumulative_tsn_ack"], f["a_rwnd"], gaps, (0,) * f["duplicate_count"])
        self.tx.peer_sack(f["association"], sack, now)
