"""Connection management, rdma_cm-shaped: connection ids, parameters and events.

A connection is one DDP stream session (RFC 5043 6) on the device's SCTP
association (RFC 4960), set up with the RFC 6581 enhanced negotiation:

* passive side: `listen()` on a `CMID`; each Initiate arrives as a
  CONNECT_REQUEST event carrying a new `CMID` (`event.id`), the peer's
  private data and its resources; that id accepts or rejects it (`accept`, `reject`; private
  data in either, RFC 5043 6.2, 6.3);
* active side: `connect((ip, port), ConnParam(...))` opens the association
  if the device has none (RFC 4960 5.1), then sends the Enhanced Initiate on
  a free stream;
* `ConnParam.responder_resources` is the IRD and `initiator_depth` the ORD
  this side offers (RFC 6581 9); ESTABLISHED carries what was negotiated,
  and the queue pair enforces the ORD; `rtr_types` are the RTR messages
  this side can send (initiator, in preference order) or accept (responder);
* events, one queue per id (`get_cm_event`): CONNECT_REQUEST, ESTABLISHED
  (initiator: the Enhanced Accept arrived and the RTR is on its way;
  responder: the RTR arrived, RFC 6581 9), REJECTED (the peer's Reject, or
  its provider's refusal, RFC 5043 6.3, 6.4), UNREACHABLE (no device at the
  address, or the association could not be set up: RFC 4960 5.1 C),
  CONNECT_ERROR (a failed negotiation or a peer without DDP, RFC 6581 8,
  RFC 5043 11.1), DISCONNECTED (either side's `disconnect`, RFC 5043 6.2,
  an RDMAP Terminate sent or received, which the side that sent it
  follows with the DDP Stream Terminate, or the association's end).  Each event says why (`reason`) and, when an
  RFC numbers the cause, its number (`error`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from model.ddp.negotiation import LocalResources, RtrType
from model.ddp.sctp_adaptation import MAX_PRIVATE_DATA, EnhancedData
from model.ddp.session import NegotiationRefused, SessionStateError
from model.errors import ErrorNumber, error_name

from driver.arguments import address as check_address
from driver.arguments import boolean, data, instance, member, sequence, whole
from driver.arguments import timeout as check_timeout
from driver.cq import CQ, DEFAULT_WAIT
from driver.errors import InvalidArgument, InvalidState, PrivateDataTooLong, WrongArgumentType
from driver.pd import PD
from driver.qp import QP, QPCap

if TYPE_CHECKING:
    from driver.device import Device

MAX_USER_PRIVATE_DATA = MAX_PRIVATE_DATA - EnhancedData.LENGTH
"""RFC 5043 5.2.3 allows 512 bytes of private data in any message; the enhanced connection data take 4 of
them (RFC 6581 7, 9), and every connection here is enhanced."""
MAX_BACKLOG = (1 << 31) - 1
"""`rdma_listen`'s backlog is a C int; 0 is the default."""


class CMEventType(Enum):
    """`rdma_cm_event_type` values the driver reports."""

    CONNECT_REQUEST = 4
    CONNECT_ERROR = 6
    UNREACHABLE = 7
    REJECTED = 8
    ESTABLISHED = 9
    DISCONNECTED = 10


class CMState(Enum):
    IDLE = "idle"
    LISTENING = "listening"
    CONNECTING = "connecting"
    REQUESTED = "connect request waiting for accept or reject"
    ACCEPTED = "accepted, waiting for the RTR"
    ESTABLISHED = "established"
    DISCONNECTING = "disconnecting"
    CLOSED = "closed"


@dataclass(frozen=True)
class ConnParam:
    """`rdma_conn_param`: private data, IRD (`responder_resources`), ORD (`initiator_depth`) and the RFC 6581
    RTR messages this side supports."""

    responder_resources: int = 4
    initiator_depth: int = 4
    private_data: bytes = b""
    rtr_types: tuple[RtrType, ...] = (RtrType.WRITE,)


@dataclass(frozen=True)
class CMEvent:
    event_type: CMEventType
    id: CMID
    """The id the event is about: for CONNECT_REQUEST, the new id to accept or reject."""
    private_data: bytes = b""
    """The peer's private data: its Initiate (CONNECT_REQUEST), Accept (ESTABLISHED) or Reject (REJECTED)."""
    conn_param: ConnParam | None = None
    """CONNECT_REQUEST: the peer's offer seen from this side (rdma_cm swaps them: `responder_resources`
    is the peer's ORD, `initiator_depth` its IRD); ESTABLISHED: the IRD and ORD in force (RFC 6581 9)."""
    reason: str = ""
    error: ErrorNumber | None = None

    @property
    def status(self) -> int:
        """0 for success events, else -1 (rdma_cm reports an errno-like status)."""
        ok = (CMEventType.CONNECT_REQUEST, CMEventType.ESTABLISHED, CMEventType.DISCONNECTED)
        return 0 if self.event_type in ok else -1


@dataclass
class _Pending:
    address: tuple[str, int]
    param: ConnParam


class CMID:
    """`rdma_cm_id`: one listening point or one connection of a device, with its own event queue.

    Driver-internal interface (its device's calls, routed from the backend's events by `Device`'s table):
    `opened`, `established`, `terminated`, `ended`, `post_event`, `pending_param`; the id keeps its own state
    and drives its queue pair through the queue pair's (`QP.stream_opened`, `QP.flush`)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.state = CMState.IDLE
        self.qp: QP | None = None
        self.stream_id: int | None = None
        self.peer_private_data = b""
        self._events: deque[CMEvent] = deque()
        self._pending: _Pending | None = None
        self._negotiated: tuple[int, int, bytes] = (0, 0, b"")
        self._port: int | None = None
        """The port `bind_addr` gave; None: the device's."""

    # -- set-up -----------------------------------------------------------------------

    def create_qp(self, pd: PD, send_cq: CQ, recv_cq: CQ | None = None, cap: QPCap | None = None,
                  sq_sig_all: bool = True) -> QP:
        """`rdma_create_qp`: the queue pair this connection will carry.  `sq_sig_all` False: only the send requests
        posted with `SendFlags.SIGNALED` complete successfully to the CQ (`ibv_qp_init_attr.sq_sig_all`)."""
        self.device.check_open()
        boolean("sq_sig_all", sq_sig_all)
        if self.qp is not None:
            raise InvalidState("this id already has a queue pair")
        if self.state in (CMState.LISTENING, CMState.CLOSED):
            raise InvalidState(f"create_qp on an id that is {self.state.value}")
        for name, value, kind in (("pd", pd, PD), ("send_cq", send_cq, CQ), ("recv_cq", recv_cq, CQ),
                                  ("cap", cap, QPCap)):
            if value is None and name in ("recv_cq", "cap"):
                continue
            instance(name, value, kind)
            if name != "cap" and value.device is not self.device:
                raise InvalidArgument(f"{name} belongs to device {value.device.name}, not this id's {self.device.name}")
        self.qp = QP(pd, send_cq, send_cq if recv_cq is None else recv_cq, QPCap() if cap is None else cap,
                     self.device.next_qp_num(), sq_sig_all)
        return self.qp

    def bind_addr(self, address: tuple[str, int]) -> None:
        """`rdma_bind_addr`: the SCTP port `listen` takes, on the device's IPv4 address (or 0.0.0.0, any)."""
        self.device.check_open()
        ip, port = check_address("address", address)
        if ip not in (self.device.address[0], "0.0.0.0"):
            raise InvalidArgument(f"address[0] (ip) {ip} is not {self.device.name}'s address "
                                  f"{self.device.address[0]}")
        if self.state is not CMState.IDLE:
            raise InvalidState(f"bind_addr on an id that is {self.state.value}")
        self._port = port

    def listen(self, backlog: int = 16) -> None:
        """`rdma_listen` on the port `bind_addr` gave, or the device's (`Device.address`); a device listens on as
        many ports as it is asked, and a peer's connection reaches the id of the port its association was made
        to (RFC 4960 5.1: the INIT's destination port)."""
        self.device.check_open()
        whole("backlog", backlog, 0, MAX_BACKLOG)
        if self.state is not CMState.IDLE:
            raise InvalidState(f"listen on an id that is {self.state.value}")
        self.device.start_listening(self, self.device.address[1] if self._port is None else self._port)
        self.state = CMState.LISTENING

    def connect(self, address: tuple[str, int], param: ConnParam = ConnParam()) -> None:
        """`rdma_connect` to the device at (ip, port); the outcome arrives as an event.  On a real transport
        (`open_device`) ip may be a host name: it is resolved first (`rdma_resolve_addr`, `socket.getaddrinfo`)."""
        self.device.check_open()
        address = check_address("address", self.device.resolve(address))
        if self.state is not CMState.IDLE:
            raise InvalidState(f"connect on an id that is {self.state.value}")
        if self.qp is None:
            raise InvalidState("create_qp before connect")
        self._check_param(param)
        self.device.check_peer(address)
        self.state = CMState.CONNECTING
        self._pending = _Pending(address, param)
        self.device.connect_id(self, address)

    def accept(self, param: ConnParam = ConnParam()) -> None:
        """`rdma_accept` a CONNECT_REQUEST (RFC 5043 6.2 Accept, RFC 6581 9 negotiation)."""
        self.device.check_open()
        if self.state is not CMState.REQUESTED:
            raise InvalidState(f"accept on an id that is {self.state.value}")
        if self.qp is None:
            raise InvalidState("create_qp before accept")
        self._check_param(param)
        try:
            self.device.backend.accept_session(self.stream_id, param.private_data, local_resources(param),
                                               self.qp.pd.pd_id)
        except NegotiationRefused as error:
            raise InvalidArgument(f"these resources cannot accept the request: {error} (RFC 6581 9); "
                                  "reject it instead") from error
        self.state = CMState.ACCEPTED
        self.device.dispatch()  # the stream is open: hand it the receives posted so far

    def reject(self, private_data: bytes = b"") -> None:
        """`rdma_reject` a CONNECT_REQUEST with private data (RFC 5043 6.3)."""
        self.device.check_open()
        if self.state is not CMState.REQUESTED:
            raise InvalidState(f"reject on an id that is {self.state.value}")
        private_data = _check_private_data("private_data", private_data)
        self.device.backend.reject_session(self.stream_id, private_data)
        self.state = CMState.CLOSED
        self.device.forget(self)

    def disconnect(self) -> None:
        """`rdma_disconnect`: end the stream's session with a Terminate (RFC 5043 6.2); DISCONNECTED follows
        when the peer has answered with its own and all is acknowledged (RFC 5043 6.6)."""
        self.device.check_open()
        if self.state not in (CMState.ESTABLISHED, CMState.ACCEPTED):
            raise InvalidState(f"disconnect on an id that is {self.state.value}")
        self.state = CMState.DISCONNECTING
        self.device.backend.terminate_stream(self.stream_id)
        if self.qp is not None:
            self.qp.flush()

    def get_cm_event(self, timeout: float | None = DEFAULT_WAIT) -> Coroutine[None, None, CMEvent]:
        """The id's next event, waiting for it (`rdma_get_cm_event`; no ack needed); `timeout` is checked at
        the call."""
        return self._get_cm_event(check_timeout("timeout", timeout))

    async def _get_cm_event(self, timeout: float | None) -> CMEvent:
        await self.device.fabric.wait_until(lambda: bool(self._events), timeout, on_events=True)
        return self._events.popleft()

    def poll_cm_event(self) -> CMEvent | None:
        """The id's next event if there is one; never waits."""
        self.device.fabric.dispatch()
        return self._events.popleft() if self._events else None

    # -- the driver-internal interface: the device's calls (`Device._EVENT_ROUTES`) --------------

    @property
    def pending_param(self) -> ConnParam | None:
        """Driver-internal: the parameters of a `connect` under way, until its stream is opened.

        :meta private:"""
        return self._pending.param if self._pending is not None else None


    def post_event(self, event_type: CMEventType, about: CMID | None = None, **fields) -> None:
        """Driver-internal: queue an event for `get_cm_event` (CONNECT_REQUEST on a listener `about` a new id).

        :meta private:"""
        self._events.append(CMEvent(event_type, about or self, **fields))

    def opened(self, ird: int, ord: int, peer_private_data: bytes) -> None:
        """Driver-internal: the stream's session is open (RFC 5043 6.2): its queue pair takes work.

        :meta private:"""
        assert self.qp is not None and self.stream_id is not None
        self._negotiated = (ird, ord, peer_private_data)
        self.qp.stream_opened(self.stream_id, ird, ord)

    def established(self) -> None:
        """Driver-internal: the connection is established (initiator: the Accept; responder: the RTR, RFC 6581 9).

        :meta private:"""
        self.state = CMState.ESTABLISHED
        ird, ord, private_data = self._negotiated
        param = ConnParam(responder_resources=ird, initiator_depth=ord)
        self.post_event(CMEventType.ESTABLISHED, private_data=private_data, conn_param=param)

    def terminated(self, error: ErrorNumber, sent: bool) -> None:
        """Driver-internal: an RDMAP Terminate ended the stream (its queue pair is in error): the DDP Stream
        Terminate follows it from the side that sent it (RFC 5043 6.2; the peer's session answers with its own, 6.6), and the
        application hears of it as rdma_cm reports an iWARP connection ended by a Terminate: DISCONNECTED
        (CONNECT_ERROR before ESTABLISHED), with the Terminate's number.

        :meta private:"""
        if self.state not in (CMState.ESTABLISHED, CMState.ACCEPTED):
            return  # disconnecting already: its own DISCONNECTED follows
        if sent:
            try:
                self.device.backend.terminate_stream(self.stream_id)
            except SessionStateError:
                pass  # the peer's DDP Stream Terminate came first and was answered: the session is ending already
        whose = "this side's" if sent else "the peer's"
        kind = CMEventType.DISCONNECTED if self.state is CMState.ESTABLISHED else CMEventType.CONNECT_ERROR
        self.ended(kind, f"the stream ended with {whose} Terminate: {error_name(*error)} (RFC 5040 5.5, "
                          "RFC 5043 6.2)", error)

    def ended(self, event_type: CMEventType, reason: str, error: ErrorNumber | None = None,
              private_data: bytes = b"") -> None:
        """Driver-internal: the connection is over: post `event_type` once, flush the queue pair.

        :meta private:"""
        if self.state in (CMState.CLOSED, CMState.IDLE):
            return
        self.state = CMState.CLOSED
        if self.qp is not None:
            self.qp.flush()
        self.post_event(event_type, reason=reason, error=error, private_data=private_data)
        self.device.forget(self)

    def _check_param(self, param: ConnParam) -> None:
        """The IRD and ORD within the device's (RFC 6581 9), the private data within RFC 5043 5.2.3's limit, one
        or more RTR types, each once."""
        instance("param", param, ConnParam)
        _check_private_data("param.private_data", param.private_data)
        attr = self.device.attr
        whole("param.responder_resources (IRD)", param.responder_resources, 0, attr.max_qp_rd_atom)
        whole("param.initiator_depth (ORD)", param.initiator_depth, 0, attr.max_qp_init_rd_atom)
        rtr_types = sequence("param.rtr_types", param.rtr_types)
        if not rtr_types:
            raise InvalidArgument("param.rtr_types must name at least one RTR message (RFC 6581 9)")
        for index, rtr in enumerate(rtr_types):
            member(f"param.rtr_types[{index}]", rtr, RtrType)
        if len(set(rtr_types)) != len(rtr_types):
            raise InvalidArgument(f"param.rtr_types names an RTR type twice: {rtr_types}")



def local_resources(param: ConnParam) -> LocalResources:
    """What `param` offers, as the model's session layer takes it (RFC 6581 9: IRD, ORD, the RTR types)."""
    return LocalResources(ird=param.responder_resources, ord=param.initiator_depth, peer_to_peer=True,
                          rtr_types=tuple(param.rtr_types))


def _check_private_data(name: str, private_data: object) -> bytes:
    try:
        return data(name, private_data, MAX_USER_PRIVATE_DATA)
    except WrongArgumentType:
        raise
    except InvalidArgument as error:
        raise PrivateDataTooLong(f"{error} (RFC 5043 5.2.3: 512 bytes in any message, 4 of them the RFC 6581 9 "
                                 "enhanced data)") from None
