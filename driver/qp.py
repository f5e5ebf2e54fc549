"""Queue pairs (pyverbs `QP`): one DDP stream of the device's SCTP association (RFC 5043 8).

A queue pair is created on a connection id (`CMID.create_qp`), gets its
stream when the connection is established (RFC 5043 6.2, RFC 6581 9), and
takes work: `post_send` (Send, Send with Invalidate, either with Solicited
Event; RDMA Write; RDMA Read, RFC 5040 5) and `post_recv`, one request or a
list of them.  Every request is checked at once: the queue pair must have
been connected (a receive may be posted before, it is handed to the stream
when it opens), the SGEs must lie in registered regions of the queue pair's
PD with the access the request needs, an RDMA Read must stay within the ORD
negotiated for the connection.  Once the queue pair is in error (a
Terminate, a disconnect, the association's end) a request posted completes
at once, flushed, as in verbs.  With `sq_sig_all=False` only the send
requests posted `SendFlags.SIGNALED` complete successfully to the CQ.

Completions (`driver.cq.WC`) carry the caller's wr_id.  Writes and Sends
complete when their last segment is handed to SCTP (RFC 5041 5.4: the
source buffer may be reused); RDMA Reads when their Read Response is placed
(RFC 5040 5.2); receives when the Send is delivered (RFC 5040 5.3), in the
order they were posted (RFC 5041 5.3: untagged buffers are consumed in MSN
order).  A Terminate received or sent ends the stream (RFC 5040 5.5): one
error completion carries its number, the rest are flushed (`driver.cq`).
The request a received Terminate names is found from the Terminate's
headers: the DDP header's STag and TO for a Write (RFC 5041 7.2 tagged
errors), its queue and MSN for a Send or Read Request, the Read Request
header's sink STag and TO for a Read.  When several requests carried those
fields (Writes to one STag and TO), the peer refused the first of them it
met and dropped the rest (RFC 5041 7.1): the oldest of the latest run of
matches is named, a run being requests each posted before the one before
it completed (one that completed before the next was posted went through).
A Write or Send that already completed then completes a second time, with
the peer's verdict.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from collections.abc import Callable
from enum import Enum, IntFlag
from typing import TYPE_CHECKING, Any

from model.errors import ErrorNumber
from model.rdmap.endpoint import ReadLimitExceeded, StreamInError
from model.rdmap.messages import QueueNumber, Terminate
from model.rnic.events import ReadCompletion, ReceiveCompletion, WorkCompletion

from driver.arguments import U32, U64, flags, instance, member, sequence, whole
from driver.cq import CQ, WC, WCFlags, WCOpcode, WCStatus, error_status
from driver.errors import (
    DriverError,
    InvalidArgument,
    NotConnected,
    OrdExceeded,
    QueueFull,
    SgeAccessDenied,
    SgeOutsideRegion,
    TooManySges,
)
from driver.mr import MR, AccessFlags

if TYPE_CHECKING:
    from driver.pd import PD

HISTORY = 64
"""Completed Writes and Sends a queue pair remembers, to name the one a late Terminate is about."""


class WROpcode(Enum):
    """`ibv_wr_opcode` values of iWARP (RFC 5040 5)."""

    RDMA_WRITE = 0
    SEND = 2
    RDMA_READ = 4
    SEND_WITH_INV = 9


class SendFlags(IntFlag):
    """`ibv_send_flags`: SIGNALED asks for the request's completion on a queue pair created with
    `sq_sig_all=False` (errors complete whatever the flag); SOLICITED makes a Send a Send with Solicited Event
    (RFC 5040 5.3)."""

    NONE = 0
    SIGNALED = 1 << 1
    SOLICITED = 1 << 2


class QPState(Enum):
    INIT = "created, not connected"
    RTS = "connected: ready to send"
    ERROR = "in error: a Terminate was sent or received, or the connection ended; posts complete flushed"


@dataclass(frozen=True)
class SGE:
    """A scatter/gather element: `length` bytes at `addr` of the region whose STag is `lkey`."""

    addr: int
    length: int
    lkey: int


@dataclass(frozen=True)
class SendWR:
    """A send-queue work request.  `remote_addr`/`rkey`: the peer's buffer of an RDMA Write or Read;
    `invalidate_rkey`: the peer's STag a SEND_WITH_INV revokes (RFC 5040 5.3)."""

    wr_id: int
    opcode: WROpcode
    sg_list: tuple[SGE, ...] | list[SGE] = ()
    send_flags: SendFlags = SendFlags.NONE
    remote_addr: int = 0
    rkey: int = 0
    invalidate_rkey: int | None = None


@dataclass(frozen=True)
class RecvWR:
    """A receive-queue work request: one buffer for one inbound Send."""

    wr_id: int
    sg_list: tuple[SGE, ...] | list[SGE] = ()


@dataclass(frozen=True)
class QPCap:
    """`ibv_qp_cap`: the queue pair's depths and SGE counts."""

    max_send_wr: int = 64
    max_recv_wr: int = 64
    max_send_sge: int = 4
    max_recv_sge: int = 1


@dataclass
class _SendRecord:
    wr_id: int
    opcode: WCOpcode
    length: int
    rkey: int = 0
    remote_addr: int = 0
    msn: int | None = None
    """Send: its MSN on QN 0; Read: its Read Request's MSN on QN 1 (RFC 5041 4.3, first 1)."""
    local_addr: int = 0
    number: int = 0
    """Its place in the queue pair's posting order, from 1."""
    completed_at: int | None = None
    """How many requests had been posted when it completed; None while outstanding."""
    signaled: bool = True
    """Its successful completion goes to the CQ (`sq_sig_all` or `SendFlags.SIGNALED`)."""


@dataclass
class _RecvRecord:
    wr_id: int
    sge: SGE


@dataclass
class _Msns:
    send: int = 0
    read: int = 0
    posted: int = 0
    """Send-queue requests posted so far (`_SendRecord.number`)."""
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY))


def _check_request(wr: SendWR | RecvWR, name: str) -> tuple[SGE, ...]:
    """The request's wr_id and SGEs: ids are verbs' uint64, addresses 64 bits, lengths and lkeys 32 (RFC 5041
    4.2, 5.2); `name` is the request's as written at the call (`wr`, `wr[2]`)."""
    whole(f"{name}.wr_id", wr.wr_id, 0, U64)
    sg_list = sequence(f"{name}.sg_list", wr.sg_list)
    for index, sge in enumerate(sg_list):
        sge_name = f"{name}.sg_list[{index}]"
        instance(sge_name, sge, SGE)
        whole(f"{sge_name}.addr", sge.addr, 0, U64)
        whole(f"{sge_name}.length", sge.length, 0, U32)
        whole(f"{sge_name}.lkey", sge.lkey, 0, U32)
    return sg_list


def _check_send(wr: SendWR, length: int, name: str) -> SendFlags:
    """The opcode and the fields it uses: the remote buffer of a Write or Read inside the 64-bit Tagged Offset
    space (RFC 5041 4.2), the STag to invalidate of a Send with Invalidate alone (RFC 5040 5.3), the Solicited
    Event of Sends alone (RFC 5040 4.3).  The request's flags."""
    opcode = member(f"{name}.opcode", wr.opcode, WROpcode)
    send_flags = flags(f"{name}.send_flags", wr.send_flags, SendFlags)
    whole(f"{name}.remote_addr", wr.remote_addr, 0, U64)
    whole(f"{name}.rkey", wr.rkey, 0, U32)
    if opcode in (WROpcode.RDMA_WRITE, WROpcode.RDMA_READ) and wr.remote_addr + length > U64 + 1:
        raise InvalidArgument(f"{name}.remote_addr 0x{wr.remote_addr:x} + {length} bytes runs past the 64-bit "
                              "Tagged Offsets (RFC 5041 4.2)")
    if opcode is WROpcode.SEND_WITH_INV:
        if wr.invalidate_rkey is None:
            raise InvalidArgument(f"{name}.invalidate_rkey: SEND_WITH_INV needs the STag to invalidate "
                                  "(RFC 5040 5.3)")
        whole(f"{name}.invalidate_rkey", wr.invalidate_rkey, 0, U32)
    elif wr.invalidate_rkey is not None:
        raise InvalidArgument(f"{name}.invalidate_rkey is for SEND_WITH_INV alone, not {opcode.name} "
                              "(RFC 5040 5.3)")
    if send_flags & SendFlags.SOLICITED and opcode not in (WROpcode.SEND, WROpcode.SEND_WITH_INV):
        raise InvalidArgument(f"{name}.send_flags SOLICITED is for Sends alone, not {opcode.name} (RFC 5040 4.3)")
    return send_flags


def _post_each(wr: object, kind: type, post: Callable[[Any, str], None]) -> None:
    """`post(request, name)` for one request, or for each of a list in order, stopping at the first refused
    (verbs' `bad_wr`: the error holds it)."""
    if not isinstance(wr, (list, tuple)):
        post(instance("wr", wr, kind), "wr")
        return
    for index, request in enumerate(wr):
        name = f"wr[{index}]"
        try:
            post(instance(name, request, kind), name)
        except DriverError as error:
            error.bad_wr = request
            raise


def _error_number(terminate: Terminate) -> ErrorNumber:
    layer, etype, code = terminate.number
    known = terminate.terminate_layer
    return ErrorNumber(known if known is not None else layer, etype, code)


def _carried(record: _SendRecord, terminate: Terminate) -> bool:
    """Whether `record` sent the message whose headers the Terminate quotes: the Read Request header's source STag
    and TO and sink TO; the tagged DDP header's STag and a TO inside the Write; the untagged header's queue and
    MSN (RFC 5040 4.8, RFC 5041 4.2, 4.3)."""
    request, header = terminate.rdma_header, terminate.ddp_header
    if request is not None:
        return (record.opcode is WCOpcode.RDMA_READ and record.rkey == request.source_stag
                and record.remote_addr == request.source_to and record.local_addr == request.sink_to)
    if header is None:
        return False
    if header.tagged:
        return (record.opcode is WCOpcode.RDMA_WRITE and record.rkey == header.stag
                and record.remote_addr <= header.to < record.remote_addr + max(record.length, 1))
    if header.qn == QueueNumber.SEND:
        return record.opcode is WCOpcode.SEND and record.msn == header.msn
    return header.qn == QueueNumber.READ_REQUEST and record.opcode is WCOpcode.RDMA_READ and record.msn == header.msn


class QP:
    """A queue pair (see the module docstring).

    Driver-internal interface: its connection id's calls (`stream_opened`, `flush`) and its device's
    (`completed`, `received`, `terminate_arrived`); it hands completions to its CQs through theirs
    (`CQ.deliver`)."""

    def __init__(self, pd: PD, send_cq: CQ, recv_cq: CQ, cap: QPCap, qp_num: int, sq_sig_all: bool = True) -> None:
        attr = pd.device.attr
        for name, limit in (("max_send_wr", attr.max_qp_wr), ("max_recv_wr", attr.max_qp_wr),
                            ("max_send_sge", attr.max_send_sge), ("max_recv_sge", attr.max_recv_sge)):
            whole(f"cap.{name}", getattr(cap, name), 1, limit)
        self.pd = pd
        self.send_cq = send_cq
        self.recv_cq = recv_cq
        self.cap = cap
        self.qp_num = qp_num
        self.sq_sig_all = sq_sig_all
        """Every send-queue request completes to the CQ; False: only those posted with `SendFlags.SIGNALED`."""
        self.state = QPState.INIT
        self.stream_id: int | None = None
        self.ird = 0
        self.ord = 0
        self.error: ErrorNumber | None = None
        """The number of the Terminate that put the queue pair in error, if one did."""
        self._sends: OrderedDict[int, _SendRecord] = OrderedDict()
        self._receives: deque[_RecvRecord] = deque()
        self._unposted: deque[_RecvRecord] = deque()
        self._msns = _Msns()

    @property
    def device(self):
        return self.pd.device

    # -- posting ------------------------------------------------------------------

    def post_recv(self, wr: RecvWR | list[RecvWR] | tuple[RecvWR, ...]) -> None:
        """Post a receive buffer, or a list of them in order (`ibv_post_recv`); allowed before the connection is
        established.  On a queue pair in error (its connection ended) a receive completes at once, flushed
        (`WR_FLUSH_ERR`).  A list stops at the first request refused: the error names it (`wr[2]...`) and holds
        it (`bad_wr`); those before it are posted."""
        _post_each(wr, RecvWR, self._post_recv)

    def _post_recv(self, wr: RecvWR, name: str) -> None:
        sg_list = _check_request(wr, name)
        self.device.check_open()
        if len(sg_list) > self.cap.max_recv_sge:
            raise TooManySges(f"{name}.sg_list has {len(sg_list)} SGEs; the receive queue takes "
                              f"{self.cap.max_recv_sge} (an untagged buffer is one range of host memory, RFC 5041 3)")
        sge = sg_list[0] if sg_list else SGE(0, 0, 0)
        if sg_list:
            self._region(sge, AccessFlags.LOCAL_WRITE, "receive into", f"{name}.sg_list[0]")
        if self.state is QPState.ERROR:
            self.recv_cq.deliver(WC(wr.wr_id, WCStatus.WR_FLUSH_ERR, WCOpcode.RECV, 0, self, error=self.error))
            return
        if len(self._receives) + len(self._unposted) >= self.cap.max_recv_wr:
            raise QueueFull(f"{self.cap.max_recv_wr} receives already posted")
        record = _RecvRecord(wr.wr_id, sge)
        if self.state is QPState.RTS:
            self._hand_receive(record)
        else:
            self._unposted.append(record)

    def post_send(self, wr: SendWR | list[SendWR] | tuple[SendWR, ...]) -> None:
        """Post a Send variant, RDMA Write or RDMA Read, or a list of them in order (`ibv_post_send`).  On a queue
        pair in error (a Terminate or the end of its connection) a request completes at once, flushed
        (`WR_FLUSH_ERR`), as in verbs.  A list stops at the first request refused: the error names it
        (`wr[2].sg_list[0].lkey ...`) and holds it (`bad_wr`); those before it are posted, those after it not."""
        _post_each(wr, SendWR, self._post_send)

    def _post_send(self, wr: SendWR, name: str) -> None:
        sg_list = _check_request(wr, name)
        length = sum(sge.length for sge in sg_list)
        send_flags = _check_send(wr, length, name)
        self.device.check_open()
        if self.state is QPState.INIT:
            raise NotConnected(f"QP {self.qp_num} is not connected ({self.state.value})")
        read = wr.opcode is WROpcode.RDMA_READ
        if read and len(sg_list) != 1:
            raise TooManySges(f"{name}.sg_list: an RDMA Read takes exactly one SGE, its data sink (RFC 5040 4.4), "
                              f"not {len(sg_list)}")
        if not read and len(sg_list) > self.cap.max_send_sge:
            raise TooManySges(f"{name}.sg_list has {len(sg_list)} SGEs; the send queue takes "
                              f"{self.cap.max_send_sge}")
        for index, sge in enumerate(sg_list):
            if read:
                self._region(sge, AccessFlags.LOCAL_WRITE, "read into", f"{name}.sg_list[{index}]")
            else:
                self._region(sge, AccessFlags(0), "send from", f"{name}.sg_list[{index}]")
        if length > self.device.attr.max_msg_sz:
            raise InvalidArgument(f"{name}.sg_list holds a message of {length} bytes: at most "
                                  f"{self.device.attr.max_msg_sz} (RFC 5041 5.2)")
        opcode = WCOpcode.RDMA_READ if read else WCOpcode.RDMA_WRITE if wr.opcode is WROpcode.RDMA_WRITE \
            else WCOpcode.SEND
        if self.state is QPState.ERROR:
            self.send_cq.deliver(WC(wr.wr_id, WCStatus.WR_FLUSH_ERR, opcode, 0, self, error=self.error))
            return
        if len(self._sends) >= self.cap.max_send_wr:
            raise QueueFull(f"{self.cap.max_send_wr} send requests already outstanding")
        self.device.sync_buffers()  # a caller's buffer: what it wrote there is what the device sends
        backend, stream = self.device.backend, self.stream_id
        try:
            if read:
                sge = sg_list[0]
                try:
                    token = backend.post_read(stream, sge.lkey, sge.addr, wr.rkey, wr.remote_addr, sge.length)
                except ReadLimitExceeded as error:
                    raise OrdExceeded(f"ORD {self.ord}: that many RDMA Reads are outstanding on QP {self.qp_num} "
                                      "(RFC 5040 5.2, RFC 6581 9)") from error
                self._msns.read += 1
                record = _SendRecord(wr.wr_id, opcode, sge.length, wr.rkey, wr.remote_addr, self._msns.read, sge.addr)
            elif opcode is WCOpcode.RDMA_WRITE:
                gather = [(sge.addr, sge.length) for sge in sg_list]
                token = backend.post_write(stream, wr.rkey, wr.remote_addr, gather, length)
                record = _SendRecord(wr.wr_id, opcode, length, wr.rkey, wr.remote_addr)
            else:
                gather = [(sge.addr, sge.length) for sge in sg_list]
                invalidate = wr.invalidate_rkey if wr.opcode is WROpcode.SEND_WITH_INV else None
                token = backend.post_send(stream, gather, length, bool(wr.send_flags & SendFlags.SOLICITED),
                                          invalidate)
                self._msns.send += 1
                record = _SendRecord(wr.wr_id, opcode, length, msn=self._msns.send)
        except StreamInError as error:
            raise NotConnected(str(error)) from error
        record.signaled = self.sq_sig_all or bool(send_flags & SendFlags.SIGNALED)
        self._track(token, record)

    # -- the driver-internal interface: the calls of its connection id and its device ----------

    def stream_opened(self, stream_id: int, ird: int, ord: int) -> None:
        """Driver-internal (the connection id's): the stream's session is open with the IRD and ORD in force; the
        receives posted before it are handed over.

        :meta private:"""
        self.stream_id, self.ird, self.ord = stream_id, ird, ord
        self.state = QPState.RTS
        while self._unposted:
            self._hand_receive(self._unposted.popleft())

    def completed(self, event: WorkCompletion | ReadCompletion) -> None:
        """Driver-internal (the device's): a Write or Send handed to SCTP, a Read placed (RFC 5041 5.4, RFC 5040
        5.2).

        :meta private:"""
        record = self._sends.pop(event.wr_id, None)
        if record is None:
            return  # flushed already
        record.completed_at = self._msns.posted
        self._msns.history.append(record)
        if record.signaled:
            self.send_cq.deliver(WC(record.wr_id, WCStatus.SUCCESS, record.opcode, event.length, self))

    def received(self, event: ReceiveCompletion) -> None:
        """Driver-internal (the device's): a Send delivered into the oldest receive (RFC 5041 5.3).

        :meta private:"""
        if not self._receives:
            return
        record = self._receives.popleft()
        flags = WCFlags.WITH_INV if event.invalidated_stag is not None else WCFlags.NONE
        self.recv_cq.deliver(WC(record.wr_id, WCStatus.SUCCESS, WCOpcode.RECV, event.length, self, flags,
                              event.invalidated_stag, event.solicited))

    def terminate_arrived(self, terminate: Terminate, sent: bool) -> ErrorNumber | None:
        """Driver-internal (the device's): a Terminate sent or received (RFC 5040 5.5): one error completion with
        its number, then flush; its number (None when the queue pair was already in error).

        :meta private:"""
        if self.state is QPState.ERROR:
            return None
        number = _error_number(terminate)
        if sent:
            header = terminate.ddp_header
            consumed = (header is not None and not header.tagged and header.qn == QueueNumber.SEND
                        and self._receives)
            wr_id = self._receives.popleft().wr_id if consumed else 0
            self.recv_cq.deliver(WC(wr_id, error_status(number, remote=False), WCOpcode.RECV, 0, self, error=number))
        else:
            record = self._named_by(terminate)
            if record is not None:
                self._sends = OrderedDict((k, v) for k, v in self._sends.items() if v is not record)
            self.send_cq.deliver(WC(record.wr_id if record else 0, error_status(number, remote=True),
                                  record.opcode if record else WCOpcode.SEND, 0, self, error=number, remote=True))
        self._flush(number)
        return number

    def flush(self) -> None:
        """Driver-internal (the connection id's): the stream or the association ended without a Terminate: flush
        what is outstanding.  A queue pair that never connected stays unconnected (posting a send raises
        `NotConnected`); its receives are flushed.

        :meta private:"""
        if self.state is QPState.RTS:
            self._flush(None)
        elif self.state is QPState.INIT:
            for record in self._unposted:
                self.recv_cq.deliver(WC(record.wr_id, WCStatus.WR_FLUSH_ERR, WCOpcode.RECV, 0, self))
            self._unposted.clear()

    # -- internals ----------------------------------------------------------------------

    def _region(self, sge: SGE, need: AccessFlags, what: str, name: str) -> MR:
        region = self.pd.region(sge.lkey)
        if region is None or not region.valid:
            raise SgeOutsideRegion(f"{name}.lkey 0x{sge.lkey:08x} is no valid region of this QP's protection domain")
        if not region.contains(sge.addr, sge.length):
            raise SgeOutsideRegion(f"{name} [0x{sge.addr:x}, +{sge.length}) is outside region "
                                   f"[0x{region.buf:x}, +{region.length}) of lkey 0x{sge.lkey:08x}")
        if need and not region.access & need:
            raise SgeAccessDenied(f"{name}: cannot {what} lkey 0x{sge.lkey:08x}: the region lacks {need!r}")
        return region

    def _hand_receive(self, record: _RecvRecord) -> None:
        self.device.backend.post_recv(self.stream_id, record.sge.addr, record.sge.length)
        self._receives.append(record)

    def _track(self, token: int, record: _SendRecord) -> None:
        self._msns.posted += 1
        record.number = self._msns.posted
        self._sends[token] = record

    def _named_by(self, terminate: Terminate) -> _SendRecord | None:
        """The send-queue request the Terminate's headers name (see the module docstring).  Requests may carry the
        same fields (Writes to one STag and TO): the peer refused the first of them it met and dropped the rest
        (RFC 5041 7.1), so the oldest of a run of matches, each posted before the one before it completed, is
        named; a match that had completed before the next one was posted went through."""
        records = sorted([*self._sends.values(), *self._msns.history], key=lambda record: record.number)
        matches = [record for record in records if _carried(record, terminate)]
        if not matches:
            return None
        named = matches[-1]
        for older in reversed(matches[:-1]):
            if older.completed_at is not None and older.completed_at < named.number:
                break
            named = older
        return named

    def _flush(self, number: ErrorNumber | None) -> None:
        self.state = QPState.ERROR
        self.error = number
        for record in self._sends.values():
            self.send_cq.deliver(WC(record.wr_id, WCStatus.WR_FLUSH_ERR, record.opcode, 0, self, error=number))
        self._sends.clear()
        for record in list(self._receives) + list(self._unposted):
            self.recv_cq.deliver(WC(record.wr_id, WCStatus.WR_FLUSH_ERR, WCOpcode.RECV, 0, self, error=number))
        self._receives.clear()
        self._unposted.clear()
