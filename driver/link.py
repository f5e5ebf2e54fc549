"""The host's end of the board's control link (docs/architecture/control-link.md): framed, checksummed requests over a UART.

The protocol (:mod:`abi.link`): SLIP frames (RFC 1055), a CRC-32
(``zlib.crc32``) at the end of each, a sequence number per request. Every
request waits for its response; a response that does not come within its
time, or comes with a bad CRC, makes the request go again with the same
sequence number, which the board recognizes: a retried write or pop is
answered from its first execution, never done twice.

Records go zero-run coded (``abi.link.zero_run_encode``, link version 7): the
client codes a pushed record and decodes a pop's or a POLL's body; a board of
another link version is refused at its PING.

The code is sans-I/O: :class:`LinkClient`'s operations are generators that
yield :class:`Send` and :class:`Receive` actions and take back what the
transport did. :class:`SerialLink` runs them on a pyserial port (or anything
with ``write``, ``read``, ``in_waiting`` and ``timeout``); :class:`AsyncLink`
on an asynchronous transport (a simulated UART, in the tests)::

    link = open_serial_link("/dev/ttyUSB1", 3_000_000)   # serial.Serial, then a PING
    link.write_register(0x010, 0x00000002)
    records = link.pop_reports(1024)   # every report waiting, up to 1024 bytes of them
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

from driver.errors import DriverError
from abi.link import (CRC_BYTES, END, ESC, ESC_END, ESC_ESC, EXCEPTION_HEADER_BYTES, LINK_MAGIC, LINK_VERSION,
                      MAC_RX_EVENTS, MAC_TX_EVENTS, MAX_READ_BYTES, PING_BODY_BYTES, POLL_BODY_BYTES,
                      REQUEST_DATA_BYTES, RESPONSE_FLAG, RESPONSE_HEADER_BYTES, LinkQueue, Op, Status, TxInput,
                      TxOutput, tx_input_bytes, tx_output_bytes, zero_run_decode, zero_run_encode)
from abi.rx import ack_bytes, report_bytes

__all__ = ["LinkError", "LinkTimeout", "LinkStatusError", "Send", "Receive", "LinkInfo", "ExceptionPacket",
           "Exchanged", "Polled", "slip_encode", "SlipFrames", "encode_request", "Response", "decode_response", "LinkClient",
           "SerialLink", "AsyncLink", "open_serial_link", "MAC_COUNTER_NAMES"]

#: The MAC's counters in the order MAC_COUNTERS answers them.
MAC_COUNTER_NAMES = MAC_RX_EVENTS + MAC_TX_EVENTS
#: Bytes a memory read or write moves per request.
CHUNK_BYTES = 1024


class LinkError(DriverError):
    """The control link failed."""


class LinkTimeout(LinkError):
    """No good response after every retry."""


class LinkStatusError(LinkError):
    """The board refused a request (its status is not OK)."""

    def __init__(self, op: Op, status: int):
        self.op, self.status = op, status
        name = Status(status).name if status in Status._value2member_map_ else f"status {status}"
        super().__init__(f"{op.name}: {name}")


# Framing.
def slip_encode(frame: bytes) -> bytes:
    """``END``, the frame with ``END`` and ``ESC`` escaped, ``END`` (RFC 1055)."""
    escaped = frame.replace(bytes([ESC]), bytes([ESC, ESC_ESC])).replace(bytes([END]), bytes([ESC, ESC_END]))
    return bytes([END]) + escaped + bytes([END])


class SlipFrames:
    """Decodes a byte stream into frames; a frame with a bad escape comes out as None, empty frames not at all."""

    def __init__(self) -> None:
        self._frame = bytearray()
        self._escaped = False
        self._bad = False

    def feed(self, data: bytes) -> list[bytes | None]:
        frames: list[bytes | None] = []
        for byte in data:
            if byte == END:
                if self._frame or self._bad:
                    frames.append(None if self._bad or self._escaped else bytes(self._frame))
                self._frame.clear()
                self._escaped = self._bad = False
            elif self._escaped:
                self._escaped = False
                if byte in (ESC_END, ESC_ESC):
                    self._frame.append(END if byte == ESC_END else ESC)
                else:
                    self._bad = True
            elif byte == ESC:
                self._escaped = True
            else:
                self._frame.append(byte)
        return frames


def _with_crc(frame: bytes) -> bytes:
    return frame + struct.pack("<I", zlib.crc32(frame))


def encode_request(seq: int, op: Op, address: int = 0, length: int = 0, data: bytes = b"") -> bytes:
    """A request as it goes on the wire."""
    return slip_encode(_with_crc(struct.pack("<BBIH", seq, op, address, length) + data))


@dataclass(frozen=True)
class Response:
    seq: int
    op: int
    status: int
    body: bytes


def decode_response(frame: bytes) -> Response | None:
    """A response frame, or None if it is too short or its CRC does not match."""
    if len(frame) < RESPONSE_HEADER_BYTES + CRC_BYTES:
        return None
    payload, (checksum,) = frame[:-CRC_BYTES], struct.unpack("<I", frame[-CRC_BYTES:])
    if zlib.crc32(payload) != checksum:
        return None
    return Response(payload[0], payload[1], payload[2], payload[3:])


def _decoded(op: Op, body: bytes) -> bytes:
    """A response body as the board held it, before its zero-run coding (``abi.link.zero_run_encode``)."""
    try:
        return zero_run_decode(body)
    except ValueError as error:
        raise LinkError(f"{op.name}: the body's zero-run coding: {error}") from None


# The sans-I/O client.
@dataclass(frozen=True)
class Send:
    """Write these bytes to the UART; done once they left (pyserial's ``flush``)."""
    data: bytes


@dataclass(frozen=True)
class Receive:
    """Return what arrives within ``timeout`` seconds: at least one byte, or b"" if none came."""
    timeout: float


Exchange = Generator[Send | Receive, Any, Any]


@dataclass(frozen=True)
class LinkInfo:
    version: int
    memory_bytes: int
    request_data_bytes: int


@dataclass(frozen=True)
class ExceptionPacket:
    record: int        # abi.rx.exception_record_layout() bits
    data: bytes        # the packet (a frame or a chunk), as much as the board kept
    truncated: bool    # the packet was longer than the board's buffer


@dataclass(frozen=True)
class Polled:
    """What a POLL answered: the streams holding a record, and the word of the register it named; with a
    ``limit`` (:meth:`LinkClient.poll`), the report records it popped behind them."""
    waiting: LinkQueue
    word: int
    reports: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Exchanged:
    """One request as it went over the UART, every attempt counted: what :attr:`LinkClient.observe` is given."""
    op: Op
    address: int
    length: int
    """The host-memory bytes a MEM_READ asked for; for every other op the bytes of the request's data."""
    sent: int
    """Bytes written to the UART (the SLIP-framed request, once per attempt)."""
    received: int
    """Bytes read from the UART while waiting for the response (every attempt's)."""


class LinkClient:
    """The operations of the link as generators of transport actions (see the module docs).

    ``baud`` sizes the waits: a request's own bytes, then ``latency`` seconds
    (USB, the host's scheduler) for the response to start and between its
    bytes. ``retries``: attempts after the first. ``observe``, if set, is
    given every request's :class:`Exchanged` once it is answered or has
    failed (``rnic perf --backend board`` counts the link's traffic with it).
    """

    def __init__(self, *, baud: float, latency: float = 0.05, retries: int = 8, seed: int | None = None):
        self.baud, self.latency, self.retries = baud, latency, retries
        self._seq = random.Random(seed).randrange(256)
        self.retried = 0  # attempts repeated so far, for the curious
        self.observe: Callable[[Exchanged], None] | None = None
        self._staged: dict[int, list[int]] = {}   # a table's staging words as last written, by their address

    def _wire_seconds(self, size: int) -> float:
        return 10 * size / self.baud

    def call(self, op: Op, address: int = 0, length: int = 0, data: bytes = b"") -> Exchange:
        """One request until its response: the response, whatever its status. ``data`` and the response's body
        are as on the wire (zero-run coded for the ops of ``abi.link.ZERO_RUN_RESPONSES`` and PUSH_RECORD)."""
        if len(data) > REQUEST_DATA_BYTES:
            raise ValueError(f"{len(data)} bytes of data: a request carries at most {REQUEST_DATA_BYTES}")
        self._seq = (self._seq + 1) % 256
        seq = self._seq
        wire = encode_request(seq, op, address, length, data)
        sent = received = 0
        for attempt in range(self.retries + 1):
            if attempt:
                self.retried += 1
            frames = SlipFrames()
            yield Send(wire)
            sent += len(wire)
            wait = self._wire_seconds(len(wire)) + self.latency
            answered = False
            while not answered:
                chunk = yield Receive(wait)
                if not chunk:
                    break
                received += len(chunk)
                wait = self.latency
                for frame in frames.feed(chunk):
                    response = decode_response(frame) if frame is not None else None
                    if response is not None and response.seq == seq and response.op == op | RESPONSE_FLAG:
                        self._observed(op, address, length if op == Op.MEM_READ else len(data), sent, received)
                        return response
                    answered = True  # a damaged or stray frame: the board is done with this attempt
        self._observed(op, address, length if op == Op.MEM_READ else len(data), sent, received)
        raise LinkTimeout(f"{op.name}: no good response after {self.retries + 1} attempts")

    def _observed(self, op: Op, address: int, length: int, sent: int, received: int) -> None:
        if self.observe is not None:
            self.observe(Exchanged(Op(op), address, length, sent, received))

    def _ok(self, op: Op, address: int = 0, length: int = 0, data: bytes = b"") -> Exchange:
        response = yield from self.call(op, address, length, data)
        if response.status != Status.OK:
            raise LinkStatusError(op, response.status)
        return response.body

    def ping(self) -> Exchange:
        """The board's link parameters; also makes the board forget the last request it executed."""
        body = yield from self._ok(Op.PING)
        self._staged.clear()   # the board may have been reset: its staging words are no longer known
        if len(body) != PING_BODY_BYTES or body[:4] != LINK_MAGIC:
            raise LinkError(f"PING: not a control link ({body.hex()})")
        if body[4] != LINK_VERSION:
            raise LinkError(f"PING: the board's control link is version {body[4]}, this host's {LINK_VERSION}: "
                            "load a bitstream built from this tree")
        return LinkInfo(body[4], 1 << body[5], int.from_bytes(body[6:8], "little"))

    def read_register(self, offset: int) -> Exchange:
        body = yield from self._ok(Op.REG_READ, offset)
        return int.from_bytes(body, "little")

    def write_register(self, offset: int, value: int) -> Exchange:
        yield from self._ok(Op.REG_WRITE, offset, data=struct.pack("<I", value))

    def write_register_wait(self, offset: int, value: int) -> Exchange:
        """REG_WRITE_WAIT: the word written, then read back until it reads 0; True when it did within the
        board's ``abi.link.WAIT_READS`` reads, False when it still did not (the write was made)."""
        response = yield from self.call(Op.REG_WRITE_WAIT, offset, data=struct.pack("<I", value))
        if response.status not in (Status.OK, Status.PENDING):
            raise LinkStatusError(Op.REG_WRITE_WAIT, response.status)
        return response.status == Status.OK

    def write_table(self, window, fields: dict, *, base: int = 0, polls: int = 100) -> Exchange:
        """A row of an engine table (``hdl.bus.register_file.TableWindow``) of the register map at ``base``
        (``abi.tx.TX_REGISTER_BASE`` for the transmit engine's): staged, committed, taken. The register file
        keeps a table's staging words after a commit, so only the words that differ from the row written
        before are written (all of them after a PING, or after a write that failed). The commit is a
        REG_WRITE_WAIT, which answers once the table took the row: a row whose words are all known costs
        one request; only a table that holds the row longer (a receive queue with no free slot) is polled."""
        address, words = base + window.base, window.encode(fields)
        known = self._staged.pop(address, None)
        for index, word in enumerate(words):
            if known is None or known[index] != word:
                yield from self.write_register(address + 4 * index, word)
        self._staged[address] = words
        if (yield from self.write_register_wait(base + window.commit, 1)):
            return
        for _ in range(polls):  # COMMIT reads 1 until the table took the write
            if not (yield from self.read_register(base + window.commit)):
                return
        raise LinkError(f"table {window.name}: the write was never taken")

    def read_memory(self, address: int, length: int) -> Exchange:
        data = bytearray()
        while len(data) < length:
            size = min(CHUNK_BYTES, length - len(data), MAX_READ_BYTES)
            data += yield from self._ok(Op.MEM_READ, address + len(data), size)
        return bytes(data)

    def write_memory(self, address: int, data: bytes) -> Exchange:
        for offset in range(0, len(data), CHUNK_BYTES):
            yield from self._ok(Op.MEM_WRITE, address + offset, data=data[offset:offset + CHUNK_BYTES])

    def _pop(self, op: Op, record_bytes: int, address: int = 0, limit: int = 0) -> Exchange:
        """The records a pop took (`abi.link.pop_body_bytes`: as many as wait and fit in ``limit`` bytes, one
        at least), [] if none waited."""
        response = yield from self.call(op, address, limit)
        if response.status == Status.EMPTY:
            return []
        if response.status != Status.OK:
            raise LinkStatusError(op, response.status)
        body, stride = _decoded(op, response.body), (record_bytes + 7) // 8 * 8
        if len(body) < record_bytes or (len(body) - record_bytes) % stride or len(body) > max(limit, record_bytes):
            raise LinkError(f"{op.name}: a body of {len(body)} bytes is no run of {record_bytes}-byte records"
                            f" within {limit} bytes")
        return [body[offset:offset + record_bytes] for offset in range(0, len(body), stride)]

    def pop_reports(self, limit: int = 0) -> Exchange:
        """Report records' bytes (``abi.rx.report_layout``) in one request: as many as wait and fit in
        ``limit`` bytes (one at least), [] if none waits."""
        return (yield from self._pop(Op.POP_REPORT, report_bytes(), limit=limit))

    def pop_acks(self, limit: int = 0) -> Exchange:
        """Ack records' bytes (``abi.rx.ack_layout``) in one request, as :meth:`pop_reports`."""
        return (yield from self._pop(Op.POP_ACK, ack_bytes(), limit=limit))

    def pop_report(self) -> Exchange:
        """The next report record's bytes (``abi.rx.report_layout``), or None."""
        records = yield from self.pop_reports()
        return records[0] if records else None

    def pop_ack(self) -> Exchange:
        """The next ack record's bytes (``abi.rx.ack_layout``), or None."""
        records = yield from self.pop_acks()
        return records[0] if records else None

    def poll(self, register: int = 0, limit: int = 0) -> Exchange:
        """In one request, the record streams that hold a record and the word of the register at offset
        ``register`` (read as REG_READ reads it), and, with a ``limit`` that holds those 8 bytes and a report,
        the reports waiting that fit behind them in ``limit`` bytes (``abi.link.Op.POLL``): a :class:`Polled`.
        Its flags are those before the pop: REPORT set and the body full means more may wait."""
        body = _decoded(Op.POLL, (yield from self._ok(Op.POLL, register, limit)))
        record_bytes = report_bytes()
        stride = (record_bytes + 7) // 8 * 8
        rest = len(body) - POLL_BODY_BYTES
        if rest < 0 or (rest and (rest < record_bytes or (rest - record_bytes) % stride
                                  or len(body) > max(limit, POLL_BODY_BYTES))):
            raise LinkError(f"POLL: a body of {len(body)} bytes is not its {POLL_BODY_BYTES} bytes and a run of "
                            f"{record_bytes}-byte reports within {limit} bytes")
        flags, word = struct.unpack_from("<II", body)
        reports = tuple(body[offset:offset + record_bytes] for offset in range(POLL_BODY_BYTES, len(body), stride))
        return Polled(LinkQueue(flags & sum(LinkQueue)), word, reports)

    def pop_exceptions(self, limit: int = 0) -> Exchange:
        """Exception packets in one request: the first whatever its length, then the next while one waits and
        fits whole in ``limit`` bytes (``abi.link.Op.POP_EXCEPTION``); [] if none waited."""
        response = yield from self.call(Op.POP_EXCEPTION, 0, limit)
        if response.status == Status.EMPTY:
            return []
        if response.status != Status.OK:
            raise LinkStatusError(Op.POP_EXCEPTION, response.status)
        body, packets, offset = response.body, [], 0
        while offset < len(body):
            if len(body) - offset < EXCEPTION_HEADER_BYTES:
                raise LinkError(f"POP_EXCEPTION: {len(body) - offset} bytes left for a packet's header")
            record, kept, flags = struct.unpack_from("<IHB", body, offset)
            start = offset + EXCEPTION_HEADER_BYTES
            if start + kept > len(body):
                raise LinkError(f"POP_EXCEPTION: {len(body) - start} bytes for a packet of {kept}")
            packets.append(ExceptionPacket(record, body[start:start + kept], bool(flags & 1)))
            offset = start + kept + (-kept % 8)
            if offset >= len(body) and start + kept != len(body):
                raise LinkError("POP_EXCEPTION: padding after the last packet")
        return packets

    def pop_exception(self) -> Exchange:
        """The next exception packet, or None."""
        packets = yield from self.pop_exceptions()
        return packets[0] if packets else None

    def send_frame(self, frame: bytes) -> Exchange:
        """An Ethernet frame without FCS, out of the board's MAC (which pads it and adds the FCS)."""
        yield from self._ok(Op.SEND_FRAME, data=frame)

    def push_record(self, stream: TxInput, record: bytes) -> Exchange:
        """A record to one of the transmit engine's request streams: True once pushed, False when the
        stream had no room (status FULL: nothing was pushed; push it again later)."""
        stream = TxInput(stream)
        if len(record) != tx_input_bytes()[stream]:
            raise ValueError(f"a {stream.name} record is {tx_input_bytes()[stream]} bytes, not {len(record)}")
        response = yield from self.call(Op.PUSH_RECORD, stream, data=zero_run_encode(record))
        if response.status == Status.FULL:
            return False
        if response.status != Status.OK:
            raise LinkStatusError(Op.PUSH_RECORD, response.status)
        return True

    def pop_records(self, output: TxOutput, limit: int = 0) -> Exchange:
        """Records' bytes of one of the transmit engine's record streams in one request, as
        :meth:`pop_reports`."""
        output = TxOutput(output)
        return (yield from self._pop(Op.POP_RECORD, tx_output_bytes()[output], output, limit))

    def pop_record(self, output: TxOutput) -> Exchange:
        """The next record's bytes of one of the transmit engine's record streams, or None."""
        records = yield from self.pop_records(output)
        return records[0] if records else None

    def mac_counters(self) -> Exchange:
        body = yield from self._ok(Op.MAC_COUNTERS)
        return dict(zip(MAC_COUNTER_NAMES, struct.unpack(f"<{len(MAC_COUNTER_NAMES)}I", body)))


class _Driver:
    """Runs :class:`LinkClient`'s operations: ``link.read_register(0)`` drives ``client.read_register(0)``."""

    def __init__(self, client: LinkClient):
        self.client = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        operation = getattr(self.client, name)
        return lambda *args, **kwargs: self._drive(operation(*args, **kwargs))

    def _drive(self, exchange: Exchange) -> Any:
        raise NotImplementedError


class SerialPort(Protocol):
    """What :class:`SerialLink` uses of a ``serial.Serial``."""
    timeout: float | None
    in_waiting: int

    def write(self, data: bytes) -> int | None: ...

    def flush(self) -> None: ...

    def read(self, size: int = 1) -> bytes: ...


class SerialLink(_Driver):
    """The link on a pyserial port; every operation of :class:`LinkClient` as a plain call. Pings on opening."""

    def __init__(self, port: SerialPort, *, baud: float, **options: Any):
        super().__init__(LinkClient(baud=baud, **options))
        self.port = port
        self.info = self.ping()

    def _drive(self, exchange: Exchange) -> Any:
        result = None
        try:
            while True:
                action = exchange.send(result)
                if isinstance(action, Send):
                    self.port.write(action.data)
                    self.port.flush()
                    result = None
                else:
                    self.port.timeout = action.timeout
                    result = self.port.read(1)
                    if result and self.port.in_waiting:
                        result += self.port.read(self.port.in_waiting)
        except StopIteration as stop:
            return stop.value


def open_serial_link(device: str, baud: float = 3_000_000, **options: Any) -> SerialLink:
    """The link on a serial device (the ECPIX-5's FT2232H channel B, e.g. /dev/ttyUSB1) or a pyserial URL
    (``socket://HOST:PORT``: the model board served by ``sim.model_board_server``); needs pyserial (the
    ``board`` extra)."""
    try:
        import serial
    except ImportError:
        raise LinkError("the link to a board needs pyserial: pip install 'rnic-sctp[board]'") from None
    try:
        port = serial.serial_for_url(device, int(baud), timeout=0.1)
    except (serial.SerialException, ValueError) as error:
        raise LinkError(f"the control link's port: {error}") from None
    return SerialLink(port, baud=baud, **options)


class AsyncTransport(Protocol):
    async def send(self, data: bytes) -> None: ...

    async def receive(self, timeout: float) -> bytes: ...


class AsyncLink(_Driver):
    """The link on an asynchronous transport; every operation of :class:`LinkClient` as a coroutine.
    Call :meth:`open` (a ping) first."""

    def __init__(self, transport: AsyncTransport, *, baud: float, **options: Any):
        super().__init__(LinkClient(baud=baud, **options))
        self.transport = transport

    async def open(self) -> LinkInfo:
        self.info = await self.ping()
        return self.info

    def _drive(self, exchange: Exchange) -> Awaitable[Any]:
        async def run() -> Any:
            result = None
            try:
                while True:
                    action = exchange.send(result)
                    if isinstance(action, Send):
                        await self.transport.send(action.data)
                        result = None
                    else:
                        result = await self.transport.receive(action.timeout)
            except StopIteration as stop:
                return stop.value
        return run()
