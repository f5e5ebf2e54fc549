"""The `board` backend: device 0 is the RNIC core on a board, device 1 a software RNIC cabled to it.

    fabric = open_fabric("board", serial="/dev/ttyUSB1", ethernet="eth1")
    board, peer = fabric.devices

Device 0 (host A, 10.0.0.1 port 5001) is an `EngineRnic` whose data plane
is the board's RNIC core (`boards/ecpix5_top.py`): frames from the wire go
straight into its receive engine, and its transmit engine puts frames on the
wire; this computer runs the control plane and reaches the board only over
its control link (`driver.link`, a UART):

* receive: the engine's tables are written over the link (`REG_WRITE` into
  the register map, `driver.records.receive_row_writes`); one POLL a
  service says which record streams hold records, and one pop of each takes
  what waits (`POP_REPORT`, `POP_EXCEPTION`, `POP_ACK`, batched up to
  `RECORD_BATCH_BYTES` and `EXCEPTION_BATCH_BYTES`), handed to the host as
  the engine's output (`model.rnic.offload.EngineOutput`);
* transmit (`BoardTransmit`): the engine's rows over the link, its requests
  pushed as records (`PUSH_RECORD`), its completions popped (`POP_RECORD`,
  batched);
  the host's own frames (INIT, SACK, HEARTBEAT, SHUTDOWN...) go out through
  the board's MAC (`SEND_FRAME`);
* host memory is the board's (`LinkMemory`, `MEM_READ` / `MEM_WRITE`), laid
  out by `board_memory_map`: the driver's buffers in the low part, the
  host's own areas (QN 1 and QN 2 buffers, scratch slots, bounce area) at
  the top.

Device 1 (host B, 10.0.0.2 port 5002) is a `SoftRnic` on this computer. Its
frames reach the board's Ethernet through an `driver.ethernet.EthernetPort`
(a network interface, or the socket of a simulated board) and the model's
impaired link (`model.rnic.link`, `link=LinkConfig(...)`) both ways.

What any fabric with a board does is `BoardBackend`'s: the control link,
the board's reset, its host, the clock and the waits; `BoardBuffers` is the
board's memory as a device allocates it.  `BoardFabric` adds the software
peer; `driver.backends.board_network` makes the board one device of its own
network instead (`open_device("board:...")`), its peer any RNIC there.

Time is the wall clock.  `run(main)` runs `main(fabric)` on an asyncio loop;
each wait of the driver services the fabric until its predicate holds:
records popped and handed to host A, frames and timers of both hosts, then
host A's table writes, transmit requests and frames, in that order, so a
row is in the engine before anything that lets the peer use it leaves.

Pacing (the transmit engine's order, as on `sim`): the engine may start a
waiting control request or Read Response ahead of waiting work, so the host
offers a request only when the engine has none waiting unstarted.  A shadow
`TransmitEngineModel` (blank memory: what it sends is not compared, only
counted) answers `accepts_next` and says how many frames each request
sends; each request is pushed once the board's transmit engine has sent every frame
the model sent before it (its `request_frames`, one register read).  The
host is given the model's completions and refusals as it makes its requests,
as an engine in this process gives them (the TSN request an ACK makes
completes a Send or Write before a Terminate that followed the SACK is
handled, RFC 5040 5.5); the board's are popped while the model has given
some the board has not, and must equal the model's (`BoardMismatch`).

With the transport unit (`engine_transport=True`, a board whose TX_PARAMS
say so) the host works per message instead: `BoardTransport`
(`driver.backends.board_transport`) pushes one record a message with no
shadow model and no frame count, the board's unit takes the peer's SACKs
and retransmits, each POLL reads the unit's Cumulative TSN Ack, and the
POLLs space out while none finds a record from the peer (`BoardEnd.poll`).

Records popped in one round are handed over as one output: the reports are
popped first, then the exception stream and the acks, so every report's own
chunks and acks are in the same output or an earlier one, and are handled
before it (as for one frame).  Whole frames passed up come first.  A chunk or
frame longer than the board's exception buffer cannot be handled and is
counted (`BoardEnd.truncated`); SCTP retransmits it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from driver.backends.base import DeviceAttr, FabricBackend
from driver.backends.board_transport import OUTPUT_FLAG, BoardTransport
from driver.backends.engine import ENGINE_RESOURCES, STREAM_IDS, engine_device_attr
from driver.backends.soft import HostDevice, SoftDevice
from driver.errors import DriverError, InvalidArgument, OutOfResources, WaitTimeout
from driver.ethernet import EthernetPort, open_port
from driver.link import LinkInfo, Polled, open_serial_link
from driver.records import (control_request_fields, read_response_fields, record_bytes, record_fields,
                            receive_row_writes, segment_verdict, tsn_request_fields, tx_association_fields,
                            work_request_fields)
from abi.link import HOLD_BYTES, POLL_BODY_BYTES, LinkQueue, TxInput, TxOutput, pop_body_bytes, tx_output_bytes
from abi.register_file import DEVICE_ID, ID_OFFSET, PARAMS_OFFSET
from abi.rx import (RX_PARAMS, RX_TABLES, check_key_bits, AckDisposition, ExceptionSource, ReportKind, ack_layout,
                    exception_record_layout, register_map, report_bytes, report_layout)
from abi.tx import (TX_PARAMS, TX_REGISTER_BASE, CompletionStatus, completion_layout, control_request_layout,
                    read_response_layout, tsn_request_layout, tx_register_map, work_request_layout)
from model.ddp.memory import Access, SparseMemory
from model.engine.config import ReceiveConfig
from model.engine.tx import (Completion, ControlRequest, ReadResponseRequest, RefusedRead, RefusedTsn,
                             TransmitConfig, TransmitEngineModel, TsnOpcode, TxAssociationRow, WorkRequest)
from model.rnic.engine_host import EngineRnic
from model.rnic.host import RnicConfig, SoftRnic
from model.rnic.link import Link, LinkConfig, Side
from model.rnic.offload import Ack, EngineOutput
from model.rnic.pair import IPS, MACS, HostPair, host_config

__all__ = ["BoardBackend", "BoardBuffers", "BoardFabric", "BoardDevice", "BoardEnd", "BoardTransmit", "BoardError",
           "BoardMismatch", "LinkMemory", "BoardMemoryMap", "board_memory_map"]

T = TypeVar("T")
BOARD_SIDE = Side.A
DEFAULT_BAUD = 3_000_000
"""The ECPIX-5 build's UART (`boards.ecpix5_top.DEFAULT_BAUD`)."""
POLL_SECONDS = 0.001
"""Sleep between two services of the fabric while a wait is not satisfied."""
LONGEST_POLL_SECONDS = 0.064
"""With the transport unit, the longest a POLL waits after polls that found nothing (see `BoardEnd.poll`)."""
RECORD_BATCH_BYTES = 2048
"""The body bytes one pop of reports, acks or transmit records asks for (`abi.link.pop_body_bytes`): about 7 ms
of the 3 Mbaud link, and one request's header and CRC for some 36 reports or 256 acks."""
POLL_BATCH_REPORTS = 32
"""The reports a POLL pops behind its word (`abi.link.Op.POLL`); a POLL that brought this many is followed by a
POP_REPORT, as more may wait."""
POLL_BATCH_BYTES = POLL_BODY_BYTES + pop_body_bytes(report_bytes(), POLL_BATCH_REPORTS)
EXCEPTION_BATCH_BYTES = 4096
"""The body bytes one pop of exception packets asks for: a few frames, or some 50 SACK chunks."""
PACING_SECONDS = 10.0
"""Wall-clock seconds a pushed request's frames, or a full request stream's room, may take."""
BUFFER_ALIGNMENT = 64
"""The driver's buffers in board memory start on this, with as many bytes free between two."""
SCRATCH_SLOT_BYTES = 1024
TOP_AREA_BYTES = 32 * 1024
"""Board memory the host keeps at the top for itself (see `board_memory_map`)."""


class BoardError(DriverError):
    """The board is not what the backend needs (not an RNIC core, too little memory), or stopped pacing."""


class BoardMismatch(BoardError):
    """The board's transmit engine completed or refused something else than its model for the same requests."""


@dataclass(frozen=True)
class BoardMemoryMap:
    """Where things are in the board's host memory."""
    memory_bytes: int
    buffers_end: int
    """The driver's buffers lie in [0, buffers_end)."""
    control_base: int
    """QN 1 and QN 2 buffers of each stream (RFC 5040 4.2)."""
    scratch_base: int
    scratch_slots: int
    """Slots of `SCRATCH_SLOT_BYTES` for the messages the host builds (session control, Terminate)."""
    bounce_base: int
    bounce_bytes: int
    """Where gather lists of several pieces are copied whole."""


def board_memory_map(memory_bytes: int) -> BoardMemoryMap:
    """The top 32 KiB: 4 KiB of QN 1 / QN 2 buffers, 16 scratch slots, a 12 KiB bounce area; buffers below."""
    if memory_bytes < 2 * TOP_AREA_BYTES:
        raise BoardError(f"the board has {memory_bytes} bytes of host memory; the backend needs "
                         f"{2 * TOP_AREA_BYTES}")
    control = memory_bytes - TOP_AREA_BYTES
    scratch = control + 4096
    bounce = scratch + 16 * SCRATCH_SLOT_BYTES
    return BoardMemoryMap(memory_bytes, control, control, scratch, 16, bounce, memory_bytes - bounce)


class LinkMemory:
    """The board's host memory as the host's software reads and writes it: over the control link."""

    def __init__(self, control: Any, memory_bytes: int) -> None:
        self._control, self.memory_bytes = control, memory_bytes

    def _check(self, address: int, length: int) -> None:
        if address < 0 or length < 0 or address + length > self.memory_bytes:
            raise BoardError(f"{length} bytes at {address:#x} are outside the board's "
                             f"{self.memory_bytes}-byte host memory")

    def read(self, address: int, length: int) -> bytes:
        self._check(address, length)
        return self._control.read_memory(address, length) if length else b""

    def write(self, address: int, data: bytes) -> None:
        self._check(address, len(data))
        if data:
            self._control.write_memory(address, bytes(data))


class BoardTransmit:
    """`model.rnic.engine_host.TransmitEngine` calls on the board's transmit engine, paced by a shadow model
    (see the module docs). `frames_sent()`: frames the board's engine has put on the wire so far."""

    def __init__(self, control: Any, config: TransmitConfig, frames_sent: Callable[[], int]) -> None:
        self._control, self._frames_sent = control, frames_sent
        self.shadow = TransmitEngineModel(config, SparseMemory())
        self.stream_ids = config.stream_ids
        self._map = tx_register_map(config.associations, config.stream_ids)
        self._commands: deque[tuple[Callable[[], None], int]] = deque()
        self._model_frames = 0
        self._expected: dict[TxOutput, deque] = {output: deque() for output in TxOutput}
        self._events: list[Completion | RefusedRead | RefusedTsn] = []

    # -- the host's calls --------------------------------------------------------------------------

    def write_association(self, row: TxAssociationRow) -> None:
        self.shadow.write_association(row)
        self._command(lambda: self._write_table("tx_association", tx_association_fields(row)))

    def write_stream(self, association: int, stream_id: int, first_ssn: int) -> None:
        self.shadow.write_stream(association, stream_id, first_ssn)
        fields = {"index": association * self.stream_ids + stream_id, "first_ssn": first_ssn}
        self._command(lambda: self._write_table("tx_stream", fields))

    def post_work(self, request: WorkRequest) -> None:
        self.shadow.post_work(request)
        record = record_bytes(work_request_layout(), work_request_fields(request))
        self._command(lambda: self._push(TxInput.WORK, record))

    def post_read_response(self, request: ReadResponseRequest) -> bool:
        accepted = self.shadow.post_read_response(request)
        record = record_bytes(read_response_layout(), read_response_fields(request))
        self._command(lambda: self._push(TxInput.READ_RESPONSE, record))
        return accepted

    def post_control(self, request: ControlRequest) -> None:
        self.shadow.post_control(request)
        record = record_bytes(control_request_layout(), control_request_fields(request))
        self._command(lambda: self._push(TxInput.CONTROL, record))

    def tsn_request(self, opcode: TsnOpcode, association: int, tsn: int) -> None:
        self.shadow.tsn_request(opcode, association, tsn)
        record = record_bytes(tsn_request_layout(), tsn_request_fields(opcode, association, tsn))
        self._command(lambda: self._push(TxInput.TSN, record))

    def accepts_next(self) -> bool:
        """The model has no request waiting unstarted; `settle` keeps the board where the model is."""
        return self.shadow.accepts_next()

    def data_to_send(self) -> list[bytes]:
        """Nothing: the board puts its frames on the wire itself."""
        return []

    def next_events(self) -> list:
        """The completions and refusals of the requests so far, as the model gives them: at once, as the host
        needs them (an ACK's completion before a Terminate that followed its SACK is handled, RFC 5040 5.5:
        `EngineRnic._drain_association`); the board's own, popped later, must be the same (`poll`)."""
        events, self._events = self._events, []
        return events

    # -- the board's side ---------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return bool(self._commands)

    def settle(self) -> None:
        """Give the board the waiting commands in order, each once it has sent the frames the model sent
        before it."""
        while self._commands:
            send, frames = self._commands.popleft()
            send()
            self._until(lambda: self._frames_sent() >= frames,
                        lambda: f"the board sent {self._frames_sent()} frames, its model {frames}")

    def poll(self, waiting: LinkQueue) -> None:
        """Pop the completions and refusals the model has given and the board not yet, from the streams that
        hold records (`waiting`, a POLL's answer), each in one request; each must be the model's (the host had
        the model's already, see `next_events`)."""
        for output, expected in self._expected.items():
            if not (expected and waiting & OUTPUT_FLAG[output]):
                continue
            limit = pop_body_bytes(tx_output_bytes()[output], len(expected))
            for body in self._control.pop_records(output, limit):
                if not expected:
                    raise BoardMismatch(f"the board's transmit engine gave {_tx_event(output, body)} beyond its"
                                        " model's")
                event = _tx_event(output, body)
                wanted = expected.popleft()
                if event != wanted:
                    raise BoardMismatch(f"the board's transmit engine gave {event}, its model {wanted}")

    def _command(self, send: Callable[[], None]) -> None:
        self._model_frames += len(self.shadow.data_to_send())
        for event in self.shadow.next_events():
            output = (TxOutput.COMPLETION if isinstance(event, Completion) else
                      TxOutput.READ_RESPONSE_REFUSED if isinstance(event, RefusedRead) else TxOutput.TSN_REFUSED)
            self._expected[output].append(event)
            self._events.append(event)
        self._commands.append((send, self._model_frames))

    def _write_table(self, name: str, fields: dict) -> None:
        self._control.write_table(self._map.tables[name], fields, base=TX_REGISTER_BASE)

    def _push(self, stream: TxInput, record: bytes) -> None:
        self._until(lambda: self._control.push_record(stream, record),
                    lambda: f"the transmit engine's {stream.name} stream stayed full")

    @staticmethod
    def _until(done: Callable[[], bool], problem: Callable[[], str]) -> None:
        deadline = time.monotonic() + PACING_SECONDS
        while not done():
            if time.monotonic() > deadline:
                raise BoardError(f"{problem()} for {PACING_SECONDS:g} s")
            time.sleep(POLL_SECONDS)


def _tx_event(output: TxOutput, body: bytes) -> Completion | RefusedRead | RefusedTsn:
    value = int.from_bytes(body, "little")
    if output is TxOutput.COMPLETION:
        f = record_fields(completion_layout(), value)
        return Completion(f["wr_id"], f["opcode"], f["association"], CompletionStatus(f["status"]))
    if output is TxOutput.READ_RESPONSE_REFUSED:
        return RefusedRead(ReadResponseRequest(**record_fields(read_response_layout(), value)))
    f = record_fields(tsn_request_layout(), value)
    return RefusedTsn(TsnOpcode(f["opcode"]), f["association"], f["tsn"])


SACK_CHUNK = 3
"""RFC 4960 3.2: the chunk type of a SACK."""


def _through_last_sack(chunks: list[bytes]) -> list[bytes]:
    """The chunks up to the last SACK that other chunks follow (none when no SACK does).  Chunks of several packets
    popped in one round are one output, whose chunks the host's association takes together before it acts on
    them; a peer's SACK then a Terminate it sent in its next packet would have the Terminate end the stream
    before the SACK's ACKs reach the transmit engine, and the Send or Write the SACK acknowledged would be
    flushed, not completed (RFC 5040 5.5: completions in order).  Handed up first, the SACK is acted on first,
    as it would have been alone in its packet."""
    last = max((index for index, chunk in enumerate(chunks[:-1]) if chunk[:1] == bytes([SACK_CHUNK])), default=None)
    return [] if last is None else chunks[:last + 1]


class BoardEnd:
    """The board's side of host A: its engine's parameters, its reset at opening, its records in, its table
    writes, requests and frames out (see the module docs)."""

    def __init__(self, control: Any, local_mac: bytes, local_ip: str,
                 take_frame: Callable[[bytes], bool] | None = None) -> None:
        self.control = control
        self.take_frame = take_frame
        """Called first with each whole frame the receive engine passes up: True when it took the frame (an ARP
        packet, say), which then does not reach the host."""
        info: LinkInfo = control.info
        self.memory_map = board_memory_map(info.memory_bytes)
        if control.read_register(ID_OFFSET) != DEVICE_ID:
            raise BoardError("the board's register file does not answer as an RNIC core (ID register)")
        params = RX_PARAMS.unpack(control.read_register(PARAMS_OFFSET))
        self.width_bytes, self.associations, self.key_bits = (params["width_bytes"], params["associations"],
                                                              params["key_bits"])
        self.stream_ids, self.buffers_per_queue = 1 << params["stream_ids_log2"], 1 << params["buffers_log2"]
        self.regions = RX_TABLES.unpack(control.read_register(PARAMS_OFFSET + 4))["regions"]
        try:
            check_key_bits(self.key_bits, self.regions)
        except ValueError as error:
            raise BoardError(f"the board's PARAMS words name no engine it can be: {error}") from None
        tx_params = TX_PARAMS.unpack(control.read_register(TX_REGISTER_BASE + PARAMS_OFFSET))
        self.ird, self.has_transport = tx_params["ird"], bool(tx_params["transport"])
        self.map = register_map(self.associations, self.stream_ids, self.regions, self.key_bits)
        self.truncated = 0
        self._tx_base = 0
        self._tx_map = tx_register_map(1, 1)   # its counters' offsets do not depend on the table sizes
        self._reports_waiting = 0
        self._poll_interval, self._next_poll = POLL_SECONDS, 0.0
        self._reset(local_mac, local_ip)
        self.transmit: BoardTransmit | BoardTransport = BoardTransmit(control, TransmitConfig(
            local_mac, local_ip, associations=self.associations, stream_ids=self.stream_ids, ird=self.ird),
            self.engine_frames_sent)

    def use_transport(self) -> None:
        """The host works per message through the transport unit (`BoardTransport`) instead of per TSN."""
        if not self.has_transport:
            raise InvalidArgument("engine_transport: this board's transmit engine is built without the transport "
                                  "unit (its TX_PARAMS say transport 0; the ECPIX-5 build has none)")
        self.transmit = BoardTransport(self.control, self.associations, self.stream_ids, _tx_event)

    def _reset(self, local_mac: bytes, local_ip: str) -> None:
        """The receive engine's addresses written, every row invalid and queue empty, every record left from
        an earlier run popped; the MAC's counters taken as the start."""
        control = self.control
        mac = int.from_bytes(local_mac, "big")
        for name, value in (("local_mac_low", mac & 0xFFFFFFFF), ("local_mac_high", mac >> 32),
                            ("local_ip", int(ipaddress.IPv4Address(local_ip))),
                            ("udp_port", ReceiveConfig(local_mac, local_ip).udp_port), ("drop_when_full", 1),
                            ("segment_reports", 0)):   # reports per message (abi.rx.report_withheld)
            control.write_register(self.map.config_offset(name), value)
        writes = [("association", {"index": index, "valid": 0}) for index in range(self.associations)]
        writes += [("region", {"index": index, "entry": {"valid": 0}}) for index in range(self.regions)]
        for row in range(self.associations * self.stream_ids):
            writes.append(("stream", {"index": row, "entry": {"valid": 0}}))
            writes += [("revoke", {"stream": row, "qn": qn, "msn": 0, "whole_queue": 1}) for qn in range(3)]
        for table, fields in writes:
            control.write_table(self.map.tables[table], fields)
        for pop in (control.pop_reports, control.pop_exceptions, control.pop_acks):
            while pop(HOLD_BYTES):
                pass
        for output in TxOutput:
            while control.pop_records(output, HOLD_BYTES):
                pass
        self._tx_base = self._request_frames()

    def _request_frames(self) -> int:
        return self.control.read_register(TX_REGISTER_BASE + self._tx_map.counters["request_frames"])

    def engine_frames_sent(self) -> int:
        """Frames of the host's requests the transmit engine has sent since the opening, one register read:
        its `request_frames` (its frames out less the receive engine's SACKs taken in, so never ahead;
        the host's own frames go to the MAC beside the engine, not through it)."""
        return (self._request_frames() - self._tx_base) & 0xFFFFFFFF

    # -- records in -----------------------------------------------------------------------------

    def poll(self, host: EngineRnic, now: float) -> None:
        """Hand host A the records of the frames that arrived since the last poll, and the transmit engine's
        completions: one POLL says which streams hold records, and only those are popped; it also reads
        the receive engine's `reports_waiting` (the segments it holds for their turn), which the host's
        a_rwnd counts.

        With the transport unit the board needs the host per message, not per packet, so the POLLs space out:
        after one that found nothing new for the host to answer (no report, ack or packet from the peer) the
        next waits twice as long, up to `LONGEST_POLL_SECONDS`; after one that found some, `POLL_SECONDS`, as the
        peer may be waiting for the answer (a Read Response, a receive posted again). Completions and the
        Cumulative TSN Ack wait for the next POLL's batches, and pushes the engine refused wait for it too
        (`BoardTransport.settle`)."""
        transmit = self.transmit
        # The POLL pops the reports as well, up to the batch (abi.link.Op.POLL): one request, not two.
        if not isinstance(transmit, BoardTransport):
            polled = self.control.poll(self.map.counters["reports_waiting"], POLL_BATCH_BYTES)
            self._reports_waiting = polled.word
        elif now < self._next_poll:
            return
        elif (transport_register := transmit.poll_register()) is None:
            polled = self.control.poll(self.map.counters["reports_waiting"], POLL_BATCH_BYTES)
            self._reports_waiting = polled.word
            self._space_polls(now, polled.waiting)
        else:   # the unit's row: the Cumulative TSN Ack; reports_waiting is the engine's own with its SACKs
            polled = self.control.poll(transport_register, POLL_BATCH_BYTES)
            if transmit.take_cumulative_tsn_ack(polled.word):
                host.transport_progressed(now)
            self._space_polls(now, polled.waiting)
        if polled.reports or polled.waiting & (LinkQueue.REPORT | LinkQueue.ACK | LinkQueue.EXCEPTION):
            self._records(host, now, polled)
        self.transmit.poll(polled.waiting)

    def _space_polls(self, now: float, waiting: LinkQueue) -> None:
        if waiting & (LinkQueue.REPORT | LinkQueue.ACK | LinkQueue.EXCEPTION):
            self._poll_interval = POLL_SECONDS
        else:
            self._poll_interval = min(LONGEST_POLL_SECONDS, 2 * self._poll_interval)
        self._next_poll = now + self._poll_interval

    def _records(self, host: EngineRnic, now: float, polled: Polled) -> None:
        control, waiting = self.control, polled.waiting
        reports = list(polled.reports)
        if waiting & LinkQueue.REPORT and (not reports or len(reports) == POLL_BATCH_REPORTS):
            reports += control.pop_reports(RECORD_BATCH_BYTES)   # the POLL's batch was full: more may wait
        # A report's chunks and acks were queued before it: popped after it, they are in this round (no acks
        # when the engine SACKs the association). The peer's SACKs among them must be (a SACK bundled before a
        # DATA chunk is processed first, RFC 4960 6.10); with the transport unit they never reach the host, and
        # the chunks that still do (HEARTBEAT, SHUTDOWN, ABORT, ERROR, the session's PPID 17 messages) come after
        # the data they concern or need no order against it, so only the POLL's flag pops them.
        chunks_follow = reports and not isinstance(self.transmit, BoardTransport)
        exceptions = (control.pop_exceptions(EXCEPTION_BATCH_BYTES) if chunks_follow or waiting & LinkQueue.EXCEPTION
                      else [])
        acks_follow = reports and host.expects_acks
        acks = control.pop_acks(RECORD_BATCH_BYTES) if acks_follow or waiting & LinkQueue.ACK else []
        if not (reports or exceptions or acks):
            return
        output = EngineOutput()
        for packet in exceptions:
            if packet.truncated:
                self.truncated += 1
                continue
            source = record_fields(exception_record_layout(), packet.record)["source"]
            if source == ExceptionSource.FRAME:
                if self.take_frame is not None and self.take_frame(packet.data):
                    continue
                host.engine_output(EngineOutput(frame=packet.data, reports_waiting=self._reports_waiting), now)
            else:
                output.chunks.append(packet.data)
        for body in acks:
            f = record_fields(ack_layout(), int.from_bytes(body, "little"))
            output.acks.append(Ack(f["tsn"], AckDisposition(f["disposition"]), f["length"], bool(f["immediate"])))
        for body in reports:
            f = record_fields(report_layout(), int.from_bytes(body, "little"))
            if f["kind"] == ReportKind.SEGMENT:
                output.reports.append(segment_verdict(f))
            else:
                output.chunk_errors += 1
        output.reports_waiting = self._reports_waiting
        acknowledged = _through_last_sack(output.chunks)
        if acknowledged:   # the SACKs handled first, alone with the acks: see `_through_last_sack`
            host.engine_output(EngineOutput(chunks=acknowledged, acks=output.acks,
                                            reports_waiting=self._reports_waiting), now)
            output.chunks, output.acks = output.chunks[len(acknowledged):], []
        if output.chunks or output.acks or output.reports or output.chunk_errors:
            host.engine_output(output, now)

    # -- host A's work out ----------------------------------------------------------------------

    def run_commands(self, host: EngineRnic, frames: list[bytes]) -> None:
        """Host A's table writes, then its transmit requests, then its own frames."""
        while (command := host.take_engine_work()) is not None:
            for table, fields in receive_row_writes(command, self.stream_ids, self.key_bits):
                self.control.write_table(self.map.tables[table], fields)
        self.transmit.settle()
        for frame in frames:
            self.control.send_frame(frame)


class BoardPair(HostPair):
    """Host A (the board's host) and host B (the software peer), with the wire between the board and host B
    through the impaired link: host B's frames go on the link, those that arrive at A's side go to the
    board's Ethernet port, and the board's frames from the port go on the link to host B."""

    def __init__(self, hosts: dict[Side, SoftRnic], link: Link, port: EthernetPort) -> None:
        super().__init__(hosts, link)
        self.port = port
        self.board_frames: list[bytes] = []
        """Host A's own frames, to go out through the board's MAC once its commands are in."""

    def send_due(self) -> None:
        for side, host in self.hosts.items():
            frames = host.data_to_send(self.now)
            if side is BOARD_SIDE:
                self.board_frames += frames
            else:
                for frame in frames:
                    self.link.send(side, frame, self.now)

    def advance(self, now: float, record: bool = True) -> None:
        self.now = max(self.now, now)
        for frame in self.port.receive():
            self.link.send(BOARD_SIDE, frame, self.now)
        for side, frame, _ in self.link.deliveries(self.now):
            if side is BOARD_SIDE:
                self.port.send(frame)
            else:
                self.hosts[side].receive(frame, self.now)
        self.fire_timers(record)


class BoardBuffers(HostDevice):
    """A device whose host is the board's: its buffers lie in the low part of the board's memory, first fit, each
    freed when its region is deregistered (the engine's row is cleared then, so nothing reaches the old buffer);
    its limits are the engine's tables.  `take_board_memory` before the first buffer."""

    def take_board_memory(self, memory_map: BoardMemoryMap) -> None:
        self.memory_end = memory_map.buffers_end
        self._buffers: dict[int, int] = {}   # address -> bytes taken, a free gap after each
        self._regions: dict[int, int] = {}   # STag -> its buffer's address

    def query(self) -> DeviceAttr:
        host = self._host
        assert isinstance(host, EngineRnic)
        return engine_device_attr(super().query(), host)

    def allocate(self, length: int) -> int:
        size = -(-max(length, 1) // BUFFER_ALIGNMENT) * BUFFER_ALIGNMENT + BUFFER_ALIGNMENT
        address = BUFFER_ALIGNMENT
        for start in sorted(self._buffers):
            if address + size <= start:
                break
            address = max(address, start + self._buffers[start])
        assert self.memory_end is not None
        if address + size > self.memory_end:
            used = sum(self._buffers.values())
            raise OutOfResources(f"{length} bytes more of buffers do not fit the board's memory below "
                                 f"{self.memory_end:#x} ({used} bytes taken)")
        self._buffers[address] = size
        return address

    def register(self, address: int, length: int, access: Access, base_to: int, pd_id: int) -> int:
        stag = super().register(address, length, access, base_to, pd_id)
        self._regions[stag] = address
        return stag

    def deregister(self, stag: int) -> None:
        super().deregister(stag)
        self._buffers.pop(self._regions.pop(stag, -1), None)


class BoardDevice(BoardBuffers, SoftDevice):
    """Host A: the board."""

    def __init__(self, fabric: BoardFabric, side: Side) -> None:
        SoftDevice.__init__(self, fabric, side)
        self.name = "board0"
        self.take_board_memory(fabric.board.memory_map)


class BoardBackend(FabricBackend):
    """What a fabric with a board in it does, whatever else is in it: the control link opened and the board reset
    (`BoardEnd`), the board's host (an `EngineRnic` over the board's memory and transmit engine), the wall
    clock, and a service of the fabric (`service`, the subclass's) at every wait until its predicate holds.

    `serial`: the control link's serial device or pyserial URL (or an opened `driver.link.SerialLink`); `baud`,
    `latency`: the link's (`driver.link.LinkClient`); `time_scale`: the fabric's seconds per second of the wall
    clock, 1 for a board (a simulated board, far slower than real time, takes less, so that the protocol's
    timers keep their proportion to its speed)."""

    def open_board(self, serial: Any, local_mac: bytes, local_ip: str, *, baud: float, latency: float,
                   time_scale: float, take_frame: Callable[[bytes], bool] | None = None) -> None:
        """Open the control link, reset the board with its addresses; `take_frame`: see `BoardEnd`."""
        if not time_scale > 0:
            raise BoardError(f"time_scale {time_scale} is not above 0")
        self.time_scale = time_scale
        control = open_serial_link(serial, baud, latency=latency) if isinstance(serial, str) else serial
        self._serial_port = control.port if isinstance(serial, str) else None   # closed with the fabric
        try:
            self.board = BoardEnd(control, local_mac, local_ip, take_frame)
        except BaseException:
            BoardBackend.close(self)
            raise
        self._start = time.monotonic()

    def board_options(self, options: dict[str, object]) -> dict[str, object]:
        """`RnicConfig` fields with the engine's defaults: its IRD, streams, and SACKs by the receive engine."""
        # IRD: as many Read Responses as the transmit engine queues (RFC 6581 9, RFC 5040 6.4).
        options.setdefault("resources", replace(ENGINE_RESOURCES, ird=min(ENGINE_RESOURCES.ird, self.board.ird)))
        options.setdefault("streams", STREAM_IDS)
        options.setdefault("engine_sacks", True)   # the board's receive engine SACKs (RFC 4960 6.2); False: the host
        return options

    def board_host(self, config: RnicConfig, rng: random.Random) -> EngineRnic:
        """The board's host: its memory the board's, over the link, laid out by `board_memory_map`. Its STag keys
        come from `secrets.SystemRandom` whatever `rng` is: the board's STags cross a real wire (RFC 5042 5.1)."""
        if config.engine_transport:
            if not config.engine_sacks:
                raise InvalidArgument("engine_transport on a board needs engine_sacks: its POLL reads the transport "
                                      "unit's Cumulative TSN Ack in place of the receive engine's reports_waiting")
            self.board.use_transport()
        if self.board.stream_ids < config.streams:
            raise BoardError(f"the board's engine has {self.board.stream_ids} streams per association, "
                             f"the host {config.streams}")
        memory_map = self.board.memory_map
        return EngineRnic(
            config, LinkMemory(self.board.control, memory_map.memory_bytes),  # type: ignore[arg-type]
            rng, None, session_policy=None, transmit=self.board.transmit,
            regions=self.board.regions, key_bits=self.board.key_bits, key_rng=secrets.SystemRandom(),
            buffers_per_queue=self.board.buffers_per_queue,
            control_base=memory_map.control_base,
            scratch_base=memory_map.scratch_base, scratch_slots=memory_map.scratch_slots,
            bounce_base=memory_map.bounce_base, bounce_bytes=memory_map.bounce_bytes)

    def now(self) -> float:
        return (time.monotonic() - self._start) * self.time_scale

    def kick(self) -> None:
        """Nothing to schedule: every wait services the fabric."""

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None) -> None:
        deadline = None if timeout is None else self.now() + timeout
        while True:
            self.service()
            if predicate():
                return
            if deadline is not None and self.now() >= deadline:
                raise WaitTimeout(f"not done within {timeout:g} s")
            await asyncio.sleep(POLL_SECONDS)

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        return asyncio.run(main())

    def service(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Close the control link's serial port if the fabric opened it."""
        if self._serial_port is not None:
            self._serial_port.close()


class BoardFabric(BoardBackend):
    """The board and its software peer (see the module docs).

    `serial`, `baud`, `latency`, `time_scale`: the board's (`BoardBackend`); `ethernet`: the port to the board's
    Ethernet (`driver.ethernet.open_port`'s name, or a port); `link`: the impairments between the board and
    host B; `seed`: the hosts' random generators (not the board's STag keys: `BoardBackend.board_host`); `options`:
    `RnicConfig` fields for both hosts."""

    def __init__(self, serial: Any, ethernet: Any, link: LinkConfig | None = None, seed: int = 1, *,
                 baud: float = DEFAULT_BAUD, latency: float = 0.05, time_scale: float = 1.0,
                 **options: object) -> None:
        self.open_board(serial, MACS[BOARD_SIDE], IPS[BOARD_SIDE], baud=baud, latency=latency,
                        time_scale=time_scale)
        self.port: EthernetPort = open_port(ethernet) if isinstance(ethernet, str) else ethernet
        configs = {side: host_config(side, **self.board_options(options)) for side in Side}
        board_host = self.board_host(configs[BOARD_SIDE], random.Random(seed * 2))
        peer = SoftRnic(configs[BOARD_SIDE.peer], SparseMemory(), random.Random(seed * 2 + 1), session_policy=None)
        self.pair = BoardPair({BOARD_SIDE: board_host, BOARD_SIDE.peer: peer}, Link(link), self.port)
        self.devices = (BoardDevice(self, BOARD_SIDE), SoftDevice(self, BOARD_SIDE.peer))

    def service(self) -> None:
        """Records in, the wire and the timers, host A's work out (see the module docs)."""
        pair, board = self.pair, self.board
        host = pair.hosts[BOARD_SIDE]
        assert isinstance(host, EngineRnic)
        if self.before_service is not None:
            self.before_service()
        board.poll(host, self.now())
        pair.advance(self.now())
        pair.send_due()
        frames, pair.board_frames = pair.board_frames, []
        board.run_commands(host, frames)
        pair.collect()
        if self.on_change is not None:
            self.on_change()

    def close(self) -> None:
        """Close the port to the board's Ethernet, and the control link's serial port if the fabric opened it."""
        self.port.close()
        super().close()
