"""The `soft` backend: the model's software RNICs (`model.rnic.host.SoftRnic`) on a simulated link.

`SoftFabric` is two SoftRnics on one `model.rnic.link.Link` (the model's
`HostPair`: host A 10.0.0.1 port 5001, host B 10.0.0.2 port 5002), seen as
two devices.  Nothing here reads a clock: time is simulated, and a run is
the same for the same seeds.

Time and scheduling: `run(main)` runs the user's coroutine on an asyncio
event loop whose clock is the simulation's (`SimulatedTimeLoop`): when no
coroutine is ready to run, the loop does not sleep but jumps to its next
timer.  The fabric keeps one timer, at the next frame arrival or host timer
of the pair (`HostPair.next_time`); at it, the pair delivers and fires
(`HostPair.advance`), sends what is due (`HostPair.send_due`), and the
coroutines waiting in `wait_until` whose predicates now hold are woken.  So
simulated time only moves while every coroutine waits, and `asyncio.sleep`
sleeps in simulated seconds.  When every coroutine waits and nothing is in
flight or running, the waits end with `SimulationStalled`.
"""

from __future__ import annotations

import asyncio
import random
import selectors
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from model.ddp.memory import Access
from model.ddp.negotiation import LocalResources, RtrType
from model.ddp.source import MESSAGE_LENGTH_LIMIT
from model.rnic.events import RnicEvent
from model.rnic.host import RnicConfig, SoftRnic
from model.rnic.link import LinkConfig, Side
from model.rnic.pair import IPS, MACS, PORTS, HostPair, host_config

from driver.backends.base import DeviceAttr, DeviceBackend, FabricBackend, Gather, OnEvents
from driver.errors import OutOfResources, SimulationStalled, WaitTimeout

T = TypeVar("T")

DEFAULT_RESOURCES = LocalResources(ird=16, ord=16, peer_to_peer=True, rtr_types=(RtrType.WRITE,))
"""What a soft device offers: IRD/ORD 16 (RFC 6581 9), the peer-to-peer model with the zero-length RDMA
Write RTR (the SoftRnic's own choice of RTR, see its module docstring)."""
QUEUE_DEPTH = 1024
"""Outstanding work requests per queue the driver allows; the model itself has no bound."""
MAX_SEND_SGE = 16
REGION_ALIGNMENT = 4096
"""Buffers are allocated page-aligned, with a free page between them, so no two regions touch."""
FIRST_BUFFER = 0x100000
MAX_PD = 0xFFFF
"""Protection domains: their ids fill the 16-bit PD field of the engine's rows (`abi`); the soft device keeps
the same bound."""
STAG_INDEX_BITS = 24
"""A soft STag is a 24-bit index and an 8-bit key (`SoftRnic.register_memory`)."""


class _SimulatedSelector(selectors.SelectSelector):
    """A selector that never blocks: asked to wait, it moves the simulated clock instead."""

    def __init__(self, loop_clock: _Clock) -> None:
        super().__init__()
        self._clock = loop_clock

    def select(self, timeout: float | None = None) -> list:
        if timeout is None:
            self._clock.idle()
        elif timeout > 0:
            self._clock.now += timeout
        return []


@dataclass
class _Clock:
    now: float
    idle: Callable[[], None]


class SimulatedTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on simulated time: idle, it jumps to its next timer (see the module docstring).
    `on_idle` is called when nothing is ready and no timer is set: it must wake someone or raise."""

    def __init__(self, on_idle: Callable[[], None]) -> None:
        self._clock = _Clock(0.0, on_idle)
        super().__init__(_SimulatedSelector(self._clock))

    def time(self) -> float:
        return self._clock.now

    def move_to_if_quiet(self, when: float) -> bool:
        """If nothing of this loop's own is due before `when` (no callback ready, no timer sooner; a cancelled
        timer still waiting in the heap counts, to be safe), let simulated time pass up to `when`, as the loop
        does when it jumps to a timer there; whether it did. One call, asked after every step of the pair."""
        scheduled = self._scheduled   # asyncio.BaseEventLoop's heap of TimerHandles
        if self._ready or (scheduled and scheduled[0].when() <= when):
            return False
        clock = self._clock
        clock.now = max(clock.now, when)
        return True


@dataclass
class _Waiter:
    predicate: Callable[[], bool]
    future: asyncio.Future
    deadline: float | None
    timeout: float | None


class HostDevice(DeviceBackend):
    """A device whose RNIC is a `SoftRnic` (or a host shaped like one) driven by `fabric`, which keeps its clock
    (`now`) and sends what the host has to send when kicked (`kick`). Subclasses say how a connection finds its
    peer (`connect`) and where the host's events are collected (`events`)."""

    def __init__(self, fabric: FabricBackend, host: SoftRnic, name: str, ip: str, port: int) -> None:
        self._fabric = fabric
        self._host = host
        self.name = name
        self.ip = ip
        self.port = port
        self._next_buffer = FIRST_BUFFER
        self.memory_end: int | None = None   # where the buffers must stop, when the host's memory is bounded

    def query(self) -> DeviceAttr:
        config = self._host.config
        return DeviceAttr(
            max_mr=(1 << STAG_INDEX_BITS) - 1, max_pd=MAX_PD, max_qp=config.streams, max_qp_wr=QUEUE_DEPTH,
            max_send_sge=MAX_SEND_SGE, max_recv_sge=1, max_sge_rd=1, max_cqe=1 << 16,
            max_qp_rd_atom=config.resources.ird, max_qp_init_rd_atom=config.resources.ord,
            max_msg_sz=MESSAGE_LENGTH_LIMIT - 1, mulpdu=self._host.mulpdu,
        )

    def allocate(self, length: int) -> int:
        pages = -(-max(length, 1) // REGION_ALIGNMENT) + 1
        address = self._past_own_areas(self._next_buffer, pages * REGION_ALIGNMENT)
        if self.memory_end is not None and address + pages * REGION_ALIGNMENT > self.memory_end:
            raise OutOfResources(f"{length} bytes more of buffers do not fit the host memory below "
                                 f"{self.memory_end:#x} ({address - FIRST_BUFFER} bytes allocated)")
        self._next_buffer = address + pages * REGION_ALIGNMENT
        return address

    def _past_own_areas(self, address: int, length: int) -> int:
        """The first page-aligned address from `address` where `length` bytes touch none of the memory the host
        keeps for itself (an engine host's QN 1 and QN 2 buffers, which grow with its streams, and its scratch)."""
        areas = getattr(self._host, "own_areas", ())
        moved = True
        while moved:
            moved = False
            for start, size in areas:
                if address < start + size and start < address + length:
                    address = -(-(start + size) // REGION_ALIGNMENT) * REGION_ALIGNMENT + REGION_ALIGNMENT
                    moved = True
        return address

    def read(self, address: int, length: int) -> bytes:
        return self._host.memory.read(address, length)

    def write(self, address: int, data: bytes) -> None:
        self._host.memory.write(address, data)

    def register(self, address: int, length: int, access: Access, base_to: int, pd_id: int) -> int:
        return self._host.register_memory(address, length, access, base_to, pd_id=pd_id)

    def deregister(self, stag: int) -> None:
        self._host.deregister_memory(stag)

    def region_valid(self, stag: int) -> bool:
        region = self._host.memory_table.lookup(stag)
        return region is not None and region.valid

    def listen(self, port: int) -> None:
        self._host.listen(port)

    @property
    def association_up(self) -> bool:
        return self._host.connected

    @property
    def association_port(self) -> int | None:
        association = self._host.association
        return association.config.local_port if association is not None else None

    @property
    def association_opening(self) -> bool:
        association = self._host.association
        return association is not None and not association.is_closed and not self._host.connected

    def open_stream(self, stream_id: int, private_data: bytes, resources: LocalResources, pd_id: int) -> None:
        self._host.open_stream(stream_id, private_data, enhanced=True, resources=resources, pd_id=pd_id)
        self._fabric.kick()

    def accept_session(self, stream_id: int, private_data: bytes, resources: LocalResources, pd_id: int) -> None:
        self._host.accept_session(stream_id, private_data, resources, pd_id)
        self._fabric.kick()

    def reject_session(self, stream_id: int, private_data: bytes) -> None:
        self._host.reject_session(stream_id, private_data)
        self._fabric.kick()

    def terminate_stream(self, stream_id: int) -> None:
        self._host.terminate_stream(stream_id)
        self._fabric.kick()

    def stream_available(self, stream_id: int) -> bool:
        return self._host.stream_available(stream_id)

    def close(self) -> None:
        self._host.close(self._fabric.now())
        self._fabric.kick()

    def post_recv(self, stream_id: int, address: int, length: int) -> None:
        self._host.post_recv(stream_id, address, length)

    def post_send(self, stream_id: int, gather: Gather, length: int, solicited: bool,
                  invalidate_stag: int | None) -> int:
        wr_id = self._host.post_send(stream_id, list(gather), length, solicited, invalidate_stag)
        self._fabric.kick()
        return wr_id

    def post_write(self, stream_id: int, remote_stag: int, remote_to: int, gather: Gather, length: int) -> int:
        wr_id = self._host.post_write(stream_id, remote_stag, remote_to, list(gather), length)
        self._fabric.kick()
        return wr_id

    def post_read(self, stream_id: int, local_stag: int, local_to: int, remote_stag: int, remote_to: int,
                  length: int) -> int:
        wr_id = self._host.post_read(stream_id, local_stag, local_to, remote_stag, remote_to, length)
        self._fabric.kick()
        return wr_id

    def frames_received(self) -> int | None:
        return self._host.statistics.frames_received


class SoftDevice(HostDevice):
    """One SoftRnic of the fabric."""

    def __init__(self, fabric: SoftFabric, side: Side) -> None:
        super().__init__(fabric, fabric.pair.hosts[side], f"soft{0 if side is Side.A else 1}", IPS[side],
                         PORTS[side])
        self._side = side
        self._seen = 0

    def connect(self, ip: str, port: int) -> bool:
        peer = self._side.peer
        if ip != IPS[peer]:
            return False
        self._host.connect(self._fabric.now(), MACS[peer], ip, port)
        self._fabric.kick()
        return True

    def events(self) -> list[RnicEvent]:
        pair = self._fabric.pair
        pair.collect(self._side)   # this device's host only: the other's events wait for its own device
        recorded = pair.events[self._side]
        if len(recorded) == self._seen:
            return []   # asked several times per frame (`Fabric.dispatch`); usually nothing is new
        new = recorded[self._seen:]
        self._seen = len(recorded)
        return new

    def has_news(self) -> bool:
        """Whether the pair recorded events of this host that `events()` has not handed out yet."""
        return len(self._fabric.pair.events[self._side]) != self._seen


class SoftFabric(FabricBackend):
    """Two soft devices on one simulated link (see the module docstring).

    `link`: the link's impairments and seed; `seed`: the hosts' random generators (STag keys, SCTP tags
    and TSNs); `options`: `RnicConfig` fields for both hosts (udp, path_mtu, streams...). `peer_host`: makes
    host B (device 1) from its `RnicConfig` and random generator instead of the backend's own: a `SoftRnic`
    (a software host over another SCTP stack, say; `sim.usrsctp_host.usrsctp_host`), with session requests
    left to the driver."""

    device_class: type[SoftDevice] = SoftDevice

    def __init__(self, link: LinkConfig | None = None, seed: int = 1, *,
                 peer_host: Callable[[RnicConfig, random.Random], SoftRnic] | None = None,
                 **options: object) -> None:
        options.setdefault("resources", self.default_resources())
        configs = {side: host_config(side, **options) for side in Side}
        self.pair = self._pair(link, seed, configs)
        if peer_host is not None:    # before anything moved: the pair's hosts are only kept, not yet used
            self.pair.hosts[Side.B] = peer_host(configs[Side.B], random.Random(seed * 2 + 1))
        self.devices = (self.device_class(self, Side.A),
                        (SoftDevice if peer_host is not None else self.device_class)(self, Side.B))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._soon = False
        self._waiters: list[_Waiter] = []

    @staticmethod
    def default_resources() -> LocalResources:
        return DEFAULT_RESOURCES

    def _pair(self, link: LinkConfig | None, seed: int, configs: dict[Side, RnicConfig]) -> HostPair:
        """The two hosts on their link; every session request waits for the driver (no policy)."""
        return HostPair.create(link, seed=seed, configs=configs, policies={side: None for side in Side})

    def now(self) -> float:
        return self.pair.now

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        loop = SimulatedTimeLoop(self._stalled)
        try:
            return loop.run_until_complete(main())
        finally:
            loop.close()
            self._loop = self._timer = None
            self._soon = False

    def kick(self) -> None:
        loop = self._running_loop()
        if loop is not None and not self._soon:
            self._soon = True
            loop.call_soon(self._service, None)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None) -> None:
        loop = self._running_loop()
        assert loop is not None
        self.kick()
        if predicate():
            return
        deadline = None if timeout is None else loop.time() + timeout
        waiter = _Waiter(predicate, loop.create_future(), deadline, timeout)
        self._waiters.append(waiter)
        try:
            await waiter.future
        finally:
            self._waiters.remove(waiter)

    # -- internals ------------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop | None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        if loop is not self._loop:
            self._loop, self._timer, self._soon = loop, None, False
        return loop

    def _service(self, due: float | None) -> None:
        """At a timer of the pair (`due`) or after a post: deliver, fire, send, wake, and set the next timer.

        While nothing else of the loop would run before the pair's next arrival or timer (no coroutine woken,
        no other timer sooner, no wait's deadline), the loop's clock moves there and the pair steps again in
        this same call: what the loop would do by jumping to that timer, without going round it per frame."""
        loop = self._loop
        assert loop is not None
        if due is None:
            self._soon = False
        else:
            self._timer = None
        pair = self.pair
        if self.before_service is not None:   # once: no caller's code runs between the steps below
            self.before_service()
        on_change, devices, waiters = self.on_change, self.devices, self._waiters
        simulated = isinstance(loop, SimulatedTimeLoop)
        # No wait starts or ends while the pair steps on below: a wait ends with its future done, which readies
        # its task in the loop, and a loop with something ready ends the stepping. So whether one is pending and
        # the earliest deadline of those pending (which only counts while something can still happen) hold for
        # the whole call.
        pending = [w for w in waiters if not w.future.done()]
        deadlines = [w.deadline for w in pending if w.deadline is not None]
        earliest_deadline = min(deadlines) if deadlines else None
        # Waits that only the devices' events can end (`OnEvents`: the driver's own) are not asked after a step
        # that brought none; the first step of the call asks them all the same (a deadline may have come).
        on_events = all(isinstance(w.predicate, OnEvents) for w in pending)
        first = True
        nothing_new_at = -1   # `pair.recorded` when the devices last had no event to hand out
        while True:
            pair.advance(max(loop.time(), due or 0.0), record=False)
            pair.send_due()
            pair.collect()   # the events of both: each host asked once a step
            # Devices have news only once the pair recorded events (`has_news`); most steps record none.
            news = bool(pending) and pair.recorded != nothing_new_at and any(d.has_news() for d in devices)
            if not news:
                nothing_new_at = pair.recorded
            # A pending wait's predicate (`driver.device.Fabric.wait_until`) dispatches first thing: with no
            # event new, that dispatch alone does what this one would (it syncs the buffers and finds nothing)
            if on_change is not None and (not pending or news):
                on_change()
            if waiters and (first or news or not on_events):
                self._wake(pair.now)
            first = False
            next_time = pair.next_time()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if next_time is None:
                return
            if (simulated and (earliest_deadline is None or earliest_deadline > next_time)
                    and loop.move_to_if_quiet(next_time)):  # type: ignore[attr-defined]
                due = next_time
                continue
            deadlines = [w.deadline for w in waiters if w.deadline is not None and not w.future.done()]
            next_time = min([next_time, *deadlines])
            self._timer = loop.call_at(next_time, self._service, next_time)
            return

    def _wake(self, now: float) -> None:
        """Wake the waiters whose predicate holds, or whose deadline has passed (`WaitTimeout`). The devices'
        events are routed once (`on_change`) for every wait that only they can end (`OnEvents.looks`): nothing
        moves while the waits are asked, so routing them again per wait (as the predicate itself would) finds
        nothing new, and with a wait per queue pair that would be most of the work."""
        routed = False
        for waiter in list(self._waiters):
            if waiter.future.done():
                continue
            predicate = waiter.predicate
            try:
                looks = predicate.looks if isinstance(predicate, OnEvents) and self.on_change is not None else None
                if looks is not None and not routed:
                    self.on_change()   # type: ignore[misc]
                    routed = True
                if (looks or predicate)():
                    waiter.future.set_result(None)
                elif waiter.deadline is not None and now >= waiter.deadline:
                    waiter.future.set_exception(WaitTimeout(f"not done within {waiter.timeout:g} s of simulated time"))
            except Exception as error:  # the predicate's own failure goes to its waiter
                waiter.future.set_exception(error)

    def _stalled(self) -> None:
        """The loop has nothing ready and no timer: nothing can change, so every wait fails."""
        pending = [waiter for waiter in self._waiters if not waiter.future.done()]
        if not pending:
            raise SimulationStalled("every coroutine waits on something the fabric cannot bring")
        for waiter in pending:
            waiter.future.set_exception(SimulationStalled(
                "nothing is in flight and no timer runs: the wait can never end"))

