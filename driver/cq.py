"""Completion queues and work completions (pyverbs `CQ`, `WC`).

A work completion says how a work request ended.  For a failure it also
carries the RFC error number (`WC.error`: layer, type, code as a Terminate
carries them, RFC 5040 and RFC 5041 7.2, RFC 6581 8):

* the peer's Terminate (`WC.remote` True) on the send queue: the status is
  REM_ACCESS_ERR for a tagged-buffer or protection error, REM_OP_ERR for an
  operation or untagged-buffer error, REM_INV_REQ_ERR for an LLP error;
* a Terminate this side sent because of an inbound message (`remote` False)
  on the receive queue: LOC_PROT_ERR, LOC_QP_OP_ERR, LOC_LEN_ERR likewise;
* every other request outstanding on the queue pair then: WR_FLUSH_ERR,
  with the same number.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from enum import Enum, IntFlag
from typing import TYPE_CHECKING

from model.errors import DdpError, ErrorNumber, TerminateLayer, error_name

from driver.arguments import boolean, instance, whole
from driver.arguments import timeout as check_timeout
from driver.errors import InvalidArgument, InvalidState

if TYPE_CHECKING:
    from driver.device import Device
    from driver.qp import QP

DEFAULT_WAIT = 3600.0
"""Seconds of the fabric's clock a wait lasts at most unless told otherwise (`WaitTimeout`)."""
MAX_POLL = (1 << 31) - 1
"""`ibv_poll_cq`'s num_entries is a C int."""


class WCStatus(Enum):
    """`ibv_wc_status` values the driver reports."""

    SUCCESS = 0
    LOC_LEN_ERR = 1
    LOC_QP_OP_ERR = 2
    LOC_PROT_ERR = 4
    WR_FLUSH_ERR = 5
    REM_INV_REQ_ERR = 9
    REM_ACCESS_ERR = 10
    REM_OP_ERR = 11
    FATAL_ERR = 19


class WCOpcode(Enum):
    """`ibv_wc_opcode`: what the completed request was."""

    SEND = 0
    RDMA_WRITE = 1
    RDMA_READ = 2
    RECV = 128


class WCFlags(IntFlag):
    """`ibv_wc_flags`: WITH_INV, a received Send with Invalidate revoked `invalidated_rkey`."""

    NONE = 0
    WITH_INV = 1 << 3


@dataclass(frozen=True)
class WC:
    """A work completion."""

    wr_id: int
    status: WCStatus
    opcode: WCOpcode
    byte_len: int
    qp: QP
    wc_flags: WCFlags = WCFlags.NONE
    invalidated_rkey: int | None = None
    solicited: bool = False
    """A received Send with Solicited Event (RFC 5040 5.3)."""
    error: ErrorNumber | None = None
    """For a failure: the (layer, type, code) of the Terminate received or sent."""
    remote: bool = False
    """The error was the peer's verdict (a Terminate received), not this side's."""

    @property
    def qp_num(self) -> int:
        return self.qp.qp_num

    @property
    def ok(self) -> bool:
        return self.status is WCStatus.SUCCESS

    def describe(self) -> str:
        """The RFC's name of the error, e.g. "Tagged Buffer Error: Invalid STag"; "" on success."""
        if self.error is None:
            return ""
        return error_name(*self.error)


def error_status(error: ErrorNumber, remote: bool) -> WCStatus:
    """The status of a request ended by the Terminate carrying `error` (see the module docstring)."""
    layer, etype, _ = error
    if etype == 0 and layer != TerminateLayer.LLP:
        return WCStatus.FATAL_ERR  # local catastrophic (RFC 5040, RFC 5041 7.2 type 0)
    if tuple(error) == DdpError.MESSAGE_TOO_LONG.number:
        return WCStatus.REM_INV_REQ_ERR if remote else WCStatus.LOC_LEN_ERR
    protection = etype == 1  # RDMAP Remote Protection Error, DDP Tagged Buffer Error
    if layer == TerminateLayer.LLP:
        return WCStatus.REM_INV_REQ_ERR if remote else WCStatus.LOC_QP_OP_ERR
    if remote:
        return WCStatus.REM_ACCESS_ERR if protection else WCStatus.REM_OP_ERR
    return WCStatus.LOC_PROT_ERR if protection else WCStatus.LOC_QP_OP_ERR


class CompletionChannel:
    """`ibv_comp_channel`: where the completion queues created on it (`create_cq(channel=...)`) report that a
    completion arrived while they were armed (`CQ.req_notify`).  `await get_cq_event()` waits for the next such
    event and returns its CQ (`ibv_get_cq_event`); `poll_cq_event()` takes one without waiting.  Each event is
    one-shot: the CQ is re-armed with `req_notify`, and its events are acknowledged with `CQ.ack_events`."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self._events: deque[CQ] = deque()

    def get_cq_event(self, timeout: float | None = DEFAULT_WAIT) -> Coroutine[None, None, CQ]:
        """The CQ of the next completion event, waiting for it (at most `timeout` seconds of the fabric's clock,
        checked at the call)."""
        return self._get_cq_event(check_timeout("timeout", timeout))

    async def _get_cq_event(self, timeout: float | None) -> CQ:
        await self.device.fabric.wait_until(lambda: bool(self._events), timeout, on_events=True)
        return self._take()

    def poll_cq_event(self) -> CQ | None:
        """The CQ of the next completion event if one is there; never waits."""
        self.device.fabric.dispatch()
        return self._take() if self._events else None

    def _take(self) -> CQ:
        cq = self._events.popleft()
        cq._unacked += 1
        return cq

    def notify(self, cq: CQ) -> None:
        """Driver-internal (an armed CQ's): `cq` has a completion for the channel's waiter.

        :meta private:"""
        self._events.append(cq)


class CQ:
    """A completion queue (`ibv_create_cq`): `poll` takes what is there, `wait` waits for it; on a completion
    channel, `req_notify` arms it to report its next completion there.  Driver-internal interface: `deliver`, its
    queue pairs' call; it tells its channel through the channel's (`CompletionChannel.notify`)."""

    def __init__(self, device: Device, cqe: int, channel: CompletionChannel | None = None) -> None:
        whole("cqe", cqe, 1, device.attr.max_cqe)
        if channel is not None:
            instance("channel", channel, CompletionChannel)
            if channel.device is not device:
                raise InvalidArgument(f"channel belongs to device {channel.device.name}, not {device.name}")
        self.device = device
        self.cqe = cqe
        self.channel = channel
        self._entries: deque[WC] = deque()
        self._armed: bool | None = None
        """None: not armed; else armed, True for solicited completions only."""
        self._unacked = 0

    def req_notify(self, solicited_only: bool = False) -> None:
        """Arm the CQ (`ibv_req_notify_cq`): the next completion added to it, or with `solicited_only` the next
        receive of a Send with Solicited Event (RFC 5040 4.1, 5.3) or failed completion, puts one event on the
        CQ's channel; completions already queued do not.  One event per arming."""
        boolean("solicited_only", solicited_only)
        self.device.check_open()
        if self.channel is None:
            raise InvalidState("req_notify on a CQ without a completion channel (create_cq(channel=...))")
        if self._armed is not True or not solicited_only:  # arming for every completion widens a solicited arming
            self._armed = solicited_only

    def ack_events(self, num_events: int) -> None:
        """Acknowledge `num_events` events this CQ's channel returned (`ibv_ack_cq_events`)."""
        whole("num_events", num_events, 0, self._unacked)
        self._unacked -= num_events

    def poll(self, num_entries: int = 1) -> list[WC]:
        """Up to `num_entries` completions, oldest first; never waits (`ibv_poll_cq`)."""
        whole("num_entries", num_entries, 1, MAX_POLL)
        self.device.fabric.dispatch()
        return [self._entries.popleft() for _ in range(min(num_entries, len(self._entries)))]

    def wait(self, num_entries: int = 1, timeout: float | None = DEFAULT_WAIT) -> Coroutine[None, None, list[WC]]:
        """Exactly `num_entries` (at most the queue's `cqe`) completions, waiting for them as long as it takes
        (at most `timeout` seconds of the fabric's clock); the arguments are checked at the call."""
        whole("num_entries", num_entries, 1, self.cqe)
        return self._wait(num_entries, check_timeout("timeout", timeout))

    async def _wait(self, num_entries: int, timeout: float | None) -> list[WC]:
        await self.device.fabric.wait_until(lambda: len(self._entries) >= num_entries, timeout, on_events=True)
        return self.poll(num_entries)

    def __len__(self) -> int:
        self.device.fabric.dispatch()
        return len(self._entries)

    def deliver(self, wc: WC) -> None:
        """Driver-internal (a queue pair's): a completion into the queue, and the channel notified if armed.

        :meta private:"""
        self._entries.append(wc)
        armed = self._armed
        if armed is None or self.channel is None:
            return
        if armed and wc.ok and not (wc.opcode is WCOpcode.RECV and wc.solicited):
            return  # armed for solicited completions: a receive without SE, or a send, does not fire
        self._armed = None
        self.channel.notify(self)
