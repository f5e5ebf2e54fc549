"""The board's transmit engine with its transport unit: the host per message (issue 29).

`BoardTransport` is what `model.rnic.engine_host.EngineRnic` asks of a
transport engine (`TransportEngine`) when the board's RNIC core is built with
the transport unit (TX_PARAMS `transport`, `hdl.rnic.Rnic(transport=True)`):
the unit, not the host, takes the peer's SACKs (from the board's receive
engine, inside the board), keeps cwnd, rwnd and T3-rtx on the board's clock
and retransmits (RFC 4960 6.1, 6.2.1, 6.3, 7.2, 8.1). Over the control link:

* rows: `tx_association`, `tx_stream` and `tx_transport` written (REG_WRITE)
  at the host's call, so the transport row is in before the SACK row that
  hands the unit the peer's SACKs (`peer_sacks`);
* requests: one record a message (`PUSH_RECORD`: a work request, a Read
  Response, a session-control message), pushed at the next service in the
  host's order; a SHUTDOWN's Cumulative TSN Ack (RFC 4960 9.2) is a
  `TxInput.PEER_SACK` record. No TSN request, no frame count, no shadow
  model;
* room: a push answered FULL (the engine's request queue holds
  `sim.board_model.REQUEST_QUEUE_DEPTH` unstarted) stays first in line for
  the next service: the refusal path, no register read;
* order: the engine starts waiting control requests before Read Responses,
  and those before work (RFC 5040 5.5), while the host's association numbers
  the chunks in the order it hands messages over (RFC 4960 6.1: one TSN
  space). So a request is pushed only when no request of a later-going
  stream pushed before it may still wait unstarted; pushed that way, the
  engine starts them in push order, and the `messages_started` register
  (read only when a Read Response or control request would otherwise wait,
  which work alone never does) says which have started;
* records: completions, stop records (`TxOutput.TRANSPORT_STOPPED`: FAILURE,
  RFC 4960 8.1, or VIOLATION) and refusals popped in batches when a POLL
  shows them;
* the Cumulative TSN Ack (RFC 4960 6.2.1 D) the association learns
  (`cumulative_tsn_ack`): the row's `cumulative_tsn_ack_<row>` register, read
  by every service's POLL once the row is the unit's (`poll_register`).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from abi.link import LinkQueue, TxInput, TxOutput, pop_body_bytes, tx_output_bytes
from abi.tx import (TX_REGISTER_BASE, control_request_layout, peer_sack_layout, read_response_layout,
                    transport_record_layout, tsn_request_layout, tx_register_map, work_request_layout)
from driver.records import (control_request_fields, peer_sack_fields, peer_shutdown_fields, read_response_fields,
                            record_bytes, record_fields, transport_stopped, tsn_request_fields,
                            tx_association_fields, work_request_fields)
from model.engine.tx import ControlRequest, ReadResponseRequest, TsnOpcode, TxAssociationRow, WorkRequest
from model.sctp.packet import SackChunk, serial_gt

__all__ = ["OUTPUT_FLAG", "RECORD_BATCH_BYTES", "BoardTransport"]

RECORD_BATCH_BYTES = 2048
"""The body bytes one pop of completions or stop records asks for (`abi.link.pop_body_bytes`)."""
TSN_MASK = 0xFFFFFFFF
_GOES_BEFORE = {TxInput.CONTROL: 0, TxInput.READ_RESPONSE: 1, TxInput.WORK: 2}
"""The engine's order between messages: control requests, then Read Responses, then work (`abi.tx`)."""
OUTPUT_FLAG = {TxOutput.COMPLETION: LinkQueue.COMPLETION, TxOutput.TSN_REFUSED: LinkQueue.TSN_REFUSED,
               TxOutput.READ_RESPONSE_REFUSED: LinkQueue.READ_RESPONSE_REFUSED,
               TxOutput.TRANSPORT_STOPPED: LinkQueue.TRANSPORT_STOPPED}
"""POLL's flag of each record stream of the transmit engine."""


class BoardTransport:
    """`TransportEngine` calls on the board's transmit engine and transport unit (see the module docs); `events`
    decodes a popped record of a `TxOutput` stream (`driver.backends.board`'s)."""

    def __init__(self, control: Any, associations: int, stream_ids: int, events) -> None:
        self._control, self.stream_ids, self._decode = control, stream_ids, events
        self._map = tx_register_map(associations, stream_ids, transport=True)
        self._counter = {name: TX_REGISTER_BASE + offset for name, offset in self._map.counters.items()}
        self._pushes: deque[tuple[TxInput, bytes]] = deque()   # in the host's order, not yet taken
        self._unstarted: deque[TxInput] = deque()   # pushed messages that may not have started, in push order
        self._started = self._messages_started()     # the register's count when none of ours had started
        self._cumulative: dict[int, int] = {}       # row -> Cumulative TSN Ack known
        self._transport_rows: set[int] = set()
        self._events: list = []
        self._held = False   # the first push waits for the engine: tried again after the next POLL
        self.pushes = self.started_reads = 0
        """Records pushed, and reads of `messages_started` (each one REG_READ)."""

    # -- the host's calls ----------------------------------------------------------------------------

    def write_association(self, row: TxAssociationRow) -> None:
        """The row written now: its TSN counter loaded, so nothing before `next_tsn` is outstanding; the row is
        the host's until its transport row."""
        self._write_table("tx_association", tx_association_fields(row))
        self._cumulative[row.index] = (row.next_tsn - 1) & TSN_MASK
        self._transport_rows.discard(row.index)

    def write_stream(self, association: int, stream_id: int, first_ssn: int) -> None:
        self._write_table("tx_stream", {"index": association * self.stream_ids + stream_id, "first_ssn": first_ssn})

    def write_transport(self, association: int, peer_a_rwnd: int, **parameters) -> None:
        """The unit takes the row (`abi.tx.transport_write_layout`), written now: before the SACK row that hands
        it the peer's SACKs."""
        self._write_table("tx_transport", {"association": association, "peer_a_rwnd": peer_a_rwnd, **parameters})
        self._transport_rows.add(association)

    def post_work(self, request: WorkRequest) -> None:
        self._pushes.append((TxInput.WORK, record_bytes(work_request_layout(), work_request_fields(request))))

    def post_read_response(self, request: ReadResponseRequest) -> bool:
        """Taken: a refusal beyond IRD (RFC 6581 4.1) comes back as a popped record."""
        record = record_bytes(read_response_layout(), read_response_fields(request))
        self._pushes.append((TxInput.READ_RESPONSE, record))
        return True

    def post_control(self, request: ControlRequest) -> None:
        record = record_bytes(control_request_layout(), control_request_fields(request))
        self._pushes.append((TxInput.CONTROL, record))

    def tsn_request(self, opcode: TsnOpcode, association: int, tsn: int) -> None:
        """For a row of the host's; the engine refuses it for a row of the unit's."""
        record = record_bytes(tsn_request_layout(), tsn_request_fields(opcode, association, tsn))
        self._pushes.append((TxInput.TSN, record))

    def peer_sack(self, association: int, sack: SackChunk, now: int) -> None:
        """A peer's SACK that reached the host (before the SACK row said `peer_sacks`), for the unit."""
        self._pushes.append((TxInput.PEER_SACK, record_bytes(peer_sack_layout(), peer_sack_fields(association, sack))))

    def peer_shutdown(self, association: int, cumulative_tsn_ack: int, now: int) -> None:
        """A SHUTDOWN's Cumulative TSN Ack (RFC 4960 9.2), for the unit."""
        record = record_bytes(peer_sack_layout(), peer_shutdown_fields(association, cumulative_tsn_ack))
        self._pushes.append((TxInput.PEER_SACK, record))

    def cumulative_tsn_ack(self, association: int) -> int:
        """The last Cumulative TSN Ack the board said (`poll_register`, `take_cumulative_tsn_ack`)."""
        return self._cumulative[association]

    def tick(self, now: int) -> None:
        """Nothing: the unit's timers tick on the board's clock."""

    def next_deadline(self) -> None:
        """None: the board keeps the unit's deadlines."""

    def accepts_next(self) -> bool:
        """Always: the requests wait here in the host's order and `settle` pushes them so that the engine
        starts them in that order."""
        return True

    def data_to_send(self, now: int | None = None) -> list[bytes]:
        """Nothing: the board puts its frames on the wire itself."""
        return []

    def next_events(self) -> list:
        """The completions, stop records and refusals popped so far."""
        events, self._events = self._events, []
        return events

    # -- the board's side -----------------------------------------------------------------------------

    def settle(self) -> None:
        """Push the waiting records in order while the engine has room and none would overtake an earlier one
        (see the module docs); what stays waits for the next POLL (`poll`), which may find the engine moved on."""
        refreshed = False
        while self._pushes and not self._held:
            stream, record = self._pushes[0]
            goes = _GOES_BEFORE.get(stream)
            if goes is not None and any(_GOES_BEFORE[earlier] > goes for earlier in self._unstarted):
                if refreshed:
                    self._held = True
                    return
                self._learn_started()
                refreshed = True
                continue
            if not self._control.push_record(stream, record):
                self._held = True   # FULL: the engine's queue has no room now
                return
            self._pushes.popleft()
            self.pushes += 1
            if goes is not None:
                self._unstarted.append(stream)

    def poll_register(self) -> int | None:
        """The register every POLL should read: the Cumulative TSN Ack of the row the unit holds (the board's
        host has one association), None while the unit holds none."""
        row = min(self._transport_rows, default=None)
        return None if row is None else self._counter[f"cumulative_tsn_ack_{row}"]

    def take_cumulative_tsn_ack(self, word: int) -> bool:
        """The POLL's word of `poll_register`: whether the row's Cumulative TSN Ack moved (only forward, RFC 4960
        6.2.1 D)."""
        row = min(self._transport_rows)
        moved = serial_gt(word, self._cumulative[row], 32)
        if moved:
            self._cumulative[row] = word
        return moved

    def poll(self, waiting: LinkQueue) -> None:
        """Pop every stream of records the POLL said holds some, each in one request; a push held for the
        engine is tried again."""
        self._held = False
        for output, flag in OUTPUT_FLAG.items():
            if waiting & flag:
                limit = pop_body_bytes(tx_output_bytes()[output], RECORD_BATCH_BYTES // tx_output_bytes()[output])
                for body in self._control.pop_records(output, limit):
                    self._events.append(self._event(output, body))

    def _event(self, output: TxOutput, body: bytes):
        if output is TxOutput.TRANSPORT_STOPPED:
            return transport_stopped(record_fields(transport_record_layout(), int.from_bytes(body, "little")))
        return self._decode(output, body)

    def _learn_started(self) -> None:
        """One read of `messages_started`: the pushed messages that have started leave `_unstarted` (the engine
        starts them in push order)."""
        self.started_reads += 1
        count = self._messages_started()
        for _ in range(min((count - self._started) & TSN_MASK, len(self._unstarted))):
            self._unstarted.popleft()
        self._started = count

    def _messages_started(self) -> int:
        return self._control.read_register(self._counter["messages_started"])

    def _write_table(self, name: str, fields: dict) -> None:
        self._control.write_table(self._map.tables[name], fields, base=TX_REGISTER_BASE)
