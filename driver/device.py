"""Devices and fabrics: opening a backend, querying a device, and routing its events (pyverbs `Context`).

`open_fabric(backend, **options)` opens the devices of one network:

    fabric = open_fabric("soft", link=LinkConfig(loss=0.01, seed=1))
    server, client = fabric.devices

`run(main, backend, **options)` opens the fabric and runs the coroutine
`main(fabric)` on the backend's scheduler; every call that waits is a
coroutine (`CQ.wait`, `CMID.get_cm_event`), the rest return at once.

A `Device` routes what its backend reports (`model.rnic.events`) to the
driver's objects by a table (`_EVENT_ROUTES`, one route per event type, as
the model's transition tables route theirs): association and session events
to the connection ids (`driver.cm`), completions and Terminates to the queue
pairs (`driver.qp`), each through the object's declared driver-internal
interface (`CMID.ended`, `QP.completed`...), never its private state.

`open_device(spec)` opens one device of this process on a real transport
(`driver.backends.network`), or a board on its network as one device
(`driver.backends.board_network`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Coroutine
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from model.ddp.negotiation import NegotiationFailed, Role, check_reply, offered_rtr_types
from model.ddp.session import TerminationCause
from model.rnic.events import (
    Aborted,
    CloseAborted,
    Closed,
    Connected,
    DdpUnavailable,
    Failed,
    RdmapTerminated,
    ReadCompletion,
    ReceiveCompletion,
    RnicEvent,
    RtrArrived,
    SessionEstablished,
    SessionRejected,
    SessionRequested,
    StreamReleased,
    StreamTerminated,
    WorkCompletion,
)
from model.errors import LlpError, error_name
from model.sctp.state import AssociationState

from driver.backends.base import DeviceAttr, DeviceBackend, FabricBackend, OnEvents
from driver.cm import CMEventType, CMID, CMState, ConnParam, local_resources
from driver.cq import CQ, DEFAULT_WAIT, CompletionChannel
from driver.arguments import instance
from driver.arguments import timeout as check_timeout
from driver.errors import (AddressInUse, BackendUnavailable, InvalidArgument, InvalidState, OutOfResources,
                           UnknownBackend, WrongArgumentType)
from driver.options import check_fabric_options
from driver.pd import PD
from driver.qp import QP
from driver.transports import resolve_ipv4

if TYPE_CHECKING:
    from driver.backends.network import NetworkStatistics

T = TypeVar("T")

BACKENDS = ("soft", "engine", "sim", "board")
"""Every backend name: `soft` (software RNICs), `engine` (hosts receiving through the receive engine's golden
model, control plane in software), `sim` (the same hosts with the gateware engine under Verilator: a cocotb
test, see `sim.driver_sim`), `board` (the RNIC core on a board over its control link, and a software peer
on its Ethernet, see `driver.backends.board`)."""


class AssociationEnd(Enum):
    """How a device's SCTP association ended (`Device.wait_closed`)."""

    CLOSED = "shut down gracefully (SHUTDOWN COMPLETE, RFC 4960 9.2)"
    ABORTED = "aborted by the peer (ABORT, RFC 4960 9.1)"
    FAILED = "failed: a retransmission limit ran out (RFC 4960 5.1 C, 8.1)"
    CLOSE_ABORTED = "aborted by close() at its deadline"


_ASSOCIATION_ENDS = {Closed: AssociationEnd.CLOSED, Aborted: AssociationEnd.ABORTED, Failed: AssociationEnd.FAILED,
                     CloseAborted: AssociationEnd.CLOSE_ABORTED}


class Device:
    """One RNIC (`ibv_context`): its limits, protection domain, completion queues and connection ids."""

    def __init__(self, fabric: Fabric, backend: DeviceBackend) -> None:
        self.fabric = fabric
        self.backend = backend
        self.name = backend.name
        self.attr = backend.query()
        self._pds: list[PD] = []
        self._listeners: dict[int, CMID] = {}
        """Listening ids by SCTP port."""
        self._association_peer: tuple[str, int] | None = None
        """(ip, port) of the peer of the device's current or latest association."""
        self._ids: dict[int, CMID] = {}
        """Connection ids by DDP stream."""
        self._waiting_for_association: list[CMID] = []
        self._waiting_for_stream: list[CMID] = []
        """Connecting ids waiting for a stream being released (RFC 5043 6.6)."""
        self._qp_count = 0
        self.closed = False
        self.association_end: AssociationEnd | None = None
        """How the device's latest association ended, once it has (None again when the next one starts)."""
        self._association_was_up = False
        """The device's latest association reached ESTABLISHED (an ABORT before that refused the connect)."""

    @property
    def address(self) -> tuple[str, int]:
        """(IPv4 address, SCTP port): what a peer connects to (`connect`)."""
        return (self.backend.ip, self.backend.port)

    def statistics(self) -> NetworkStatistics | None:
        """On a real transport (`open_device`), the datagrams the device received and sent and those it dropped,
        by reason (`driver.backends.network.NetworkStatistics`); None on the simulated backends."""
        return self.backend.statistics()  # type: ignore[return-value]

    def resolve(self, address: object) -> object:
        """`address` with its host name resolved to an IPv4 address where the device is on a real network
        (rdma_cm's `rdma_resolve_addr`, through `socket.getaddrinfo`); as it is otherwise, to be checked."""
        if (self.backend.resolves_names and isinstance(address, tuple) and len(address) == 2
                and isinstance(address[0], str)):
            try:
                ipaddress.IPv4Address(address[0])
            except ValueError:
                return (resolve_ipv4(address[0]), address[1])
        return address

    def query_device(self) -> DeviceAttr:
        """`ibv_query_device`: the device's limits."""
        return self.backend.query()

    def alloc_pd(self) -> PD:
        """`ibv_alloc_pd`: a new protection domain, up to `query_device().max_pd`."""
        self.check_open()
        if len(self._pds) >= self.attr.max_pd:
            raise OutOfResources(f"the device has {self.attr.max_pd} protection domains, all allocated")
        pd = PD(self, len(self._pds) + 1)
        self._pds.append(pd)
        return pd

    def create_cq(self, cqe: int = 256, channel: CompletionChannel | None = None) -> CQ:
        """`ibv_create_cq`; on `channel`, the CQ can be armed to report its completions there (`CQ.req_notify`)."""
        self.check_open()
        return CQ(self, cqe, channel)

    def create_comp_channel(self) -> CompletionChannel:
        """`ibv_create_comp_channel`."""
        self.check_open()
        return CompletionChannel(self)

    def create_id(self) -> CMID:
        """`rdma_create_id`."""
        self.check_open()
        return CMID(self)

    def close(self) -> None:
        """Terminate every connection and shut the association down (RFC 5043 6.2, RFC 4960 9.2); the device
        takes no more calls but `query_device` and the waits for what is under way."""
        self.check_open()
        self.closed = True
        self.backend.close()

    def check_open(self) -> None:
        if self.closed:
            raise InvalidState(f"device {self.name} is closed")

    def wait_closed(self, timeout: float | None = DEFAULT_WAIT) -> Coroutine[None, None, AssociationEnd]:
        """Wait until the device's association has ended (after either side's `close`); how it ended.  `timeout`
        is checked at the call."""
        return self._wait_closed(check_timeout("timeout", timeout))

    async def _wait_closed(self, timeout: float | None) -> AssociationEnd:
        await self.fabric.wait_until(lambda: self.association_end is not None, timeout, on_events=True)
        assert self.association_end is not None
        return self.association_end

    # -- used by the connection ids ------------------------------------------------------

    def next_qp_num(self) -> int:
        self._qp_count += 1
        return self._qp_count

    def start_listening(self, cm_id: CMID, port: int) -> None:
        listener = self._listeners.get(port)
        if listener is not None and listener.state is CMState.LISTENING:
            raise AddressInUse(f"{self.name} already listens on {self.address[0]} port {port}")
        self._listeners[port] = cm_id
        self.backend.listen(port)

    def check_peer(self, address: tuple[str, int]) -> None:
        """A device has one SCTP association at a time: while it is up or opening, connections go to its peer."""
        backend = self.backend
        peer = self._association_peer
        if (backend.association_up or backend.association_opening) and peer is not None and address != peer:
            raise InvalidState(f"address {address[0]} port {address[1]}: {self.name}'s one association is with "
                               f"{peer[0]} port {peer[1]}; connect there, or after it has ended")

    def connect_id(self, cm_id: CMID, address: tuple[str, int]) -> None:
        backend = self.backend
        if backend.association_up:
            self._open_stream(cm_id)
        elif backend.association_opening:
            self._waiting_for_association.append(cm_id)
        elif backend.connect(*address):
            self._new_association()
            self._association_peer = address
            self._waiting_for_association.append(cm_id)
        else:
            cm_id.ended(CMEventType.UNREACHABLE, f"no device at {address[0]} port {address[1]}")
        self.fabric.backend.kick()

    def forget(self, cm_id: CMID) -> None:
        if cm_id.stream_id is not None and self._ids.get(cm_id.stream_id) is cm_id:
            del self._ids[cm_id.stream_id]

    # -- events -----------------------------------------------------------------------

    def dispatch(self) -> None:
        """Bring the caller's registered buffers level with the device's memory, then route every event the
        backend reported since the last call (so a completion is seen after the bytes it announces)."""
        self.sync_buffers()
        for event in self.backend.events():
            self._on_event(event)

    def sync_buffers(self) -> None:
        """Every region over a caller's buffer: its changes to the device, the device's writes back (`driver.mr`)."""
        for pd in self._pds:
            if pd.mirrors:
                pd.sync_buffers()

    def _on_event(self, event: RnicEvent) -> None:
        route = _EVENT_ROUTES.get(type(event))
        if route is not None:
            route(self, event)

    # -- the routes (`_EVENT_ROUTES`), one per event the device acts on ---------------

    def _queue_pair_of(self, stream_id: int) -> tuple[CMID, QP] | None:
        cm_id = self._ids.get(stream_id)
        return (cm_id, cm_id.qp) if cm_id is not None and cm_id.qp is not None else None

    def _on_completion(self, event: WorkCompletion | ReadCompletion) -> None:
        if (found := self._queue_pair_of(event.stream_id)) is not None:
            found[1].completed(event)

    def _on_receive(self, event: ReceiveCompletion) -> None:
        if (found := self._queue_pair_of(event.stream_id)) is not None:
            found[1].received(event)

    def _on_rdmap_terminated(self, event: RdmapTerminated) -> None:
        if (found := self._queue_pair_of(event.stream_id)) is not None:
            cm_id, qp = found
            number = qp.terminate_arrived(event.terminate, event.sent)
            if number is not None:
                cm_id.terminated(number, event.sent)

    def _on_connected(self, event: Connected) -> None:
        self._association_peer = (str(event.peer_ip), event.peer_port)
        self.association_end = None  # a passive side's next association: the last one's end is past
        self._association_was_up = True
        waiting, self._waiting_for_association = self._waiting_for_association, []
        for cm_id in waiting:
            if event.ddp_enabled:
                self._open_stream(cm_id)

    def _on_ddp_unavailable(self, event: DdpUnavailable) -> None:
        waiting, self._waiting_for_association = self._waiting_for_association, []
        for cm_id in waiting:
            cm_id.ended(CMEventType.CONNECT_ERROR, f"the peer does not do DDP (RFC 5043 11.1): {event.reason}")

    def _on_session_established(self, event: SessionEstablished) -> None:
        # the stream is open: the queue pair takes work now (the session holds a responder's segments until the
        # RTR, RFC 6581 9); the connection is ESTABLISHED once the RTR has arrived
        cm_id = self._ids.get(event.stream_id)
        if cm_id is None:
            return
        cm_id.opened(event.ird, event.ord, event.peer_private_data)
        if event.role is Role.INITIATOR or not event.peer_to_peer:
            cm_id.established()

    def _on_rtr(self, event: RtrArrived) -> None:
        cm_id = self._ids.get(event.stream_id)
        if cm_id is not None and cm_id.state is CMState.ACCEPTED:
            cm_id.established()

    def _on_session_rejected(self, event: SessionRejected) -> None:
        cm_id = self._ids.get(event.stream_id)
        if cm_id is not None:
            self._on_rejected(cm_id, event)

    def _on_stream_terminated(self, event: StreamTerminated) -> None:
        cm_id = self._ids.get(event.stream_id)
        if cm_id is None:
            return
        if cm_id.state in (CMState.CONNECTING, CMState.ACCEPTED):
            cm_id.ended(CMEventType.CONNECT_ERROR, event.cause.value, event.error)
        elif event.cause is TerminationCause.PEER_TERMINATE:
            cm_id.ended(CMEventType.DISCONNECTED, "the peer disconnected (RFC 5043 6.2)")
        else:
            cm_id.ended(CMEventType.DISCONNECTED, event.cause.value, event.error)

    def _on_stream_released(self, event: StreamReleased) -> None:
        """A released stream may be opened again (RFC 5043 6.6): the ids waiting for one try; the id that was
        disconnecting on it is DISCONNECTED."""
        waiting, self._waiting_for_stream = self._waiting_for_stream, []
        for waiting_id in waiting:
            if waiting_id.state is CMState.CONNECTING:
                self._open_stream(waiting_id)
        cm_id = self._ids.get(event.stream_id)
        if cm_id is not None and cm_id.state is CMState.DISCONNECTING:
            cm_id.ended(CMEventType.DISCONNECTED, "disconnected: both Terminates exchanged and acknowledged "
                                                  "(RFC 5043 6.2, 6.6)")

    def _on_rejected(self, cm_id: CMID, event: SessionRejected) -> None:
        """REJECTED; an enhanced reject whose data this side's offer cannot match is the provider's refusal
        (RFC 6581 7: it says which RTR types it supports), and carries the RFC 6581 8 code."""
        error, reason = None, "rejected by the peer (RFC 5043 6.3)"
        if not event.by_user:
            reason = "refused by the peer's provider with a Terminate (RFC 5043 6.4)"
        elif event.enhanced is not None and cm_id.pending_param is not None:
            offer = local_resources(cm_id.pending_param)
            verdict = check_reply(offer, event.enhanced)
            if not set(offer.rtr_types) & offered_rtr_types(event.enhanced):
                error = LlpError.NO_MATCHING_RTR.number
            elif isinstance(verdict, NegotiationFailed):
                error = verdict.error.number
            if error is not None:
                reason = f"refused by the peer's provider: {error_name(*error)} (RFC 6581 7, 8)"
        cm_id.ended(CMEventType.REJECTED, reason, error, private_data=event.private_data)

    def _on_request(self, event: SessionRequested) -> None:
        listener = self._listeners.get(self.backend.association_port)  # the port the peer's INIT came to
        if listener is None or listener.state is not CMState.LISTENING:
            self.backend.reject_session(event.stream_id, b"")
            return
        cm_id = CMID(self)
        cm_id.state = CMState.REQUESTED
        cm_id.stream_id = event.stream_id
        self._ids[event.stream_id] = cm_id
        offer = None
        if event.enhanced is not None:  # rdma_cm's view: the peer's ORD is what we must answer with our IRD
            offer = ConnParam(responder_resources=event.enhanced.ord, initiator_depth=event.enhanced.ird,
                              private_data=event.private_data)
        listener.post_event(CMEventType.CONNECT_REQUEST, about=cm_id, private_data=event.private_data, conn_param=offer)

    def _open_stream(self, cm_id: CMID) -> None:
        """Open a free DDP stream for `cm_id`; with none free but one still being released (its session's last
        chunks unacknowledged, RFC 5043 6.6), wait for it."""
        unused = [s for s in range(self.attr.max_qp) if s not in self._ids]
        stream_id = next((s for s in unused if self.backend.stream_available(s)), None)
        if stream_id is None:
            if unused:
                self._waiting_for_stream.append(cm_id)
            else:
                cm_id.ended(CMEventType.CONNECT_ERROR, f"all {self.attr.max_qp} DDP streams are in use")
            return
        param = cm_id.pending_param
        assert param is not None
        cm_id.stream_id = stream_id
        self._ids[stream_id] = cm_id
        assert cm_id.qp is not None
        self.backend.open_stream(stream_id, param.private_data, local_resources(param), cm_id.qp.pd.pd_id)

    def _new_association(self) -> None:
        """A new association starts: `wait_closed` waits for its end, not the last one's."""
        self.association_end = None
        self._association_was_up = False

    def _association_over(self, event: RnicEvent) -> None:
        if self.association_end is None:
            self.association_end = _ASSOCIATION_ENDS[type(event)]
        waiting_kind = CMEventType.CONNECT_ERROR
        if isinstance(event, Failed) and event.state in (AssociationState.COOKIE_WAIT, AssociationState.COOKIE_ECHOED):
            waiting_kind = kind = CMEventType.UNREACHABLE
            reason = f"the association could not be set up: {event.reason}"
        elif isinstance(event, Aborted) and not self._association_was_up:
            waiting_kind = kind = CMEventType.REJECTED
            reason = ("refused: the peer answered the INIT with an ABORT, nothing listens at the address "
                      "(RFC 4960 8.4 rule 3, 5.1)")
        elif isinstance(event, Aborted) and event.peer_restarted:
            kind = CMEventType.DISCONNECTED
            reason = "the peer restarted: its association is a new one (RFC 4960 5.2.4 A)"
        else:
            kind, reason = CMEventType.DISCONNECTED, f"the association ended: {type(event).__name__}"
        waiting, self._waiting_for_association = self._waiting_for_association, []
        for cm_id in waiting:
            cm_id.ended(waiting_kind, reason)
        waiting, self._waiting_for_stream = self._waiting_for_stream, []
        for cm_id in waiting:
            cm_id.ended(CMEventType.CONNECT_ERROR, reason)
        for cm_id in list(self._ids.values()):
            connecting = cm_id.state in (CMState.CONNECTING, CMState.REQUESTED, CMState.ACCEPTED)
            cm_id.ended(CMEventType.CONNECT_ERROR if connecting else CMEventType.DISCONNECTED, reason)
        self._ids.clear()


_EVENT_ROUTES: dict[type[RnicEvent], Callable[[Device, Any], None]] = {
    WorkCompletion: Device._on_completion,
    ReadCompletion: Device._on_completion,
    ReceiveCompletion: Device._on_receive,
    RdmapTerminated: Device._on_rdmap_terminated,
    Connected: Device._on_connected,
    DdpUnavailable: Device._on_ddp_unavailable,
    Closed: Device._association_over,
    Aborted: Device._association_over,
    Failed: Device._association_over,
    CloseAborted: Device._association_over,
    SessionRequested: Device._on_request,
    SessionEstablished: Device._on_session_established,
    RtrArrived: Device._on_rtr,
    SessionRejected: Device._on_session_rejected,
    StreamTerminated: Device._on_stream_terminated,
    StreamReleased: Device._on_stream_released,
}
"""Where each event of the backend (`model.rnic.events`) goes, as the model's transition tables route theirs.
The rest need nothing of the driver: `WriteArrived` (RFC 5040 gives the Data Sink no completion for a Write),
`PathStatus` (the association goes on until its own limit, RFC 4960 8.2), `PeerClosing` (the association's end
follows), `SessionRefused` (this side's provider answered a peer's Initiate itself, RFC 5043 6.4, RFC 6581 7: no
connection id was made for it)."""


class Fabric:
    """The devices of one backend, on one network and one clock."""

    def __init__(self, backend: FabricBackend) -> None:
        self.backend = backend
        self.devices = tuple(Device(self, device) for device in backend.devices)
        backend.on_change = self.dispatch
        backend.before_service = self.sync_buffers

    def dispatch(self) -> None:
        for device in self.devices:
            device.dispatch()

    def now(self) -> float:
        """The fabric's clock (simulated seconds on the soft backend)."""
        return self.backend.now()

    def engine_time(self) -> tuple[int, float] | None:
        """(cycles, nanoseconds) the RTL receive engine has run so far on the `sim` backend; None elsewhere."""
        return self.backend.engine_time()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None, *,
                         on_events: bool = False) -> None:
        """Return once `predicate()` holds, the devices' events routed before each look. `on_events`: only
        those events can make it hold (the driver's own waits: completions, CM events, an association's end),
        so the backend need not ask it while none is new (`driver.backends.base.OnEvents`)."""
        def routed() -> bool:
            self.dispatch()
            return predicate()
        self.sync_buffers()  # what the caller wrote into its buffers reaches the devices before they run
        await self.backend.wait_until(OnEvents(routed, predicate) if on_events else routed, timeout)

    def sync_buffers(self) -> None:
        for device in self.devices:
            device.sync_buffers()


def open_fabric(backend: str = "soft", **options: object) -> Fabric:
    """The devices of `backend`: "soft" (two software RNICs on a simulated link; `options`: `link`
    (a `model.rnic.link.LinkConfig`), `seed`, `RnicConfig` fields) or "engine" (the same, receiving through
    the receive engine's model) or "board" (the RNIC core on a board: `serial`, the control link's device,
    and `ethernet`, the port cabled to the board: an interface name or tcp:HOST:PORT; `baud`, `latency`,
    `time_scale`). On "engine" and "board" the receive engine SACKs the peer's DATA (`engine_sacks`, default
    True; False: the host SACKs from the engine's ack records). On "engine", `engine_transport=True` has the
    transmit engine's transport unit process the peer's SACKs and retransmit (RFC 4960 6, 7); on "board" too
    when the board is built with the unit (its TX_PARAMS say so; else `InvalidArgument`), the host then
    pushing one request a message (`driver.backends.board_transport`). On "engine" its tables are
    options, as `hdl.rnic.Rnic`'s build parameters (`driver.backends.engine`): `regions` (16 rows by default),
    `buffers_per_queue` (8), `streams` (4, up to 65535) and `key_bits`, the STag key width (default 8, at most 32
    less the row index's bits: 28 beside 16 rows; `abi.rx.check_key_bits`)."""
    instance("backend", backend, str)
    check_fabric_options(options, backend)
    if backend == "soft":
        from driver.backends.soft import SoftFabric

        return Fabric(SoftFabric(**options))  # type: ignore[arg-type]
    if backend == "engine":
        from driver.backends.engine import EngineFabric

        return Fabric(EngineFabric(**options))  # type: ignore[arg-type]
    if backend == "board":
        from driver.backends.board import BoardFabric

        return Fabric(BoardFabric(**options))  # type: ignore[arg-type]
    if backend == "sim":
        raise BackendUnavailable("backend 'sim' (the gateware under Verilator) runs inside a cocotb test: "
                                 "`sim.driver_sim.run_program(main)` runs main(fabric) there")
    raise UnknownBackend(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")


NETWORK_OPTIONS_REFUSED = {"mac", "ip", "port", "udp", "engine_sacks", "engine_transport"}
"""`RnicConfig` fields `open_device` does not take: the addresses and the encapsulation are the transport's, and a
device on a real transport is a software RNIC (no engines)."""


def open_device(spec: str = "udp::9899", *, host: Callable[..., object] | None = None, **options: object) -> Device:
    """One device of its own in this process on a real transport (`driver.backends.network`): `spec` is
    "udp:[HOST][:PORT]" (SCTP over UDP, RFC 6951, port 9899 by default, 0 for a free one; no privileges),
    "ip:ADDRESS[:PORT]" (SCTP over raw IPv4, protocol 132: needs CAP_NET_RAW; PORT the SCTP port, 9899 by
    default) or "eth:IFACE:ADDRESS[:PORT]" (the same in raw Ethernet frames on IFACE, the device an IPv4 host of
    its own at ADDRESS, answering ARP: needs CAP_NET_RAW) (`driver.transports`), or
    "board:CONTROL@ADDRESS[:PORT]" (the RNIC core on a board whose Ethernet is cabled to a network, at ADDRESS
    there, reached over its control link CONTROL, a serial device or a pyserial URL such as socket://HOST:PORT:
    `driver.backends.board_network`; `baud`, `latency`, `time_scale` and `engine_sacks` as on the `board`
    backend); `host`: makes the device's
    host from its `RnicConfig` and random generator, a software host over another SCTP stack
    (`sim.usrsctp_host.usrsctp_host`), instead of the model's `SoftRnic`; `options`:
    `RnicConfig` fields (`path_mtu`, `receive_buffer`, `rto_initial`, `association_max_retrans`...).  Its calls
    are the fabric devices'; its waits run on the caller's asyncio loop (`asyncio.run(main())`), on the
    monotonic clock.  `TransportError` when the transport cannot be opened (`TransportNotPermitted` without
    the privilege raw IPv4 needs, `AddressInUse` for a port another socket holds)."""
    from driver.backends.network import NetworkFabric
    from driver.transports import open_transport, parse_port

    instance("spec", spec, str)
    if spec.startswith("board:"):
        return _open_board_device(spec, host, options)
    refused = sorted(set(options) & NETWORK_OPTIONS_REFUSED | {"link", "seed"} & set(options))
    if refused:
        raise InvalidArgument(f"option {refused[0]}: not one open_device takes (the transport gives the addresses, "
                              "and its secrets come from the system's generator, not a seed)")
    check_fabric_options(options, "soft")
    transport = open_transport(spec)
    try:
        port = transport.port if transport.kind == "udp" else parse_port(spec)   # udp:...:0: the port bound
        fabric = Fabric(NetworkFabric(transport, port, host, **options))  # type: ignore[arg-type]
    except BaseException:
        transport.close()
        raise
    return fabric.devices[0]


BOARD_DEVICE_OPTIONS_REFUSED = {"udp", "link", "seed", "serial", "ethernet"}
"""Options the board as a device does not take: SCTP runs over IPv4, the wire and the peer are real, the spec names
the control link, and the board's Ethernet is cabled to its network, not to this computer."""


def _open_board_device(spec: str, host: object, options: dict[str, object]) -> Device:
    """`open_device("board:...")` (`driver.backends.board_network`)."""
    from driver.backends.board_network import open_board_device

    if host is not None:
        raise InvalidArgument("host: the board's host is the board's RNIC core; open_device takes another host "
                              "only on udp:, ip: and eth:")
    refused = sorted(set(options) & BOARD_DEVICE_OPTIONS_REFUSED)
    if refused:
        raise InvalidArgument(f"option {refused[0]}: not one a board device takes (SCTP over IPv4 on the board's "
                              "own network, its secrets from the system's generator, the spec names its control "
                              "link)")
    check_fabric_options(options, "board:")
    return Fabric(open_board_device(spec, **options)).devices[0]


def run(main: Callable[[Fabric], Awaitable[T]], backend: str = "soft", **options: object) -> T:
    """Open `backend`'s fabric and run `main(fabric)` to its end on the backend's scheduler."""
    if not callable(main):
        raise WrongArgumentType(f"main must be a coroutine function taking the fabric, not {type(main).__name__}")
    fabric = open_fabric(backend, **options)
    return fabric.backend.run(lambda: main(fabric))
