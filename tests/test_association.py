"""Tests for model.association: the sans-I/O SCTP association (RFC 4960 / RFC 9260) under RFC 5043.

Two endpoints, a client `Association` and a server `Listener`, are joined by
`Link`, a tiny in-memory link: time only moves inside `Link.run()`, jumping to
the next packet arrival or timer; `fate(direction, packet)` decides each
packet's lot as a list of extra delays, one per copy delivered ([] drops it,
[0, 0] duplicates it, [0.5] delays it past its successors).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

import pytest

from model.association import (
    Association,
    AssociationState,
    InvalidStateError,
    InvalidStreamError,
    Listener,
    PayloadSizeError,
)
from model.sctp import (
    PPID_DDP_SEGMENT,
    AbortChunk,
    AdaptationLayerIndication,
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
from model.sctp_config import AssociationConfig
from model.sctp_events import (
    AssociationAborted,
    AssociationClosed,
    AssociationEstablished,
    AssociationEvent,
    AssociationFailed,
    DataAcknowledged,
    DataReceived,
    DdpProceduresForbidden,
    PathStatusChanged,
    PeerShutdownStarted,
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
        outputs = [("a->b", self.client.packets_to_send(self.now)), ("b->a", self.listener.packets_to_send())]
        if self.server is not None:
            outputs.append(("b->a", self.server.packets_to_send(self.now)))
        for direction, packets in outputs:
            for data in packets:
                self.transmit(direction, data)

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
            self.events_a += self.client.receive(self.now, data)
            return
        if self.server is not None and not self.server.is_closed:
            header_tag = int.from_bytes(data[4:8], "big")
            if header_tag in (self.server.local_tag, 0) or data[12] == 10:
                self.events_b += self.server.receive(self.now, data)
                return
        accepted = self.listener.receive(self.now, data)
        if accepted is not None:
            self.server = accepted.association
            self.events_b += accepted.events

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
            due = sorted(w for w in self._wire if w[0] <= self.now)
            self._wire = [w for w in self._wire if w[0] > self.now]
            for _, _, direction, data in due:
                self.deliver(direction, data)
            for association, events in ((self.client, self.events_a), (self.server, self.events_b)):
                if association is not None:
                    timeout = association.next_timeout()
                    if timeout is not None and timeout <= self.now:
                        events += association.handle_timeout(self.now)
            self.flush()
        raise AssertionError("link did not settle")

    def sent(self, direction: str, chunk_type: type) -> list[Sent]:
        return [s for s in self.log if s.direction == direction and any(isinstance(c, chunk_type) for c in s.packet.chunks)]


# ---------------------------------------------------------------- helpers


def of_type(events: list[AssociationEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def established_link(**kwargs: object) -> Link:
    link = Link.create(**kwargs)  # type: ignore[arg-type]
    link.client.connect(link.now)
    link.run(condition=lambda: link.server is not None and link.server.state is AssociationState.ESTABLISHED
             and link.client.state is AssociationState.ESTABLISHED)
    return link


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
                       (DataChunk(tsn=link.client._next_tsn, stream_id=0, ssn=0, ppid=16, user_data=b"evil",
                                  unordered=True),)).encode()
    assert link.server.receive(link.now, wrong) == []
    assert link.server.packets_to_send(link.now) == []
    assert link.server.next_timeout() is not None  # only the heartbeat timer; no delayed ACK
    assert link.server.statistics.data_chunks_received == 0
    # An ABORT with T=0 and the wrong tag is ignored too (8.5.1 B).
    abort = SctpPacket(CLIENT_PORT, SERVER_PORT, link.client.local_tag, (AbortChunk(),)).encode()
    assert link.server.receive(link.now, abort) == [] and link.server.state is AssociationState.ESTABLISHED
    # With T=1 the sender's own tag (= the receiver's peer tag) is the right one.
    abort_t = SctpPacket(CLIENT_PORT, SERVER_PORT, link.client.local_tag, (AbortChunk(tag_reflected=True),)).encode()
    assert of_type(link.server.receive(link.now, abort_t), AssociationAborted)


def test_rfc4960_5_2_1_simultaneous_inits_converge_on_one_association() -> None:
    a = Association(make_config(CLIENT_PORT, SERVER_PORT, 11))
    b = Association(make_config(SERVER_PORT, CLIENT_PORT, 12))
    a.connect(0.0)
    b.connect(0.0)
    events: dict[str, list[AssociationEvent]] = {"a": [], "b": []}
    now = 0.0
    for _ in range(10):
        now += 0.01
        to_b, to_a = a.packets_to_send(now), b.packets_to_send(now)
        for data in to_b:
            events["b"] += b.receive(now, data)
        for data in to_a:
            events["a"] += a.receive(now, data)
    assert a.state is b.state is AssociationState.ESTABLISHED
    assert (a.local_tag, a.peer_tag) == (b.peer_tag, b.local_tag)
    assert len(of_type(events["a"], AssociationEstablished)) == len(of_type(events["b"], AssociationEstablished)) == 1
    a.send(1, PPID_DDP_SEGMENT, b"hello")
    for data in a.packets_to_send(now):
        events["b"] += b.receive(now, data)
    assert received_payloads(events["b"]) == [b"hello"]


def test_rfc4960_5_2_4_case_d_duplicate_cookie_echo_gets_cookie_ack_again() -> None:
    def fate(direction: str, packet: SctpPacket) -> list[float]:
        return [] if isinstance(packet.chunks[0], CookieAckChunk) and len(link.sent("b->a", CookieAckChunk)) == 1 else [0.0]

    link = Link.create(fate=fate)
    link.client.connect(0.0)
    link.run(condition=lambda: link.client.state is AssociationState.ESTABLISHED)
    assert len(link.sent("b->a", CookieAckChunk)) == 2
    assert len(of_type(link.events_b, AssociationEstablished)) == 1
