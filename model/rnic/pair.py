"""Two software RNICs over the impaired link, and the loop that drives them: the one two-host harness.

`HostPair` joins host A (10.0.0.1, port 5001) and host B (10.0.0.2, port
5002), two `SoftRnic`s with their own `SparseMemory`, through a
`model.rnic.link.Link`:

    pair = HostPair.create(LinkConfig(loss=0.01, seed=1))
    pair.connect()                     # B listens, A connects (RFC 4960 5.1)
    pair.open_stream(0)                # enhanced DDP session (RFC 6581), A initiates
    pair.a.post_write(0, stag, 0, address, length)
    pair.run_until(lambda: pair.count(Side.B, WriteArrived) >= 1)
    pair.close()                       # A closes; each host's finishing event

Time only moves in `step()`: every frame the hosts have to send goes on the
link, then `now` jumps to the earliest of the next arrival and the hosts'
timers, what arrived is delivered, what expired fires, and each host's
`next_events()` is kept in `events[side]` (and counted by type, so `count`
costs nothing however long the run).  When nothing is in flight and no
timer runs, a step raises `Stalled`, or `AssociationEnded` when a host's
association is over (its retransmission limits ran out, RFC 4960 5.1 C,
8.1, or it was aborted) and so nothing more can happen.  `run_until` also
stops a run without progress for `IDLE_LIMIT`.  `tap(side, frame)` sees
every frame a host sends; returning False keeps that frame off the link.
`record=True` keeps the frames as the hosts sent them (`sent`) and as they
arrived, after the link's impairments (the capture, `pcap()`).

Nothing here reads a clock: a run is the same for the same seeds.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Callable

from model.ddp.memory import SparseMemory
from model.net.pcap import write_pcap
from model.rnic.events import (
    Aborted,
    CloseAborted,
    Closed,
    Failed,
    RnicEvent,
    RtrArrived,
    SessionEstablished,
)
from model.rnic.host import RnicConfig, SessionPolicy, SoftRnic, accept_every_session, takes_packets
from model.rnic.link import Link, LinkConfig, Side, Unframed

MACS = {Side.A: bytes.fromhex("020000000001"), Side.B: bytes.fromhex("020000000002")}
IPS = {Side.A: "10.0.0.1", Side.B: "10.0.0.2"}
PORTS = {Side.A: 5001, Side.B: 5002}
IDLE_LIMIT = 3600.0
"""Simulated seconds without progress (an event, or a new DATA chunk taken by either host) after which a run
that has not reached its goal has stalled.  A live association, however slow, is given the time it takes:
only its own retransmission limits end it (RFC 4960 5.1 C, 8.1)."""
CLOSE_TIME_LIMIT = 900.0
"""Simulated seconds the teardown may take: beyond the slowest legitimate end, a `close_timeout` (30 s)
and then T2-shutdown backed off to RTO.Max through Association.Max.Retrans (about 7.5 min, RFC 4960 9.2, 8.1)."""
_A, _B = Side.A, Side.B
"""Read every step under their names (an enum member's class attribute is a descriptor call in Python 3.11)."""
FINISHED = (Closed, Aborted, Failed, CloseAborted)
"""The events that end a host's association; after one of them the host has nothing left to do."""


class Stalled(RuntimeError):
    """Nothing is in flight and no timer runs, or the next thing to happen lies past the time limit."""


class AssociationEnded(Stalled):
    """Nothing is left to happen because a host's association is over: `finished[side]` is the event that
    ended it (`FINISHED`: Failed with the retransmission limit, Aborted...), None for a host whose own is not."""

    def __init__(self, finished: dict[Side, RnicEvent | None]) -> None:
        self.finished = finished
        ended = ", ".join(f"host {side.name}: {type(event).__name__}" for side, event in finished.items() if event)
        super().__init__(f"the association ended ({ended}) and nothing is left in flight")


def host_config(side: Side, **options: object) -> RnicConfig:
    """The configuration of host `side` at its standard addresses, with `options` (udp, ddp, resources...)."""
    return RnicConfig(MACS[side], IPS[side], PORTS[side], **options)  # type: ignore[arg-type]


class HostPair:
    """Two SoftRnics on one link (see the module docstring)."""

    def __init__(self, hosts: dict[Side, SoftRnic], link: Link, record: bool = False) -> None:
        self.hosts = hosts
        self.memory = {side: host.memory for side, host in hosts.items()}
        self.link = link
        self.now = 0.0
        self.events: dict[Side, list[RnicEvent]] = {side: [] for side in Side}
        self._counts: dict[Side, Counter[type]] = {side: Counter() for side in Side}
        self.tap: Callable[[Side, bytes], bool] | None = None
        """Sees every frame a host sends; returning False keeps it off the link."""
        self.sent: list[tuple[float, Side, bytes]] | None = [] if record else None
        """With `record`: (time, sender, frame) for every frame the hosts sent, before the link."""
        self.recorded = 0
        """How many events `events` holds, both sides: moves only when an event is recorded."""
        self._plain: tuple[SoftRnic, SoftRnic, bool] | None = None
        """(host A, host B, whether the two take packets alike): asked once per pair of hosts, not per step."""

    @classmethod
    def create(
        cls,
        link: LinkConfig | None = None,
        *,
        seed: int = 1,
        record: bool = False,
        configs: dict[Side, RnicConfig] | None = None,
        rngs: dict[Side, random.Random] | None = None,
        policies: dict[Side, SessionPolicy | None] | None = None,
        memories: dict[Side, SparseMemory] | None = None,
        **options: object,
    ) -> HostPair:
        """Hosts at the standard addresses with `options` for both (or `configs`), host random generators
        seeded from `seed` (or `rngs`), session policies (default: accept every session), empty host
        memories (or `memories`)."""
        hosts = {}
        for side in Side:
            config = configs[side] if configs is not None else host_config(side, **options)
            rng = rngs[side] if rngs is not None else random.Random(seed * 2 + (side is Side.B))
            policy = policies.get(side, accept_every_session) if policies is not None else accept_every_session
            memory = memories[side] if memories is not None else SparseMemory()
            hosts[side] = SoftRnic(config, memory, rng, session_policy=policy)
        return cls(hosts, Link(link, record=record), record=record)

    @property
    def a(self) -> SoftRnic:
        return self.hosts[Side.A]

    @property
    def b(self) -> SoftRnic:
        return self.hosts[Side.B]

    # -- what happened ------------------------------------------------------------

    def count(self, side: Side, kind: type) -> int:
        """How many events of `kind` (or a subclass) `side` reported so far."""
        return sum(n for event_type, n in self._counts[side].items() if issubclass(event_type, kind))

    def seen(self, side: Side, kind: type) -> bool:
        return self.count(side, kind) > 0

    def of(self, side: Side, kind: type) -> list:
        """Every event of `kind` `side` reported, in order."""
        return [event for event in self.events[side] if isinstance(event, kind)]

    def finished(self, side: Side) -> RnicEvent | None:
        """The first event that ended the side's association (`FINISHED`), if any."""
        if not any(self.count(side, kind) for kind in FINISHED):
            return None
        return next(event for event in self.events[side] if isinstance(event, FINISHED))

    def pcap(self) -> bytes:
        """The link's capture as a libpcap file (needs `record=True`)."""
        if self.link.recording is None:
            raise ValueError("the pair was created without record=True")
        return write_pcap(self.link.recording)

    # -- the loop -----------------------------------------------------------------

    def step(self, limit: float | None = None, why: str = "") -> None:
        """Send what is due, advance to the next arrival or timer, deliver and fire; `Stalled` if there is
        nothing left to happen or it lies past the simulated time `limit` (`why` then says what that is)."""
        self.send_due()
        next_time = self.next_time()
        if next_time is None:
            finished = {side: self.finished(side) for side in Side}
            if any(finished.values()):
                raise AssociationEnded(finished)
            raise Stalled("nothing in flight and no timer running")
        if limit is not None and next_time > limit:
            raise Stalled(why or f"nothing happens before {limit:g} s of simulated time")
        self.advance(next_time)

    def send_due(self) -> None:
        """Put every frame the hosts have to send now on the link (through `tap`).

        While no frame is looked at (no `tap`, nothing recorded, no corruption on the link), a host's packets to
        its peer go on the link unframed (`Unframed`, `SoftRnic.data_to_send_unframed`) and reach the peer
        through `receive_packet`: the Ethernet and IPv4 (and UDP) headers the one would build and the other
        check and strip, every frame, are left out. Hosts of another kind (engines, other SCTP stacks) always
        send and take frames. A host that had nothing more to send when last asked and was given nothing since
        (`SoftRnic.quiet`) is not asked."""
        now, sent, tap, link, hosts = self.now, self.sent, self.tap, self.link, self.hosts
        a, b = hosts[_A], hosts[_B]
        plain = self._plain
        if plain is None or plain[0] is not a or plain[1] is not b:   # new hosts (`SoftFabric`'s peer_host)
            plain = self._plain = (a, b, takes_packets(a) and takes_packets(b) and a.config.udp == b.config.udp)
        unframed = (sent is None and tap is None and link.recording is None and not link.config.corruption
                    and plain[2])
        for side, host in hosts.items():
            if host.quiet:   # nothing to send since it last sent (`SoftRnic.quiet`): most steps, one of the two
                continue
            if unframed:
                peer = b if side is _A else a
                for frame in host.data_to_send_unframed(now, peer.config.mac, peer.config.ip):
                    link.send(side, frame, now)
                continue
            for frame in host.data_to_send(now):
                if sent is not None:
                    sent.append((now, side, frame))
                if tap is None or tap(side, frame):
                    link.send(side, frame, now)

    def next_time(self) -> float | None:
        """The earliest of the next arrival and the hosts' timers; None when nothing is in flight or running."""
        earliest = self.link.next_arrival()
        for host in self.hosts.values():
            deadline = host.quiet_deadline if host.quiet else host.next_timeout()   # kept while quiet
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest

    def advance(self, now: float, record: bool = True) -> None:
        """Move to `now` (never back): deliver what arrived by then, fire the timers due, record the events
        (`record`; a caller that records them itself later, with `collect`, passes False)."""
        self.now = max(self.now, now)
        for side, frame, _ in self.link.deliveries(self.now):
            if type(frame) is Unframed:   # sent by the peer host, from its own addresses (`send_due`)
                sender = self.hosts[side.peer].config
                self.hosts[side].receive_packet(frame.packet, sender.mac, sender.ip, self.now)
            else:
                self.hosts[side].receive(frame, self.now)
        self.fire_timers(record)

    def fire_timers(self, record: bool = True) -> None:
        """Fire each host's timer that is due by `now`, and record the events (`record`)."""
        now = self.now
        for side, host in self.hosts.items():
            deadline = host.quiet_deadline if host.quiet else host.next_timeout()   # kept while quiet
            if deadline is not None and deadline <= now:
                host.handle_timeout(now)
            if record:
                events = host.next_events()
                if events:   # most steps bring none
                    self._record(side, events)

    def collect(self, side: Side | None = None) -> None:
        """Record the events the hosts (or the host of `side`) queued outside `step` (after a direct call on a
        host)."""
        for host_side, host in self.hosts.items() if side is None else ((side, self.hosts[side]),):
            events = host.next_events()
            if events:   # asked after every frame, by the driver too: most calls find none
                self._record(host_side, events)

    def run_until(self, done: Callable[[], bool], on_step: Callable[[], None] | None = None,
                  limit: float | None = None, idle_limit: float = IDLE_LIMIT) -> None:
        """Step until `done()`; `on_step` after every step.  `Stalled` when nothing is left to happen, when
        `idle_limit` simulated seconds pass without progress (`IDLE_LIMIT`), or past the simulated time
        `limit`."""
        mark, since = self._progress(), self.now
        while not done():
            idle_deadline = since + idle_limit
            if limit is not None and limit <= idle_deadline:
                self.step(limit, f"not done by {limit:g} s of simulated time")
            else:
                self.step(idle_deadline, f"no progress for {idle_limit:g} s of simulated time "
                                         "(no event, no new DATA chunk taken)")
            if on_step is not None:
                on_step()
            current = self._progress()
            if current != mark:
                mark, since = current, self.now

    def _progress(self) -> tuple[int, ...]:
        """What moves when the hosts get somewhere: their events and the new DATA chunks they took (asked after
        every step: one counter read per host, not the association's whole `statistics`)."""
        events, a, b = self.events, self.hosts[Side.A].association, self.hosts[Side.B].association
        return (len(events[Side.A]), len(events[Side.B]), a.data_chunks_received if a is not None else 0,
                b.data_chunks_received if b is not None else 0)

    def _record(self, side: Side, events: list[RnicEvent]) -> None:
        if events:   # most calls have none: no work for them
            self.events[side] += events
            self._counts[side].update(map(type, events))
            self.recorded += len(events)

    # -- the usual phases ---------------------------------------------------------

    def connect(self) -> None:
        """B listens, A connects; run until both associations are up (RFC 4960 5.1)."""
        self.b.listen()
        self.a.connect(self.now, MACS[Side.B], IPS[Side.B], PORTS[Side.B])
        self.run_until(lambda: self.a.connected and self.b.connected)

    def open_stream(self, stream_id: int = 0, private_data: bytes = b"") -> None:
        """A opens an enhanced DDP session on `stream_id` (RFC 6581 7, 9); run until A is established and
        B has the RTR."""
        self.a.open_stream(stream_id, private_data)
        self.run_until(lambda: self.seen(Side.A, SessionEstablished) and self.seen(Side.B, RtrArrived))

    def close(self, limit: float | None = None) -> dict[Side, RnicEvent | None]:
        """A closes (RFC 5043 6.2, RFC 4960 9.2); run until both hosts finished, for at most `limit`
        (default `CLOSE_TIME_LIMIT`) simulated seconds.

        Returns each host's finishing event (`FINISHED`), None for a host that did not finish: the limit
        passed, or nothing was in flight and no timer running.  Never raises `Stalled`."""
        self.a.close(self.now)
        deadline = self.now + (CLOSE_TIME_LIMIT if limit is None else limit)
        try:
            self.run_until(lambda: all(self.finished(side) for side in Side), limit=deadline)
        except Stalled:
            pass
        return {side: self.finished(side) for side in Side}
