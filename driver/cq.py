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

from driver.arguments import timeout as check_timeout, whole

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


class CQ:
    """A completion queue (`ibv_create_cq`): `poll` takes what is there, `wait` waits for it."""

    def __init__(self, device: Device, cqe: int) -> None:
        whole("cqe", cqe, 1, device.attr.max_cqe)
        self.device = device
        self.cqe = cqe
        self._entries: deque[WC] = deque()

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
        await self.device.fabric.wait_until(lambda: len(self._entries) >= num_entries, timeout)
        return self.poll(num_entries)

    def __len__(self) -> int:
        self.device.fabric.dispatch()
        return len(self._entries)

    def _push(self, wc: WC) -> None:
        self._entries.append(wc)
