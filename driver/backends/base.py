"""The backend protocol: what the verbs layer asks of a device kind.

A backend is a `FabricBackend` holding one or more `DeviceBackend`s on one
network, and the clock and scheduler they run on.  The verbs layer
(`driver.device`, `driver.qp`, `driver.cm`...) calls nothing else, so a new
kind of device is one more pair of classes: `soft` and `engine` here,
`sim` (the gateware under Verilator through cocotb) in `sim.driver_sim`,
since only `sim` may join the driver to the testbenches; `board`
(`driver.backends.board`), the board as one device of its network
(`driver.backends.board_network`), a device on a real transport
(`driver.backends.network`).

The vocabulary is the software RNIC's (`model.rnic.host.SoftRnic`): the
same calls, and its events (`model.rnic.events`) back.  Every backend runs
the control plane in software from the model (SCTP association, DDP stream
sessions, RFC 6581 negotiation); what differs is where the data plane runs
(the model's RDMAP endpoints, the receive engine's model, the gateware's
receive engine) and what drives time (the simulated-time asyncio loop of
`soft` and `engine`; cocotb's scheduler for `sim`).

Waiting: `wait_until(predicate)` is the one blocking primitive, a coroutine
of the backend's own scheduler; the predicate is evaluated whenever the
fabric may have changed.  `run(main)` runs a coroutine to its end on that
scheduler (the soft backend's simulated-time loop); under cocotb the test
coroutine already runs on the scheduler and awaits the verbs directly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from model.ddp.memory import Access
from model.ddp.negotiation import LocalResources
from model.rnic.events import RnicEvent

T = TypeVar("T")
Gather = Sequence[tuple[int, int]]
"""A message's source: (host address, length) pieces in message order."""


@dataclass(frozen=True)
class DeviceAttr:
    """A device's limits, as `ibv_query_device` reports them (pyverbs `DeviceAttr` names)."""

    max_mr: int
    """Memory regions (STags) that can be registered at once."""
    max_pd: int
    """Protection domains (RFC 5041 8.2) that can be allocated at once: their ids fill the PD field of the
    engine's region and stream rows (16 bits)."""
    max_qp: int
    """Queue pairs: DDP streams of the device's one SCTP association (RFC 5043 8)."""
    max_qp_wr: int
    """Outstanding work requests per send or receive queue."""
    max_send_sge: int
    max_recv_sge: int
    max_sge_rd: int
    """SGEs of an RDMA Read: its data sink is one tagged buffer (RFC 5040 4.4)."""
    max_cqe: int
    max_qp_rd_atom: int
    """IRD: inbound RDMA Reads the device can hold per connection (RFC 6581 9 responder_resources)."""
    max_qp_init_rd_atom: int
    """ORD: outbound RDMA Reads per connection (RFC 6581 9 initiator_depth)."""
    max_msg_sz: int
    """The longest message: less than 2^32 bytes (RFC 5041 5.2)."""
    mulpdu: int
    """The largest DDP segment on this device's path (RFC 5043 9)."""


class DeviceBackend(ABC):
    """One RNIC of a fabric, shaped like `SoftRnic`."""

    name: str
    ip: str
    port: int

    @abstractmethod
    def query(self) -> DeviceAttr: ...

    # host memory, as the device reaches it
    @abstractmethod
    def allocate(self, length: int) -> int:
        """A fresh buffer of host memory for a region; its address."""

    @abstractmethod
    def read(self, address: int, length: int) -> bytes: ...

    @abstractmethod
    def write(self, address: int, data: bytes) -> None: ...

    # memory registration (RFC 5041 8.2, 8.3.1)
    @abstractmethod
    def register(self, address: int, length: int, access: Access, base_to: int, pd_id: int) -> int:
        """Register host memory as Tagged Offsets from `base_to` in Protection Domain `pd_id`; its STag."""

    @abstractmethod
    def deregister(self, stag: int) -> None: ...

    @abstractmethod
    def region_valid(self, stag: int) -> bool:
        """False once the region is invalidated (Send with Invalidate, RFC 5040 5.3) or deregistered."""

    # the control plane (RFC 4960 association, RFC 5043 6 sessions, RFC 6581 negotiation)
    @abstractmethod
    def listen(self, port: int) -> None:
        """Answer INITs to `port` (RFC 4960 5.1); a device may listen on several ports."""

    @abstractmethod
    def connect(self, ip: str, port: int) -> bool:
        """Open the association to (ip, port); False when no device of the fabric has that IPv4 address (a port
        nothing listens on is the peer's to refuse, RFC 4960 8.4)."""

    @property
    @abstractmethod
    def association_up(self) -> bool: ...

    @property
    @abstractmethod
    def association_port(self) -> int | None:
        """The local SCTP port of the device's association (the port a peer's INIT came to); None without one."""

    @property
    @abstractmethod
    def association_opening(self) -> bool:
        """An association exists and is neither up nor closed."""

    @abstractmethod
    def open_stream(self, stream_id: int, private_data: bytes, resources: LocalResources, pd_id: int) -> None:
        """Initiate a session on the stream, whose queue pair is in Protection Domain `pd_id` (RFC 5041 8.2)."""

    @abstractmethod
    def accept_session(self, stream_id: int, private_data: bytes, resources: LocalResources, pd_id: int) -> None:
        """Accept the session requested on the stream, into Protection Domain `pd_id`."""

    @abstractmethod
    def reject_session(self, stream_id: int, private_data: bytes) -> None: ...

    @abstractmethod
    def terminate_stream(self, stream_id: int) -> None: ...

    @abstractmethod
    def stream_available(self, stream_id: int) -> bool:
        """No session on the stream and every chunk of the last one acknowledged (RFC 5043 6.6)."""

    @abstractmethod
    def close(self) -> None:
        """Terminate every session, then shut the association down (RFC 5043 6.2, RFC 4960 9.2)."""

    # the data plane (RFC 5040 5); each post returns the backend's id of the request
    @abstractmethod
    def post_recv(self, stream_id: int, address: int, length: int) -> None: ...

    @abstractmethod
    def post_send(self, stream_id: int, gather: Gather, length: int, solicited: bool,
                  invalidate_stag: int | None) -> int: ...

    @abstractmethod
    def post_write(self, stream_id: int, remote_stag: int, remote_to: int, gather: Gather, length: int) -> int: ...

    @abstractmethod
    def post_read(self, stream_id: int, local_stag: int, local_to: int, remote_stag: int, remote_to: int,
                  length: int) -> int:
        """Raises `model.rdmap.endpoint.ReadLimitExceeded` past the stream's ORD."""

    @abstractmethod
    def events(self) -> list[RnicEvent]:
        """The events (`model.rnic.events`) since the last call, oldest first."""

    resolves_names = False
    """True where `connect` takes a host name: the driver resolves it first (`socket.getaddrinfo`)."""

    def statistics(self) -> object | None:
        """What the device received, sent and dropped below the verbs (`NetworkStatistics` on a real transport);
        None where the backend keeps no such count."""
        return None

    def frames_received(self) -> int | None:
        """Frames the device has taken so far (every byte it places comes in one), so that the driver reads back
        a caller's buffer only when something may have landed; None: unknown, read back every time."""
        return None


class OnEvents:
    """A wait's predicate that only the devices' events can make hold: it routes them first (`driver.device.Fabric.
    dispatch`) and looks at what they set (completions, connection events, an association's end). A backend may
    leave it unasked while no device has an event it has not handed out, nor a wait's deadline has come.
    `looks`: the same without the routing, for a backend that has just routed them (`FabricBackend.on_change`) and
    asks many waits at once."""

    __slots__ = ("looks", "predicate")

    def __init__(self, predicate: Callable[[], bool], looks: Callable[[], bool] | None = None) -> None:
        self.predicate = predicate
        self.looks = looks

    def __call__(self) -> bool:
        return self.predicate()


class FabricBackend(ABC):
    """Devices on one network, with the clock and scheduler they run on."""

    devices: tuple[DeviceBackend, ...]
    on_change: Callable[[], None] | None = None
    """Called whenever the devices may have reported something (the driver routes their events)."""
    before_service: Callable[[], None] | None = None
    """Called before the fabric moves the devices on by itself (a timer, an arrival): the driver hands them what
    the caller wrote into its registered buffers."""

    @abstractmethod
    def now(self) -> float:
        """The fabric's clock, in seconds."""

    def engine_time(self) -> tuple[int, float] | None:
        """(clock cycles, nanoseconds) a simulated receive engine has run so far: the `sim` backend's RTL under
        its simulator; None where no engine has a clock (`soft`, `engine`)."""
        return None

    @abstractmethod
    def kick(self) -> None:
        """Something was posted or changed: let the devices send what is due now."""

    @abstractmethod
    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None) -> None:
        """Return once `predicate()` holds; `WaitTimeout` after `timeout` seconds of the fabric's clock,
        `SimulationStalled` when nothing can make it hold."""

    @abstractmethod
    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine `main()` to its end on the fabric's scheduler; its result."""
