"""Tests for model.sctp.association: the sans-I/O SCTP association (RFC 4960 / RFC 9260) under RFC 5043.

Two endpoints, a client `Association` and a server `Listener`, are joined by
`Link`, a tiny in-memory link: time only moves inside `Link.run()`, jumping to
the next packet arrival or timer (`batched` hands the endpoints every packet
arrived by then before asking them for packets); `fate(direction, packet)` decides each
packet's lot as a list of extra delays, one per copy delivered ([] drops it,
[0, 0] duplicates it, [0.5] delays it past its successors).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

import pytest

from model.sctp.association import (
    Association,
    AssociationState,
    InvalidStateError,
    InvalidStreamError,
    PayloadSizeError,
)
from model.sctp.handshake import random_tag
from model.sctp.listener import Listener
from tests.mulpdu import IPV4_HEADER, UDP_HEADER, mulpdu
from model.sctp.packet import (
    PPID_DDP_SEGMENT,
    AbortChunk,
    CookieAckChunk,
    CookieEchoChunk,
    DataChunk,
    ErrorCauseCode,
    ErrorChunk,
    HeartbeatAckChunk,
    HeartbeatChunk,
    InitAckChunk,
    InitChunk,
    ParameterType,
    SackChunk,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownChunk,
    ShutdownCompleteChunk,
)
from model.sctp.config import AssociationConfig
from model.sctp.events import (
    AssociationAborted,
    AssociationClosed,
    AssociationEstablished,
    AssociationEvent,
    AssociationFailed,
    DataAcknowledged,
    DataReceived,
    DdpProceduresForbidden,
    PathStatusChanged,
    PeerRestarted,
    PeerShutdownStarted,
    RetransmissionLimit,
)

CLIENT_PORT = 5000
SERVER_PORT = 6000
SECRET = b"0123456789abcdef0123456789abcdef"


def make_config(local: int, peer: int, seed: int, **overrides: object) -> AssociationConfig:
    return AssociationConfig(local_port=local, peer_port=peer, rng=random.Random(seed), hmac_secret=SECRET,
                             **overrides)  # type: ignore[arg-type]


@dataclass
class Sent:
    time: float
    direction: str  # "a->b" or "b->a"
    packet: SctpPacket


@dataclass
class Link:
    client: Association
    listener: Listener
    delay: float = 0.01
    fate: Callable[[str, SctpPacket], list[float]] = lambda direction, packet: [0.0]
    batched: bool = False
    now: float = 0.0
    server: Association | None = None
    log: list[Sent] = field(default_factory=list)
    events_a: list[AssociationEvent] = field(default_factory=list)
    events_b: list[AssociationEvent] = field(default_factory=list)
    _wire: list[tuple[float, int, str, bytes]] = field(default_factory=list)
    _sequence: int = 0

    @classmethod
    def create(cls, client_overrides: dict | None = None, server_overrides: dict | None = None,
               **kwargs: object) -> Link:
        client = Association(make_config(CLIENT_PORT, SERVER_PORT, 1, **(client_overrides or {})))
        listener = Listener(make_config(SERVER_PORT, 0, 2, **(server_overrides or {})))
        return cls(client=client, listener=listener, **kwargs)  # type: ignore[arg-type]

    def endpoints(self) -> list[Association]:
        return [a for a in (self.client, self.server) if a is not None]

    def flush(self) -> None:
        """Collect every packet due now and put it on the wire."""
        outputs = [("a->b", self.client_packets()), ("b->a", self.listener.data_to_send(self.now))]
        if self.server is not None:
            outputs.append(("b->a", self.server.data_to_send(self.now)))
        for direction, packets in outputs:
            for data in packets:
                self.transmit(direction, data)

    def client_packets(self) -> list[bytes]:
        return self.client.data_to_send(self.now)

    def transmit(self, direction: str, data: bytes) -> None:
        packet = SctpPacket.decode(data)
        self.log.append(Sent(self.now, direction, packet))
        for extra in self.fate(direction, packet):
            self._sequence += 1
            self._wire.append((self.now + self.delay + extra, self._sequence, direction, data))

    def inject(self, direction: str, data: bytes) -> None:
        """Put crafted bytes on the wire (bypassing `fate` and the log)."""
        self._sequence += 1
        self._wire.append((self.now + self.delay, self._sequence, direction, data))

    def deliver(self, direction: str, data: bytes) -> None:
        if direction == "b->a":
            self.events_a += fed(self.client, data, self.now)
            return
        if self.server is not None and not self.server.is_closed:
            header_tag = int.from_bytes(data[4:8], "big")
            if header_tag in (self.server.local_tag, 0) or data[12] == 10:
                self.events_b += fed(self.server, data, self.now)
                return
        self.listener.receive(data, self.now)
        for accepted in self.listener.next_events():
            self.server = accepted.association
            self.events_b += self.server.next_events()

    def next_time(self) -> float | None:
        times = [t for t, *_ in self._wire]
        times += [t for a in self.endpoints() if (t := a.next_timeout()) is not None]
        return min(times, default=None)

    def run(self, until: float | None = None, condition: Callable[[], bool] | None = None,
            max_steps: int = 200_000) -> None:
        """Advance until `condition()` holds, time passes `until`, or nothing is left to happen."""
        self.flush()
        for _ in range(max_steps):
            if condition is not None and condition():
                return
            upcoming = self.next_time()
            if upcoming is None or (until is not None and upcoming > until):
                if until is not None:
                    self.now = max(self.now, until)
                return
            self.now = max(self.now, upcoming)
            due = [w for w in self._wire if w[0] <= self.now]
            # One packet at a time, each followed by a flush, as on a serial wire; or, `batched`, every
            # packet due at once before one flush, as `model.rnic.pair.HostPair` drives its hosts.
            for item in (sorted(due) if self.batched else sorted(due)[:1]):
                self._wire.remove(item)
                self.deliver(item[2], item[3])
            for association, events in ((self.client, self.events_a), (self.server, self.events_b)):
                if association is not None:
                    timeout = association.next_timeout()
                    if timeout is not None and timeout <= self.now:
                        association.handle_timeout(self.now)
                        events += association.next_events()
            self.flush()
        raise AssertionError("link did not settle")

    def sent(self, direction: str, chunk_type: type) -> list[Sent]:
        return [s for s in self.log if s.direction == direction and any(isinstance(c, chunk_type) for c in s.packet.chunks)]


# ---------------------------------------------------------------- helpers


def fed(association: Association, data: bytes, now: float) -> list[AssociationEvent]:
    """Hand one packet to `association`; the events it queued."""
    association.receive(data, now)
    return association.next_events()


def of_type(events: list[AssociationEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def established_link(**kwargs: object) -> Link:
    link = Link.create(**kwargs)  # type: ignore[arg-type]
    link.client.connect(link.now)
    link.run(condition=lambda: link.server is not None and link.server.state is AssociationState.ESTABLISHED
             and link.client.state is AssociationState.ESTABLISHED)
    return link


def initial_tsn(link: Link, direction: str = "a->b") -> int:
    """The Initial TSN the sender announced in its INIT (a->b) or INIT ACK (b->a) on the wire: its first
    DATA chunk carries it (RFC 4960 3.3.2, 3.3.3)."""
    kind = InitChunk if direction == "a->b" else InitAckChunk
    return link.sent(direction, kind)[-1].packet.chunks[0].initial_tsn


def data_chunks(sent: list[Sent]) -> list[DataChunk]:
    return [c for s in sent for c in s.packet.chunks if isinstance(c, DataChunk)]


def received_payloads(events: list[AssociationEvent]) -> list[bytes]:
    return [e.payload for e in of_type(events, DataReceived)]


# ---------------------------------------------------------------- handshake


def test_rfc4960_5_1_handshake_and_rfc5043_11_1_ddp_on_both_sides() -> None:
    link = established_link()
    init = link.sent("a->b", InitChunk)[0]
    assert init.packet.verification_tag == 0  # RFC 4960 8.5.1 A
    assert init.packet.chunks[0].adaptation_code_point == 1  # RFC 5043 5.1
    init_ack = link.sent("b->a", InitAckChunk)[0]
    assert init_ack.packet.verification_tag == link.client.local_tag
    assert init_ack.packet.chunks[0].adaptation_code_point == 1
    assert link.sent("a->b", CookieEchoChunk)[0].packet.verification_tag == link.server.local_tag
    assert link.sent("b->a", CookieAckChunk)[0].packet.verification_tag == link.client.local_tag
    for events, association in ((link.events_a, link.client), (link.events_b, link.server)):
        [up] = of_type(events, AssociationEstablished)
        assert up == AssociationEstablished(8, 8, 8, 1, True, association.mulpdu)
        assert not of_type(events, DdpProceduresForbidden)
    assert link.client.peer_tag == link.server.local_tag and link.server.peer_tag == link.client.local_tag


def test_rfc4960_5_3_1_initiate_tags_that_name_a_row_are_random_and_never_zero() -> None:
    """`tag_row` (the receive engine finds an association's row from a packet's tag, abi.rx.association_row): the
    low bits hold the row, the rest are drawn; row 0 never gives the tag 0 (RFC 4960 5.3.1, 8.5.1 A)."""
    for bits, row in ((4, 5), (4, 0), (1, 1), (16, 0xBEEF)):
        tags = [random_tag(make_config(1, 2, seed, tag_row=(bits, row))) for seed in range(2000)]
        assert all(tag & ((1 << bits) - 1) == row and 0 < tag < 1 << 32 for tag in tags)
        assert len(set(tags)) > 1900                         # 2000 draws of at least 2^16 values: few repeats
        assert max(tags) >> 31 and min(tags) >> 28 == 0      # the high bits reach both ends
    for bad in ((0, 0), (17, 0), (4, 16), (4, -1)):
        with pytest.raises(ValueError, match="tag_row"):
            make_config(1, 2, 1, tag_row=bad)


def test_rfc4960_5_1_both_ends_initiate_tags_name_their_rows() -> None:
    """The INIT's and the INIT ACK's Initiate Tags (the listener draws it into its cookie) carry each side's
    row, and the association comes up as any other."""
    link = established_link(client_overrides={"tag_row": (4, 3)}, server_overrides={"tag_row": (4, 9)})
    assert link.sent("a->b", InitChunk)[0].packet.chunks[0].initiate_tag & 0xF == 3
    assert link.sent("b->a", InitAckChunk)[0].packet.chunks[0].initiate_tag & 0xF == 9
    assert link.client.local_tag & 0xF == 3 and link.server.local_tag & 0xF == 9
    assert link.client.peer_tag == link.server.local_tag and link.server.peer_tag == link.client.local_tag


@pytest.mark.parametrize("client_cp, server_cp", [(1, None), (None, 1), (1, 0x1234), (0x1234, 1), (None, None)])
def test_rfc5043_11_1_adaptation_table_forbids_ddp_explicitly(client_cp: int | None, server_cp: int | None) -> None:
    """NONE and ANY-OTHER rows: each side gets DdpProceduresForbidden, never a silent fallback."""
    link = established_link(client_overrides={"adaptation_code_point": client_cp},
                            server_overrides={"adaptation_code_point": server_cp})
    assert (link.sent("a->b", InitChunk)[0].packet.chunks[0].adaptation_code_point) == client_cp
    assert (link.sent("b->a", InitAckChunk)[0].packet.chunks[0].adaptation_code_point) == server_cp
    for events, peer_cp in ((link.events_a, server_cp), (link.events_b, client_cp)):
        [up] = of_type(events, AssociationEstablished)
        assert up.ddp_enabled is False and up.peer_adaptation_code_point == peer_cp
        [forbidden] = of_type(events, DdpProceduresForbidden)
        assert forbidden.peer_adaptation_code_point == peer_cp


def test_rfc5043_8_streams_negotiated_down_to_equal_counts() -> None:
    link = established_link(server_overrides={"streams": 3})
    for events in (link.events_a, link.events_b):
        [up] = of_type(events, AssociationEstablished)
        assert (up.outbound_streams, up.inbound_streams, up.streams) == (3, 3, 3)
    with pytest.raises(InvalidStreamError):
        link.client.send(3, PPID_DDP_SEGMENT, b"x" * 8)


def test_rfc4960_5_1_init_retransmitted_with_backoff_when_lost() -> None:
    dropped: list[float] = []

    def fate(direction: str, packet: SctpPacket) -> list[float]:
        if isinstance(packet.chunks[0], InitChunk) and len(dropped) < 2:
            dropped.append(1)
            return []
        return [0.0]

    link = Link.create(fate=fate)
    link.client.connect(0.0)
    link.run(condition=lambda: link.client.state is AssociationState.ESTABLISHED)
    assert [s.time for s in link.sent("a->b", InitChunk)] == [0.0, 3.0, 9.0]  # RTO.Initial, then doubled
    inits = [s.packet.chunks[0] for s in link.sent("a->b", InitChunk)]
    assert len({(i.initiate_tag, i.initial_tsn) for i in inits}) == 1


def test_rfc4960_5_1_max_init_retransmits_fails_the_association() -> None:
    link = Link.create(fate=lambda d, p: [], client_overrides={"max_init_retransmits": 2, "rto_max": 4.0})
    link.client.connect(0.0)
    link.run()
    assert [s.time for s in link.sent("a->b", InitChunk)] == [0.0, 3.0, 7.0]
    assert len(of_type(link.events_a, AssociationFailed)) == 1
    assert link.client.is_closed and link.client.next_timeout() is None


def backed_off_times(start: float, expiries: int, rto: float = 3.0, rto_max: float = 60.0) -> list[float]:
    """When a timer started at `start` with RTO `rto` expires, `expiries` times in a row: RTO doubles after
    each expiry up to RTO.Max (RFC 4960 6.3.3 E2; RTO.Initial 3 s and RTO.Max 60 s, 15)."""
    times, now = [], start
    for _ in range(expiries):
        now += rto
        times.append(now)
        rto = min(2 * rto, rto_max)
    return times


def test_rfc4960_5_1_c_every_init_lost_ends_in_max_init_retransmits_at_the_defaults() -> None:
    """Max.Init.Retransmits 8 (RFC 4960 15): INIT goes 1 + 8 times, T1-init doubling from RTO.Initial; the
    ninth expiry aborts the initialization and reports it (5.1 C), naming the limit and COOKIE-WAIT."""
    link = Link.create(fate=lambda direction, packet: [] if isinstance(packet.chunks[0], InitChunk) else [0.0])
    link.client.connect(0.0)
    link.run(condition=lambda: link.client.is_closed)
    expiries = backed_off_times(0.0, 9)
    assert [s.time for s in link.sent("a->b", InitChunk)] == pytest.approx([0.0] + expiries[:8])
    assert link.now == pytest.approx(expiries[8])  # 333 s
    [failed] = of_type(link.events_a, AssociationFailed)
    assert (failed.limit, failed.limit_value, failed.state) == (
        RetransmissionLimit.MAX_INIT_RETRANSMITS, 8, AssociationState.COOKIE_WAIT)
    assert link.client.next_timeout() is None and link.client.data_to_send(link.now) == []


def test_rfc4960_5_1_c_every_cookie_echo_lost_ends_in_max_init_retransmits_with_abort() -> None:
    """T1-cookie obeys the same limit (5.1 C): COOKIE ECHO 1 + 8 times, then the failure in COOKIE-ECHOED; the
    peer's tag is known, so an ABORT tells the peer (9.1)."""
    def fate(direction: str, packet: SctpPacket) -> list[float]:
        return [] if isinstance(packet.chunks[0], CookieEchoChunk) else [0.0]

    link = Link.create(fate=fate)
    link.client.connect(0.0)
    link.run(condition=lambda: link.client.is_closed)
    echoes = [s.time for s in link.sent("a->b", CookieEchoChunk)]
    expiries = backed_off_times(echoes[0], 9)
    assert echoes == pytest.approx([echoes[0]] + expiries[:8])
    [failed] = of_type(link.events_a, AssociationFailed)
    assert (failed.limit, failed.limit_value, failed.state) == (
        RetransmissionLimit.MAX_INIT_RETRANSMITS, 8, AssociationState.COOKIE_ECHOED)
    assert link.now == pytest.approx(expiries[8])
    assert isinstance(link.log[-1].packet.chunks[0], AbortChunk) and link.log[-1].time == pytest.approx(link.now)


def test_rfc4960_8_1_a_link_dead_after_the_handshake_ends_in_association_max_retrans() -> None:
    """Everything is lost once the association is up (no heartbeats, so only T3-rtx counts).  The DATA
    chunk goes 1 + Association.Max.Retrans (10) times, T3-rtx doubling from RTO.Initial (no RTT measured
    yet, 6.3.1 C1) to RTO.Max (6.3.3 E2); Path.Max.Retrans (5) marks the path unreachable at the sixth
    expiry (8.2); the eleventh ends the association in ESTABLISHED with an ABORT (8.1)."""
    link = established_link(client_overrides={"heartbeat_interval": None},
                            server_overrides={"heartbeat_interval": None})
    link.fate = lambda direction, packet: []
    start = link.now
    link.client.send(0, PPID_DDP_SEGMENT, b"lost" * 100)
    link.run(condition=lambda: bool(of_type(link.events_a, PathStatusChanged)))
    expiries = backed_off_times(start, 11)
    assert link.now == pytest.approx(expiries[5])
    assert of_type(link.events_a, PathStatusChanged) == [PathStatusChanged(reachable=False)]
    assert not of_type(link.events_a, AssociationFailed)
    link.run(condition=lambda: link.client.is_closed)
    assert [s.time for s in link.sent("a->b", DataChunk)] == pytest.approx([start] + expiries[:10])
    assert link.now == pytest.approx(expiries[10])  # 453 s after the DATA chunk
    [failed] = of_type(link.events_a, AssociationFailed)
    assert (failed.limit, failed.limit_value, failed.state) == (
        RetransmissionLimit.ASSOCIATION_MAX_RETRANS, 10, AssociationState.ESTABLISHED)
    assert "T3-rtx" in failed.reason
    assert isinstance(link.log[-1].packet.chunks[0], AbortChunk)
    assert link.client.next_timeout() is None


def test_rfc4960_5_1_5_bad_cookie_mac_silently_discarded_then_retransmission_succeeds() -> None:
    corrupted: list[int] = []

    def fate(direction: str, packet: SctpPacket) -> list[float]:
        if isinstance(packet.chunks[0], CookieEchoChunk) and not corrupted:
            corrupted.append(1)
            echo = packet.chunks[0]
            bad = bytearray(echo.cookie)
            bad[-1] ^= 1
            link.inject(direction, SctpPacket(packet.src_port, packet.dst_port, packet.verification_tag,
                                              (CookieEchoChunk(cookie=bytes(bad)),)).encode())
            return []
        return [0.0]

    link = Link.create(fate=fate)
    link.client.connect(0.0)
    link.run(until=1.0)
    assert link.server is None and not link.sent("b->a", CookieAckChunk) and not link.sent("b->a", ErrorChunk)
    link.run(condition=lambda: link.client.state is AssociationState.ESTABLISHED)
    echoes = link.sent("a->b", CookieEchoChunk)
    assert len(echoes) == 2 and echoes[1].time == pytest.approx(echoes[0].time + 3.0)  # T1-cookie


def test_rfc4960_5_2_6_stale_cookie_error_then_init_with_cookie_preservative() -> None:
    """The Listener answers a stale cookie with ERROR "Stale Cookie"; the client retries once with type 9."""
    delayed: list[int] = []

    def fate(direction: str, packet: SctpPacket) -> list[float]:
        if isinstance(packet.chunks[0], CookieEchoChunk) and not delayed:
            delayed.append(1)
            return [2.5]
        return [0.0]

    link = Link.create(fate=fate, server_overrides={"cookie_lifetime": 2.0},
                       client_overrides={"rto_initial": 10.0, "rto_max": 20.0})
    link.client.connect(0.0)
    link.run(condition=lambda: link.client.state is AssociationState.ESTABLISHED)
    [error] = link.sent("b->a", ErrorChunk)
    [cause] = error.packet.chunks[0].causes
    assert cause.code == ErrorCauseCode.STALE_COOKIE
    assert int.from_bytes(cause.value, "big") == pytest.approx(520_000, abs=1000)  # arrives 2.53 s, cookie made at 0.01 s for 2 s
    second_init = link.sent("a->b", InitChunk)[1].packet.chunks[0]
    [preservative] = [p for p in second_init.parameters if p.param_type == ParameterType.COOKIE_PRESERVATIVE]
    assert int.from_bytes(preservative.value, "big") == 1040  # twice the staleness, in ms
    assert of_type(link.events_b, AssociationEstablished)


def test_rfc4960_8_5_wrong_verification_tag_silently_discarded() -> None:
    link = established_link()
    wrong = SctpPacket(CLIENT_PORT, SERVER_PORT, link.server.local_tag ^ 1,
                       (DataChunk(tsn=initial_tsn(link), stream_id=0, ssn=0, ppid=16, user_data=b"evil",
                                  unordered=True),)).encode()
    assert fed(link.server, wrong, link.now) == []
    assert link.server.data_to_send(link.now) == []
    assert link.server.next_timeout() is not None  # only the heartbeat timer; no delayed ACK
    assert link.server.statistics.data_chunks_received == 0
    # An ABORT with T=0 and the wrong tag is ignored too (8.5.1 B).
    abort = SctpPacket(CLIENT_PORT, SERVER_PORT, link.client.local_tag, (AbortChunk(),)).encode()
    assert fed(link.server, abort, link.now) == [] and link.server.state is AssociationState.ESTABLISHED
    # With T=1 the sender's own tag (= the receiver's peer tag) is the right one.
    abort_t = SctpPacket(CLIENT_PORT, SERVER_PORT, link.client.local_tag, (AbortChunk(tag_reflected=True),)).encode()
    assert of_type(fed(link.server, abort_t, link.now), AssociationAborted)


def test_rfc4960_5_2_1_simultaneous_inits_converge_on_one_association() -> None:
    a = Association(make_config(CLIENT_PORT, SERVER_PORT, 11))
    b = Association(make_config(SERVER_PORT, CLIENT_PORT, 12))
    a.connect(0.0)
    b.connect(0.0)
    events: dict[str, list[AssociationEvent]] = {"a": [], "b": []}
    now = 0.0
    for _ in range(10):
        now += 0.01
        to_b, to_a = a.data_to_send(now), b.data_to_send(now)
        for data in to_b:
            events["b"] += fed(b, data, now)
        for data in to_a:
            events["a"] += fed(a, data, now)
    assert a.state is b.state is AssociationState.ESTABLISHED
    assert (a.local_tag, a.peer_tag) == (b.peer_tag, b.local_tag)
    assert len(of_type(events["a"], AssociationEstablished)) == len(of_type(events["b"], AssociationEstablished)) == 1
    a.send(1, PPID_DDP_SEGMENT, b"hello")
    for data in a.data_to_send(now):
        events["b"] += fed(b, data, now)
    assert received_payloads(events["b"]) == [b"hello"]


def test_rfc4960_5_2_4_case_d_duplicate_cookie_echo_gets_cookie_ack_again() -> None:
    def fate(direction: str, packet: SctpPacket) -> list[float]:
        return [] if isinstance(packet.chunks[0], CookieAckChunk) and len(link.sent("b->a", CookieAckChunk)) == 1 else [0.0]

    link = Link.create(fate=fate)
    link.client.connect(0.0)
    link.run(condition=lambda: link.client.state is AssociationState.ESTABLISHED)
    assert len(link.sent("b->a", CookieAckChunk)) == 2
    assert len(of_type(link.events_b, AssociationEstablished)) == 1


def test_rfc4960_5_2_4_case_a_a_restarted_peer_ends_the_association_and_its_cookie_makes_a_new_one() -> None:
    """The client restarts on the same ports: its INIT gets the server's INIT ACK with the current tags as tie-tags
    (5.2.2); its COOKIE ECHO then carries new tags with those tie-tags (5.2.4 A): the old association ends
    (`PeerRestarted`, nothing more sent on it) and the same COOKIE ECHO, given to a listener with the server's
    key, makes a new association the restarted client sees established."""
    link = established_link()
    old = link.server
    restarted = Association(make_config(CLIENT_PORT, SERVER_PORT, 99))
    restarted.connect(link.now)
    (init,) = restarted.data_to_send(link.now)
    assert fed(old, init, link.now) == []
    (init_ack,) = old.data_to_send(link.now)
    ack = SctpPacket.decode(init_ack).chunks[0]
    assert isinstance(ack, InitAckChunk) and ack.initiate_tag not in (old.local_tag, 0)
    assert fed(restarted, init_ack, link.now) == []
    (cookie_echo,) = restarted.data_to_send(link.now)
    events = fed(old, cookie_echo, link.now)
    assert of_type(events, PeerRestarted) and old.state is AssociationState.CLOSED
    assert old.data_to_send(link.now) == [] and old.next_timeout() is None
    listener = Listener(make_config(SERVER_PORT, 0, 3))
    listener.receive(cookie_echo, link.now)
    (accepted,) = listener.next_events()
    new = accepted.association
    assert new.state is AssociationState.ESTABLISHED
    assert (new.local_tag, new.peer_tag) == (restarted.peer_tag, restarted.local_tag) == (ack.initiate_tag,
                                                                                          restarted.local_tag)
    for packet in new.data_to_send(link.now):
        fed(restarted, packet, link.now)
    assert restarted.state is AssociationState.ESTABLISHED


def test_rfc4960_5_2_4_a_cookie_echo_with_foreign_tie_tags_is_discarded() -> None:
    """A valid cookie (the same key) with new tags but no tie-tags of this association (one from another
    association's handshake): not a restart (5.2.4 A needs the tie-tags), discarded; the association goes on."""
    link = established_link()
    stranger = Link(client=Association(make_config(CLIENT_PORT, SERVER_PORT, 7)),
                    listener=Listener(make_config(SERVER_PORT, 0, 8)))
    stranger.client.connect(stranger.now)
    stranger.run(condition=lambda: stranger.server is not None
                 and stranger.server.state is AssociationState.ESTABLISHED)
    assert stranger.server.local_tag != link.server.local_tag
    cookie_echo = next(s.packet for s in stranger.log if isinstance(s.packet.chunks[0], CookieEchoChunk))
    assert fed(link.server, cookie_echo.encode(), link.now) == []
    assert link.server.state is AssociationState.ESTABLISHED
    assert link.server.data_to_send(link.now) == []   # no COOKIE ACK: not case D either


# ---------------------------------------------------------------- data transfer


def all_acknowledged(link: Link) -> Callable[[], bool]:
    return lambda: all(a.outstanding_chunks == 0 for a in link.endpoints())


def test_rfc4960_6_10_data_both_directions_bundled_unordered_and_acknowledged_per_stream() -> None:
    link = established_link()
    start = len(link.log)
    for i in range(5):
        link.client.send(i, PPID_DDP_SEGMENT, bytes([i]) * 100)
    link.client.send(0, PPID_DDP_SEGMENT, b"again")
    for i in range(3):
        link.server.send(7, PPID_DDP_SEGMENT, b"srv%d" % i)
    link.run(condition=all_acknowledged(link))
    client_data = [s for s in link.log[start:] if s.direction == "a->b" and data_chunks([s])]
    assert len(client_data) == 1 and len(data_chunks(client_data)) == 6  # one bundled packet
    assert all(c.unordered and c.beginning and c.ending for c in data_chunks(link.log))  # RFC 5043 9, 10
    assert received_payloads(link.events_b) == [bytes([i]) * 100 for i in range(5)] + [b"again"]
    assert received_payloads(link.events_a) == [b"srv0", b"srv1", b"srv2"]
    [first] = of_type(link.events_b, DataReceived)[:1]
    assert (first.stream_id, first.ppid, first.unordered) == (0, PPID_DDP_SEGMENT, True)
    acked = {}
    for event in of_type(link.events_a, DataAcknowledged):
        acked[event.stream_id] = acked.get(event.stream_id, 0) + event.count
    assert acked == {0: 2, 1: 1, 2: 1, 3: 1, 4: 1}  # RFC 5043 6.6: each chunk counted once
    assert sum(e.count for e in of_type(link.events_b, DataAcknowledged) if e.stream_id == 7) == 3


def test_rfc4960_6_2_delayed_sack_after_200ms_or_every_second_packet() -> None:
    link = established_link()
    link.client.send(0, PPID_DDP_SEGMENT, b"a" * 1400)
    link.run(condition=lambda: bool(link.sent("b->a", SackChunk)))
    [sack] = link.sent("b->a", SackChunk)
    data_time = link.sent("a->b", DataChunk)[0].time
    assert sack.time == pytest.approx(data_time + link.delay + 0.2)  # delayed ACK, RFC 4960 6.2
    link.client.send(0, PPID_DDP_SEGMENT, b"b" * 1400)
    link.client.send(0, PPID_DDP_SEGMENT, b"c" * 1400)  # two packets: the second one is acked at once
    before = len(link.sent("b->a", SackChunk))
    link.run(condition=lambda: len(link.sent("b->a", SackChunk)) > before)
    assert link.sent("b->a", SackChunk)[-1].time == pytest.approx(link.sent("a->b", DataChunk)[-1].time + link.delay)


def test_rfc4960_6_2_gap_blocks_and_duplicate_tsns_reported_immediately() -> None:
    def fate(direction: str, packet: SctpPacket) -> list[float]:
        chunks = [c for c in packet.chunks if isinstance(c, DataChunk)]
        if chunks and chunks[0].tsn == base + 1 and chunks[0].user_data[:1] == b"1" and not dropped:
            dropped.append(chunks[0].tsn)
            return []
        if chunks and chunks[0].tsn == base + 2 and not duplicated:
            duplicated.append(chunks[0].tsn)
            return [0.0, 0.001]
        return [0.0]

    dropped: list[int] = []
    duplicated: list[int] = []
    link = established_link()
    base = initial_tsn(link)
    link.fate = fate
    for i in range(4):
        link.client.send(0, PPID_DDP_SEGMENT, str(i).encode() * 1400)  # one chunk per packet
    link.run(condition=all_acknowledged(link))
    sacks = [s.packet.chunks[0] for s in link.sent("b->a", SackChunk)]
    assert SackChunk(base, 65536, ((2, 2),), ()) in sacks
    assert SackChunk(base, 65536, ((2, 3),), ()) in sacks
    assert SackChunk(base, 65536, ((2, 3),), (base + 2,)) in sacks  # RFC 4960 6.2: duplicate reported once
    assert sum(base + 2 in s.duplicate_tsns for s in sacks) == 1
    assert received_payloads(link.events_b) == [b"0" * 1400, b"2" * 1400, b"3" * 1400, b"1" * 1400]
    assert link.server.statistics.duplicate_tsns_received == 1


def test_rfc4960_6_2_a_stale_sack_is_never_bundled_ahead_of_a_fresher_one() -> None:
    """TSN base+1 arrives before base: the gap calls for a SACK at once (6.2); base then fills the gap and, as
    the receiver has DATA of its own to send, a SACK rides with that DATA.  Both are due when the receiver
    next sends: the gap SACK goes in its own packet, the up-to-date one with the DATA, and no packet holds
    two SACKs (3.3.4: a SACK carries the receiver's latest Cumulative TSN Ack and gaps)."""
    link = established_link()
    server, base = link.server, initial_tsn(link)

    def data(tsn: int) -> bytes:
        chunk = DataChunk(tsn=tsn, stream_id=0, ssn=0, ppid=PPID_DDP_SEGMENT, user_data=b"x" * 100, unordered=True)
        return SctpPacket(CLIENT_PORT, SERVER_PORT, server.local_tag, (chunk,)).encode()

    server.receive(data(base + 1), link.now)
    server.receive(data(base), link.now)
    server.send(0, PPID_DDP_SEGMENT, b"reply")
    packets = [SctpPacket.decode(p).chunks for p in server.data_to_send(link.now)]
    sacks_per_packet = [[c for c in chunks if isinstance(c, SackChunk)] for chunks in packets]
    assert all(len(sacks) <= 1 for sacks in sacks_per_packet), packets
    assert [s for sacks in sacks_per_packet for s in sacks] == [
        SackChunk(base - 1, 65536, ((2, 2),), ()),  # the gap, as when base+1 arrived
        SackChunk(base + 1, 65536, (), ()),  # both taken
    ]
    assert isinstance(packets[-1][-1], DataChunk) and isinstance(packets[-1][0], SackChunk)


def test_rfc4960_6_3_3_t3_rtx_timing_rto_backoff_and_karn() -> None:
    drops = [0]

    def fate(direction: str, packet: SctpPacket) -> list[float]:
        if direction == "a->b" and data_chunks([Sent(0, direction, packet)]) and drops[0] < 3:
            drops[0] += 1
            return []
        return [0.0]

    link = established_link()
    link.fate = fate
    t0 = link.now
    cwnd_before = link.client.statistics.cwnd
    link.client.send(2, PPID_DDP_SEGMENT, b"lost thrice")
    link.run(condition=all_acknowledged(link))
    times = [s.time - t0 for s in link.sent("a->b", DataChunk)]
    assert times == pytest.approx([0.0, 3.0, 9.0, 21.0])  # RTO.Initial 3 s, doubled each time (6.3.3 E2)
    stats = link.client.statistics
    assert stats.retransmitted_by_timeout == 3 and stats.fast_retransmitted == 0
    assert stats.srtt is None  # Karn's rule: no RTT from a retransmitted chunk (6.3.1 C5)
    assert stats.rto == 24.0
    # 7.2.3 collapse to one MTU, then 7.2.1 slow start adds the 11 bytes the final SACK acknowledged.
    assert stats.cwnd == 1480 + 11 and stats.ssthresh == max(cwnd_before // 2, 4 * 1480)
    assert received_payloads(link.events_b) == [b"lost thrice"]


def test_rfc4960_6_3_1_rto_from_rtt_measurement() -> None:
    link = established_link(delay=0.05)
    link.client.send(0, PPID_DDP_SEGMENT, b"x" * 1400)
    link.client.send(0, PPID_DDP_SEGMENT, b"y" * 1400)
    link.run(condition=all_acknowledged(link))
    stats = link.client.statistics
    assert stats.srtt == pytest.approx(0.1) and stats.rttvar == pytest.approx(0.05)  # C1
    assert stats.rto == 1.0  # SRTT + 4 RTTVAR = 0.3, raised to RTO.Min (C6)


def test_rfc9260_7_2_4_fast_retransmit_after_three_miss_indications() -> None:
    link = established_link()
    first_tsn = initial_tsn(link)
    link.fate = lambda d, p: [] if any(isinstance(c, DataChunk) and c.tsn == first_tsn and not fast_seen(c) for c in p.chunks) else [0.0]
    seen: list[int] = []

    def fast_seen(chunk: DataChunk) -> bool:
        seen.append(chunk.tsn)
        return len(seen) > 1

    cwnd = link.client.statistics.cwnd
    t0 = link.now
    for i in range(10):
        link.client.send(0, PPID_DDP_SEGMENT, bytes([i]) * 1000)
    link.run(condition=all_acknowledged(link))
    stats = link.client.statistics
    assert stats.fast_retransmitted == 1 and stats.retransmitted_by_timeout == 0
    retransmission = [s for s in link.sent("a->b", DataChunk) if data_chunks([s])[0].tsn == first_tsn][1]
    assert retransmission.time - t0 < 1.0  # well before T3-rtx (3 s)
    sacks_before = [s.packet.chunks[0] for s in link.sent("b->a", SackChunk) if s.time < retransmission.time]
    assert [len(s.gap_blocks) > 0 for s in sacks_before][-3:] == [True, True, True]
    assert stats.ssthresh == max(cwnd // 2, 4 * 1480)  # 7.2.4: ssthresh = max(cwnd/2, 4 MTU) = cwnd
    assert sorted(received_payloads(link.events_b)) == [bytes([i]) * 1000 for i in range(10)]


def test_rfc4960_7_2_1_slow_start_7_2_2_congestion_avoidance_7_2_3_collapse() -> None:
    link = established_link(client_overrides={"max_burst": 64})
    mtu = 1480
    history = [link.client.statistics.cwnd]
    assert history[0] == 4380  # min(4 MTU, max(2 MTU, 4380))
    link.client._cc.ssthresh = 12_000  # reach congestion avoidance within a short transfer

    def fate(direction: str, packet: SctpPacket) -> list[float]:
        history.append(link.client.statistics.cwnd)
        return [0.0]

    link.fate = fate
    for i in range(150):
        link.client.send(0, PPID_DDP_SEGMENT, b"z" * 1400)
    link.run(condition=all_acknowledged(link))
    changes = [(before, after) for before, after in zip(history, history[1:]) if after != before]
    slow_start = [after - before for before, after in changes if before <= 12_000]
    avoidance = [after - before for before, after in changes if before > 12_000]
    assert slow_start and all(0 < step <= mtu for step in slow_start)  # 7.2.1: at most one MTU per SACK
    assert avoidance and all(step == mtu for step in avoidance)  # 7.2.2: one MTU per cwnd of data acked
    grown = link.client.statistics.cwnd
    assert grown > 12_000
    # 7.2.3: a T3-rtx expiry collapses cwnd to one MTU.
    link.fate = lambda d, p: [] if d == "a->b" else [0.0]
    link.client.send(0, PPID_DDP_SEGMENT, b"lost")
    link.run(until=link.now + 1.5)  # RTO is RTO.Min (1 s): exactly one expiry
    assert link.client.statistics.retransmitted_by_timeout == 1
    assert link.client.statistics.cwnd == mtu and link.client.statistics.ssthresh == max(grown // 2, 4 * mtu)


@pytest.mark.parametrize("batched", [False, True], ids=["per-packet", "batched"])
def test_rfc4960_7_2_1_clean_path_cwnd_reaches_ssthresh_and_the_flight_uses_it(batched: bool) -> None:
    """A few hundred KB on a clean 1 ms path with the default Max.Burst 4: slow start takes cwnd to
    ssthresh (the peer's a_rwnd, 7.2.1) and the flight fills it, whether the caller asks for packets after
    every packet received or only after all that arrived at one instant.  Batched, the receiver still
    SACKs every second packet (6.2) and each SACK is one event with its own Max.Burst (6.1 D)."""
    link = established_link(delay=0.0005, batched=batched)
    mtu = link.client.config.max_packet_size
    ssthresh = link.client.statistics.ssthresh
    assert ssthresh == 65536
    flights: list[int] = []

    def fate(direction: str, packet: SctpPacket) -> list[float]:
        if direction == "a->b":
            flights.append(link.client.statistics.flight_size)
        return [0.0]

    link.fate = fate
    start = len(link.log)
    t0 = link.now
    for _ in range(300):  # 420 000 bytes, one chunk per packet
        link.client.send(0, PPID_DDP_SEGMENT, b"w" * 1400)
    link.run(condition=all_acknowledged(link))
    stats = link.client.statistics
    assert stats.retransmitted_by_timeout == stats.fast_retransmitted == 0
    assert stats.cwnd >= ssthresh
    assert max(flights) >= ssthresh - 2 * mtu  # the peer's rwnd (64 KiB) is the only limit left
    assert link.now - t0 < 0.015  # 300 chunks at up to 46 a round trip, after about 7 round trips of slow start
    log = link.log[start:]
    data_packets = [s for s in log if s.direction == "a->b" and data_chunks([s])]
    sacks = [s for s in log if s.direction == "b->a" and any(isinstance(c, SackChunk) for c in s.packet.chunks)]
    assert len(sacks) >= len(data_packets) // 2  # 6.2: a SACK for at least every second packet
    for time in sorted({s.time for s in data_packets}):  # 6.1 D: at most Max.Burst packets per SACK
        sent = sum(1 for s in data_packets if s.time == time)
        arrived = sum(1 for s in sacks if s.time + link.delay == pytest.approx(time))
        assert sent <= 4 * max(1, arrived)


def test_rfc4960_6_1_a_zero_window_probe_and_window_update() -> None:
    link = established_link(server_overrides={"manual_receive_window": True, "receive_buffer": 3000})
    for i in range(5):
        link.client.send(0, PPID_DDP_SEGMENT, bytes([i]) * 1000)
    link.run(until=link.now + 5.0)
    assert received_payloads(link.events_b) == [bytes([i]) * 1000 for i in range(3)]
    assert link.sent("b->a", SackChunk)[-1].packet.chunks[0].a_rwnd == 0
    probes = [s for s in link.sent("a->b", DataChunk) if data_chunks([s])[0].user_data[:1] == b"\x03"]
    assert len(probes) >= 3 and all(len(data_chunks([p])) == 1 for p in probes)  # one chunk at a time
    assert not [s for s in link.sent("a->b", DataChunk) if data_chunks([s])[0].user_data[:1] == b"\x04"]
    assert not link.client.is_closed  # SACKs answering probes are not errors (RFC 9260 6.1 A)
    link.server.consume(3000)
    link.run(condition=all_acknowledged(link))
    assert sorted(received_payloads(link.events_b)) == [bytes([i]) * 1000 for i in range(5)]


def test_rfc4960_6_2_a_rwnd_limits_the_sender_so_the_receiver_never_drops() -> None:
    link = established_link(server_overrides={"manual_receive_window": True, "receive_buffer": 4000})
    for i in range(12):
        link.client.send(i % 8, PPID_DDP_SEGMENT, bytes([i]) * 1000)
    consumed = 0
    for _ in range(40):
        link.run(until=link.now + 0.5)
        held = sum(len(p) for p in received_payloads(link.events_b)) - consumed
        assert held <= 4000
        link.server.consume(held)
        consumed += held
    assert sorted(received_payloads(link.events_b)) == [bytes([i]) * 1000 for i in range(12)]
    windows = [s.packet.chunks[0].a_rwnd for s in link.sent("b->a", SackChunk)]
    assert min(windows) <= 1000 and max(windows) == 4000
    # The only chunks the receiver had to drop are zero window probes (6.1 A), one per closed window.
    stats = link.client.statistics
    assert stats.retransmitted_by_timeout + stats.fast_retransmitted <= windows.count(0)


def test_rfc4960_8_3_heartbeat_on_idle_path_and_rtt_from_heartbeat_ack() -> None:
    link = established_link(client_overrides={"heartbeat_interval": 5.0}, server_overrides={"heartbeat_interval": 5.0})
    t0 = link.now
    link.run(until=t0 + 20.0)
    beats = link.sent("a->b", HeartbeatChunk)
    assert beats and 5.0 + 0.5 * 3.0 <= beats[0].time - t0 <= 5.0 + 1.5 * 3.0  # HB.interval + RTO +-50%
    acks = [s for s in link.sent("b->a", HeartbeatAckChunk)]
    assert acks[0].packet.chunks[0].info == beats[0].packet.chunks[0].info  # echoed unchanged
    assert link.client.statistics.srtt == pytest.approx(0.02)
    assert link.sent("b->a", HeartbeatChunk)  # both sides probe their idle path


def test_rfc4960_8_1_8_2_unanswered_heartbeats_fail_the_association_with_abort() -> None:
    link = established_link(client_overrides={"heartbeat_interval": 1.0, "path_max_retrans": 1,
                                              "association_max_retrans": 3})
    link.fate = lambda d, p: [] if d == "b->a" else [0.0]
    link.run(condition=lambda: link.client.is_closed, until=link.now + 120)
    assert of_type(link.events_a, PathStatusChanged) == [PathStatusChanged(reachable=False)]
    [failed] = of_type(link.events_a, AssociationFailed)
    assert "Association.Max.Retrans" in failed.reason
    assert len(link.sent("a->b", HeartbeatChunk)) == 4
    assert isinstance(link.log[-1].packet.chunks[-1], AbortChunk) and link.log[-1].direction == "a->b"
    link.run(condition=lambda: link.server.is_closed)
    assert of_type(link.events_b, AssociationAborted)
    assert link.client.data_to_send(link.now) == [] and link.client.next_timeout() is None


def test_rfc4960_9_2_graceful_shutdown_waits_for_outstanding_data() -> None:
    link = established_link()
    first_tsn = initial_tsn(link)
    lost: list[int] = []

    def fate(direction: str, packet: SctpPacket) -> list[float]:
        if any(isinstance(c, DataChunk) and c.tsn == first_tsn for c in packet.chunks) and not lost:
            lost.append(1)
            return []
        return [0.0]

    link.fate = fate
    for i in range(3):
        link.client.send(0, PPID_DDP_SEGMENT, bytes([i]) * 1400)
    link.client.shutdown(link.now)
    with pytest.raises(InvalidStateError):
        link.client.send(0, PPID_DDP_SEGMENT, b"late")
    link.run(condition=lambda: link.client.is_closed and link.server.is_closed)
    [shutdown] = link.sent("a->b", ShutdownChunk)
    last_data = link.sent("a->b", DataChunk)[-1]
    assert shutdown.time > last_data.time + 2 * link.delay  # only once the retransmission was acknowledged
    # 9.2: SHUTDOWN acknowledges the DATA received; B sent none, so the TSN before B's Initial TSN (6.2).
    assert shutdown.packet.chunks[-1].cumulative_tsn_ack == (initial_tsn(link, "b->a") - 1) & 0xFFFFFFFF
    assert link.sent("b->a", ShutdownAckChunk)
    [complete] = link.sent("a->b", ShutdownCompleteChunk)
    assert complete.packet.verification_tag == link.server.local_tag and not complete.packet.chunks[0].tag_reflected
    assert len(complete.packet.chunks) == 1  # RFC 4960 6.10
    assert sorted(received_payloads(link.events_b)) == [bytes([i]) * 1400 for i in range(3)]
    assert of_type(link.events_b, PeerShutdownStarted)
    assert of_type(link.events_a, AssociationClosed) and of_type(link.events_b, AssociationClosed)
    for association in link.endpoints():
        assert association.data_to_send(link.now + 100) == [] and association.next_timeout() is None


def test_rfc4960_9_2_t2_shutdown_retransmits_shutdown() -> None:
    link = established_link()
    link.fate = lambda d, p: [] if isinstance(p.chunks[0], ShutdownChunk) and len(link.sent("a->b", ShutdownChunk)) < 3 else [0.0]
    t0 = link.now
    link.client.shutdown(t0)
    link.run(condition=lambda: link.client.is_closed)
    assert [s.time - t0 for s in link.sent("a->b", ShutdownChunk)] == pytest.approx([0.0, 3.0, 9.0])


def test_rfc4960_9_1_abort_reports_to_peer_and_nothing_is_sent_after() -> None:
    link = established_link()
    link.client.send(0, PPID_DDP_SEGMENT, b"never acked")
    link.client.abort(link.now, "bye")
    link.run(condition=lambda: link.server.is_closed)
    [abort] = link.sent("a->b", AbortChunk)
    assert abort.packet.verification_tag == link.server.local_tag
    [cause] = abort.packet.chunks[-1].causes
    assert (cause.code, cause.value) == (ErrorCauseCode.USER_INITIATED_ABORT, b"bye")
    assert not link.sent("a->b", DataChunk)
    [aborted] = of_type(link.events_b, AssociationAborted)
    assert aborted.causes == (cause,)
    with pytest.raises(InvalidStateError):
        link.client.send(0, PPID_DDP_SEGMENT, b"x")
    for association in link.endpoints():
        assert association.data_to_send(link.now) == [] and association.next_timeout() is None


# ---------------------------------------------------------------- RFC 5043 9: MULPDU


@pytest.mark.parametrize("mtu, udp", [(1500, False), (1500, True), (9000, False), (576, False), (300, False)])
def test_rfc5043_9_mulpdu_fits_one_packet_and_is_never_below_516(mtu: int, udp: bool) -> None:
    overhead = IPV4_HEADER + (UDP_HEADER if udp else 0)
    config = make_config(1, 2, 0, path_mtu=mtu, lower_layer_overhead=overhead)
    expected = mulpdu(mtu, udp)
    assert config.mulpdu == expected
    if expected > 516:  # a full chunk, a DDP-SSN and a SACK fit the MTU without fragmentation
        assert overhead + 12 + 16 + 2 + expected + 16 <= mtu


def test_rfc5043_9_oversize_or_empty_payload_rejected_never_fragmented() -> None:
    link = established_link()
    limit = link.client.mulpdu + 2
    with pytest.raises(PayloadSizeError):
        link.client.send(0, PPID_DDP_SEGMENT, b"x" * (limit + 1))
    with pytest.raises(PayloadSizeError):
        link.client.send(0, PPID_DDP_SEGMENT, b"")
    link.client.send(0, PPID_DDP_SEGMENT, b"x" * limit)
    link.run(condition=all_acknowledged(link))
    [packet] = [s for s in link.sent("a->b", DataChunk)]
    assert len(packet.packet.encode()) + 20 <= 1500
    assert received_payloads(link.events_b) == [b"x" * limit]


def test_rfc5043_9_fragmented_data_from_peer_aborts_with_protocol_violation() -> None:
    link = established_link()
    fragment = SctpPacket(CLIENT_PORT, SERVER_PORT, link.server.local_tag,
                          (DataChunk(tsn=initial_tsn(link), stream_id=0, ssn=0, ppid=16, user_data=b"half",
                                     unordered=True, ending=False),)).encode()
    events = fed(link.server, fragment, link.now)
    assert of_type(events, AssociationFailed) and link.server.is_closed
    [packet] = link.server.data_to_send(link.now)
    assert SctpPacket.decode(packet).chunks[-1].causes[0].code == ErrorCauseCode.PROTOCOL_VIOLATION


# ---------------------------------------------------------------- randomized property


@pytest.mark.parametrize("seed", range(6))
def test_rfc4960_6_every_payload_delivered_exactly_once_under_loss_duplication_reordering(seed: int) -> None:
    rng = random.Random(seed)

    def fate(direction: str, packet: SctpPacket) -> list[float]:
        roll = rng.random()
        if roll < 0.1:
            return []
        if roll < 0.15:
            return [0.0, rng.uniform(0, 0.05)]
        if roll < 0.3:
            return [rng.uniform(0, 0.05)]
        return [0.0]

    link = Link.create(fate=fate, client_overrides={"rto_initial": 1.0}, server_overrides={"rto_initial": 1.0})
    link.client.connect(0.0)
    link.run(condition=lambda: link.server is not None and link.client.state is AssociationState.ESTABLISHED
             and link.server.state is AssociationState.ESTABLISHED, until=120)
    expected_b, expected_a = [], []
    for i in range(60):
        payload = rng.randbytes(rng.randint(1, link.client.mulpdu + 2))
        link.client.send(rng.randrange(8), PPID_DDP_SEGMENT, payload)
        expected_b.append(payload)
        if i % 2:
            back = rng.randbytes(rng.randint(1, 300))
            link.server.send(rng.randrange(8), PPID_DDP_SEGMENT, back)
            expected_a.append(back)
        if i % 10 == 9:
            link.run(until=link.now + 0.05)
    link.client.shutdown(link.now)
    link.run(condition=lambda: link.client.is_closed and link.server.is_closed, until=link.now + 600)
    assert sorted(received_payloads(link.events_b)) == sorted(expected_b)
    assert sorted(received_payloads(link.events_a)) == sorted(expected_a)
    assert of_type(link.events_a, AssociationClosed) or of_type(link.events_b, AssociationClosed)
    assert sum(e.count for e in of_type(link.events_a, DataAcknowledged)) == len(expected_b)


def test_gap_ranges_merge_clip_and_subtract() -> None:
    """The SACK bookkeeping of RFC 4960 6.2.1 compares Gap Ack Blocks as ranges: merged, clipped to the
    outstanding TSNs, and the difference of two SACKs' blocks (newly acked, reneged)."""
    from model.sctp.data_transfer import merge_ranges, subtract_ranges

    assert merge_ranges(((5, 6), (1, 2), (3, 3), (9, 20)), 1, 12) == [(1, 3), (5, 6), (9, 12)]
    assert merge_ranges(((0, 0), (4, 2)), 1, 10) == []
    assert subtract_ranges([(1, 10)], [(2, 3), (5, 5), (9, 12)]) == [(1, 1), (4, 4), (6, 8)]
    assert subtract_ranges([(1, 2), (6, 7)], []) == [(1, 2), (6, 7)]
    assert subtract_ranges([(3, 4)], [(1, 10)]) == []



def test_the_data_only_path_takes_a_packet_as_the_general_path_does():
    """A packet of whole unordered DATA chunks, its CRC32c checked by the caller, is read in place
    (`_receive_whole_unordered_data`); the association ends in the same state with the same events and
    packets as when it decodes the packet into chunk objects.  Duplicates, a gap, an I bit and an invalid
    stream are among the chunks."""
    import copy

    client, server = _handshaken_pair()
    first = server._tracker.cumulative_tsn + 1
    groups = [
        [DataChunk(first, 0, 0, 16, b"x" * 100, unordered=True)],
        [DataChunk(first + 2, 1, 0, 16, b"y" * 33, unordered=True),
         DataChunk(first + 3, 9, 0, 16, b"z" * 7, unordered=True)],           # stream 9: invalid (6.5)
        [DataChunk(first, 0, 0, 16, b"x" * 100, unordered=True)],             # a duplicate
        [DataChunk(first + 1, 2, 0, 17, b"w" * 5, unordered=True, immediate=True),
         DataChunk(first + 4, 0, 0, 16, b"v", unordered=True)],
    ]
    packets = [SctpPacket(1, 2, server.local_tag, tuple(group)).encode() for group in groups]
    assert all(copy.deepcopy(server)._receive_whole_unordered_data(packet, 10.0) for packet in packets)
    outcomes = []
    for checked in (True, False):   # checked: the data-only path; not: SctpPacket.decode and the table
        association = copy.deepcopy(server)
        events, sent = [], []
        for now, packet in enumerate(packets, start=10):
            association.receive(packet, float(now), checksum_checked=checked)
            events += association.next_events()
            sent += association.data_to_send(float(now))
        outcomes.append((events, sent, association.statistics, association._tracker.cumulative_tsn,
                         association.next_timeout()))
    assert outcomes[0] == outcomes[1]
    assert sum(type(event).__name__ == "DataReceived" for event in outcomes[0][0]) == 4


def _handshaken_pair() -> tuple[Association, Association]:
    """A client association and the one a Listener made for it, ESTABLISHED both (RFC 4960 5.1)."""
    def config(local: int, peer: int, seed: int) -> AssociationConfig:
        return AssociationConfig(local_port=local, peer_port=peer, rng=random.Random(seed),
                                 hmac_secret=b"k" * 32, streams=4)

    client, listener, server = Association(config(1, 2, 1)), Listener(config(2, 0, 2)), None
    client.connect(0.0)
    for now in range(6):
        for packet in client.data_to_send(now):
            if server is None:
                listener.receive(packet, now)
                for reply in listener.data_to_send(now):
                    client.receive(reply, now)
                for accepted in listener.next_events():
                    server = accepted.association
            else:
                server.receive(packet, now)
        if server is not None:
            for packet in server.data_to_send(now):
                client.receive(packet, now)
    assert server is not None and server.state is AssociationState.ESTABLISHED
    assert client.state is AssociationState.ESTABLISHED
    return client, server


def test_the_lone_sack_path_takes_a_sack_as_the_general_path_does():
    """A packet of one SACK, its CRC32c checked by the caller, is read in place (`_receive_lone_sack`); the
    sender ends in the same state, with the same events and packets (retransmissions included), as when it
    decodes the SACK into a SackChunk.  The SACKs carry Gap Ack Blocks and duplicates (packets lost and
    repeated on the way)."""
    import copy

    client, server = _handshaken_pair()
    for index in range(12):
        client.send(index % 2, PPID_DDP_SEGMENT, bytes([index]) * 1000)
    data_packets = client.data_to_send(10.0)
    assert len(data_packets) >= 4
    sacks = []
    for index, packet in enumerate(data_packets[:1] + data_packets[2:] + data_packets[2:3]):   # one lost, one twice
        server.receive(packet, 10.1 + index / 100)
        sacks += server.data_to_send(10.1 + index / 100)
    sacks += server.data_to_send(11.0)
    chunks = [SctpPacket.decode(sack).chunks for sack in sacks]
    assert all(len(found) == 1 and isinstance(found[0], SackChunk) for found in chunks)
    assert any(found[0].gap_blocks for found in chunks) and any(found[0].duplicate_tsns for found in chunks)
    assert all(copy.deepcopy(client)._receive_lone_sack(sack, 12.0) for sack in sacks)
    outcomes = []
    for checked in (True, False):   # checked: the lone-SACK path; not: SctpPacket.decode and the table
        association = copy.deepcopy(client)
        events, sent = [], []
        for index, sack in enumerate(sacks):
            association.receive(sack, 12.0 + index / 100, checksum_checked=checked)
            events += association.next_events()
            sent += association.data_to_send(12.0 + index / 100)
        outcomes.append((events, sent, association.statistics, association._gap_ranges,
                         association.next_timeout()))
    assert outcomes[0] == outcomes[1]
