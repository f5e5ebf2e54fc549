"""The RNIC top's transmit engine behind a host's `TransmitEngine` calls, in lockstep with its golden model.

`RtlTransmit` is what `model.rnic.engine_host.EngineRnic` asks of a transmit
engine (`model.rnic.engine_host.TransmitEngine`), answered by the gateware
(`hdl.rnic.Rnic` under the simulator, through `sim.tb.rnic_tb.RnicTB`): the
host's calls are synchronous, the simulator's are not, so each call is kept
as a command and `settle()` (awaited by the fabric before time moves on) gives
them to the RTL: table rows over AXI4-Lite, records on ``s_axis_wr``,
``s_axis_rr``, ``s_axis_ctl`` and ``s_axis_tsn``.

Every call goes to a shadow `TransmitEngineModel` too, which answers at
once; what it sends then (frames, completions, refusals) is what the RTL must
send for that command. `settle()` gives the RTL one command at a time and
runs the clock until the RTL has sent everything its model sent up to that
command, so the RTL sees the host's requests in the order, and with the
state, the model saw them (an idle engine starts a request at once, a
held row holds until the LIMIT that lifts it, a RESEND goes out before the
next request). A command that sends nothing gets `QUIET_CYCLES` to be taken.
Each frame, completion and refusal the RTL sends is compared with the
model's as it arrives; the host gets the RTL's, never the model's. A
difference, or an RTL that sends nothing for `STALL_CYCLES` while the model
says it should, raises `TransmitMismatch`. The receive engine's SACKs (RFC 4960
6.2) leave between the requests' frames as the gateware merges them, so the
SACK frames and the others are compared each in their own order.

On a top with the transport unit (`sim.tb.rnic_tb.rnic_driver_top`) the
transport's calls are there too: `write_transport` (the ``tx_transport``
row), `peer_sack` and `peer_shutdown` (``s_axis_peer_sack``), `tick`; the
unit's FAILURE and VIOLATION records come from ``m_axis_transport_stopped``.
`post_sack` and `tick` give the RTL nothing: its acknowledgement unit hands
it the SACKs, and its timer is ticked by the fabric (`RnicTB.tick_to`) before
the RTL is given the commands of a later tick; they only tell the model, so
that the frames and records the RTL sends for them are expected. The
model's time is `clock()`, the tick the fabric's clock is in.
`cumulative_tsn_ack` is the model's: the RTL's Cumulative TSN Ack shows only
in its completions, compared with the model's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import cocotb
from cocotb.triggers import ClockCycles

from driver.records import (control_request_fields, peer_sack_fields, peer_shutdown_fields, read_response_fields,
                            transport_stopped, tsn_request_fields, tx_association_fields, work_request_fields)
from abi.tx import CompletionStatus, TsnOpcode, tsn_request_layout
from model.engine.sack import SackRecord
from model.engine.tx import (Completion, ControlRequest, ReadResponseRequest, RefusedRead, RefusedTsn,
                             TransmitConfig, TransmitEngineModel, TransportStopped, TxAssociationRow, WorkRequest)
from model.sctp.packet import ChunkType, SackChunk
from sim.tb.rnic_tb import RnicTB
from sim.tb.rx_engine_tb import _fields

__all__ = ["RtlTransmit", "TransmitMismatch", "QUIET_CYCLES", "STALL_CYCLES"]

QUIET_CYCLES = 32
"""Cycles a command that sends nothing is given to reach the engine before the next one goes in."""
STALL_CYCLES = 100_000
"""Cycles without any frame or record from the RTL, while its model has sent more, that fail the run."""

Event = Completion | RefusedRead | RefusedTsn | TransportStopped


def is_sack_frame(frame: bytes) -> bool:
    """Whether an Ethernet frame the engine sent carries a SACK chunk first (the acknowledgement unit's SACK,
    alone in its packet) rather than DATA: past IPv4's header (and UDP's, RFC 6951) and SCTP's common header."""
    offset = 14 + 4 * (frame[14] & 0x0F)
    if frame[23] == 17:      # IPv4 protocol: SCTP over UDP
        offset += 8
    return len(frame) > offset + 12 and frame[offset + 12] == ChunkType.SACK


class TransmitMismatch(AssertionError):
    """The RTL's transmit engine sent something else than its golden model for the same commands."""


class RtlTransmit:
    """`TransmitEngine` calls over the RTL (see the module docstring). `memory`: the host memory the RTL reads
    over AXI, read by the shadow model too; `config`: the engine's parameters, as the RTL is built."""

    def __init__(self, tb: RnicTB, memory, config: TransmitConfig) -> None:
        self.tb = tb
        self.shadow = TransmitEngineModel(config, memory)
        self.stream_ids = config.stream_ids
        self.clock: Callable[[], int] = lambda: 0
        """The tick the fabric's clock is in: the model's time for a row with the transport."""
        # (what the RTL is given, None: nothing; the model's frame and event totals once the RTL has taken it)
        self._commands: deque[tuple[Callable[[], Awaitable[Any]] | None, int, int]] = deque()
        # SACK frames and the others apart (True: SACK): the gateware merges the two
        self._expected_frames: dict[bool, deque[bytes]] = {False: deque(), True: deque()}
        # per kind: the RTL's completion and refusal streams are separate ports
        self._expected_events: dict[type, deque[Event]] = {kind: deque() for kind in (Completion, RefusedRead,
                                                                                      RefusedTsn, TransportStopped)}
        self._model_frames = self._model_events = 0
        self._rtl_frames = self._rtl_events = 0
        self._frames: list[bytes] = []     # the RTL's, checked, for the host
        self._events: list[Event] = []
        self._problems: list[str] = []
        self.frames_sent = 0
        self.sack_frames_sent = 0
        collectors = [self._collect_frames, self._collect_completions, self._collect_refused_reads,
                      self._collect_refused_tsns]
        if tb.transport:
            collectors.append(self._collect_transport_stopped)
        for collect in collectors:
            cocotb.start_soon(collect())

    # -- the host's calls (model.rnic.engine_host.TransmitEngine) -------------------------------------

    def write_association(self, row: TxAssociationRow) -> None:
        self.shadow.write_association(row)
        fields = tx_association_fields(row)
        self._command(lambda: self.tb.write_tx_table("tx_association", fields))

    def write_stream(self, association: int, stream_id: int, first_ssn: int) -> None:
        self.shadow.write_stream(association, stream_id, first_ssn)
        fields = {"index": association * self.stream_ids + stream_id, "first_ssn": first_ssn}
        self._command(lambda: self.tb.write_tx_table("tx_stream", fields))

    def post_work(self, request: WorkRequest) -> None:
        self.shadow.post_work(request)
        fields = work_request_fields(request)
        self._command(lambda: self.tb.post_work(fields))

    def post_read_response(self, request: ReadResponseRequest) -> bool:
        accepted = self.shadow.post_read_response(request)
        fields = read_response_fields(request)
        self._command(lambda: self.tb.post_read_response(fields))
        return accepted

    def post_control(self, request: ControlRequest) -> None:
        self.shadow.post_control(request)
        fields = control_request_fields(request)
        self._command(lambda: self.tb.post_control(fields))

    def tsn_request(self, opcode: TsnOpcode, association: int, tsn: int) -> None:
        self.shadow.tsn_request(opcode, association, tsn)
        fields = tsn_request_fields(opcode, association, tsn)
        self._command(lambda: self.tb.post_tsn(fields))

    def post_sack(self, record: SackRecord) -> None:
        """A SACK of the receive engine's acknowledgement unit: the RTL's goes from its unit to its transmit
        path by itself, so only the model is told, and its frame is expected."""
        self.shadow.post_sack(record)
        self._command(None)

    def write_transport(self, association: int, peer_a_rwnd: int, **parameters) -> None:
        self.shadow.write_transport(association, peer_a_rwnd, **parameters)
        fields = {"association": association, "peer_a_rwnd": peer_a_rwnd, **parameters}
        self._command(lambda: self.tb.write_tx_table("tx_transport", fields))

    def peer_sack(self, association: int, sack: SackChunk, now: int) -> None:
        self.shadow.peer_sack(association, sack, now)
        fields = peer_sack_fields(association, sack)
        self._command(lambda: self.tb.post_peer_sack(fields))

    def take_peer_sack(self, association: int, sack: SackChunk, now: int) -> None:
        """A SACK the receive engine handed the transport unit: the RTL's goes from its receive engine to its
        unit by itself, so only the model is told, and what the unit sends for it is expected."""
        self.shadow.take_peer_sack(association, sack, now)
        self._command(None)

    def peer_shutdown(self, association: int, cumulative_tsn_ack: int, now: int) -> None:
        self.shadow.peer_shutdown(association, cumulative_tsn_ack, now)
        fields = peer_shutdown_fields(association, cumulative_tsn_ack)
        self._command(lambda: self.tb.post_peer_sack(fields))

    def cumulative_tsn_ack(self, association: int) -> int:
        return self.shadow.cumulative_tsn_ack(association)

    def tick(self, now: int) -> None:
        """The transport unit's timers due by tick `now`: the RTL's are ticked by the fabric."""
        self.shadow.tick(now)
        self._command(None)

    def next_deadline(self) -> int | None:
        return self.shadow.next_deadline()

    @property
    def transport_resends(self) -> int:
        return self.shadow.transport_resends

    @property
    def peer_sacks_from_host(self) -> int:
        return self.shadow.peer_sacks_from_host

    @property
    def peer_sacks_from_receive_engine(self) -> int:
        return self.shadow.peer_sacks_from_receive_engine

    def accepts_next(self) -> bool:
        """The model takes a request now and the RTL has caught up with it: nothing is waiting unstarted in
        either (an offered request is the next one both start)."""
        return not self.busy and self.shadow.accepts_next()

    def data_to_send(self, now: int | None = None) -> list[bytes]:
        """The RTL's frames so far (`now`, the tick, is the model's, given at each command)."""
        self._raise_problems()
        frames, self._frames = self._frames, []
        return frames

    def next_events(self) -> list[Event]:
        self._raise_problems()
        events, self._events = self._events, []
        return events

    # -- the simulator's side ---------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Commands not yet given to the RTL, or frames and records the model sent and the RTL not yet."""
        return bool(self._commands or any(self._expected_frames.values()) or any(self._expected_events.values()))

    async def settle(self) -> None:
        """Give the RTL the commands one by one, each once the RTL has sent what the model sent before it."""
        while self._commands:
            send, frames, events = self._commands.popleft()
            if send is None:           # the model's alone: wait for what it expects of the RTL
                await self._reach(frames, events)
                continue
            await send()
            if frames == self._rtl_frames and events == self._rtl_events:
                await ClockCycles(self.tb.dut.clk, QUIET_CYCLES)
            await self._reach(frames, events)
        self._raise_problems()

    def _command(self, send: Callable[[], Awaitable[Any]]) -> None:
        """A call taken by the model: what the model sends now is what the RTL must send for it."""
        frames = self.shadow.data_to_send(now=self.clock())
        events = self.shadow.next_events()
        for frame in frames:
            self._expected_frames[is_sack_frame(frame)].append(frame)
        for event in events:
            self._expected_events[type(event)].append(event)
        self._model_frames += len(frames)
        self._model_events += len(events)
        self._commands.append((send, self._model_frames, self._model_events))

    async def _reach(self, frames: int, events: int) -> None:
        tb = self.tb
        last, quiet = (self._rtl_frames, self._rtl_events), 0
        while (self._rtl_frames < frames or self._rtl_events < events) and not self._problems:
            await ClockCycles(tb.dut.clk, 16)
            now = (self._rtl_frames, self._rtl_events)
            quiet = 0 if now != last else quiet + 16
            last = now
            if quiet >= STALL_CYCLES:
                self._problems.append(
                    f"the RTL sent {self._rtl_frames} frames and {self._rtl_events} records, its model "
                    f"{frames} and {events}, and nothing more came for {STALL_CYCLES} cycles")
        self._raise_problems()

    def _raise_problems(self) -> None:
        if self._problems:
            raise TransmitMismatch("; ".join(self._problems[:4]))

    # -- the RTL's outputs, checked as they arrive ------------------------------------------------

    async def _collect_frames(self) -> None:
        while True:
            frame = await self.tb.next_frame()
            self._rtl_frames += 1
            waiting = self._expected_frames[is_sack_frame(frame)]
            expected = waiting.popleft() if waiting else None
            if frame != expected:
                self._problems.append(f"frame {self._rtl_frames}: the RTL sent {frame.hex()}, its model "
                                      + (expected.hex() if expected is not None else "nothing"))
            self._frames.append(frame)
            self.frames_sent += 1
            self.sack_frames_sent += is_sack_frame(frame)

    def _event(self, event: Event) -> None:
        self._rtl_events += 1
        waiting = self._expected_events[type(event)]
        expected = waiting.popleft() if waiting else None
        if event != expected:
            self._problems.append(f"record {self._rtl_events}: the RTL sent {event}, its model {expected}")
        self._events.append(event)

    async def _collect_completions(self) -> None:
        while True:
            fields = await self.tb.next_completion()
            self._event(Completion(fields["wr_id"], fields["opcode"], fields["association"],
                                   CompletionStatus(fields["status"])))

    async def _collect_refused_reads(self) -> None:
        while True:
            self._event(RefusedRead(ReadResponseRequest(**await self.tb.next_refused_read())))

    async def _collect_refused_tsns(self) -> None:
        while True:
            frame = await self.tb.tsn_refused_sink.recv()
            fields = _fields(tsn_request_layout(), int.from_bytes(bytes(frame.tdata), "little"))
            self._event(RefusedTsn(TsnOpcode(fields["opcode"]), fields["association"], fields["tsn"]))

    async def _collect_transport_stopped(self) -> None:
        while True:
            self._event(transport_stopped(await self.tb.next_transport_stopped()))
