"""The passive side of SCTP set-up, RFC 4960 5.1.3 and 5.1.5: a stateless Listener.

A `Listener` on `config.local_port` answers INITs with an INIT ACK whose
State Cookie is sealed with an HMAC, keeps no state for them, and creates an
`Association` when a valid, fresh COOKIE ECHO comes back (the `Accepted`
event).  Anything else that reaches it is out of the blue (8.4).  It follows
`model`'s convention (`receive(data, now)`, `data_to_send(now)`,
`next_events()`); it has no timers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from model.errors import DecodeError
from model.sctp.association import Association
from model.sctp.config import AssociationConfig
from model.sctp.cookie import CookieSigner
from model.sctp.handshake import build_init_ack, invalid_init, random_tag, stale_cookie_error
from model.sctp.out_of_the_blue import out_of_the_blue_reply
from model.sctp.packet import (
    AbortChunk,
    Chunk,
    CookieEchoChunk,
    ErrorCause,
    ErrorCauseCode,
    ErrorChunk,
    InitChunk,
    SctpPacket,
)


@dataclass(frozen=True)
class Accepted:
    """Listener event: a new association created from a valid COOKIE ECHO (RFC 4960 5.1.5).

    The association has processed that packet; its own events (COMMUNICATION UP...) wait in its
    `next_events()`."""

    association: Association


class Listener:
    """Passive side on `config.local_port`: answers INIT statelessly and turns valid cookies into associations.

    Packets of an existing association go to that association (the caller
    demultiplexes by port pair and verification tag); everything else comes
    here.  Out-of-the-blue packets are treated per RFC 4960 8.4.
    """

    def __init__(self, config: AssociationConfig):
        if not config.hmac_secret:
            raise ValueError("a Listener needs config.hmac_secret for its State Cookies (RFC 4960 5.1.3)")
        self.config = config
        self._signer = CookieSigner(config.hmac_secret)
        self._outgoing: list[bytes] = []
        self._events: list[Accepted] = []

    def next_events(self) -> list[Accepted]:
        """The associations accepted since the last call."""
        events, self._events = self._events, []
        return events

    def receive(self, data: bytes, now: float) -> None:
        """One SCTP packet for the listening port: an INIT is answered, a valid COOKIE ECHO accepted."""
        self._accept(data, now)

    def _accept(self, data: bytes, now: float) -> None:
        try:
            packet = SctpPacket.decode(data)
        except DecodeError:
            return None
        if packet.dst_port != self.config.local_port:
            return None
        config = replace(self.config, peer_port=packet.src_port)
        first = packet.chunks[0]
        if isinstance(first, InitChunk):
            if len(packet.chunks) != 1 or packet.verification_tag != 0:
                return None  # 8.5.1 A
            if invalid_init(first):
                self._reply(config, 0, AbortChunk(tag_reflected=True, causes=(
                    ErrorCause(ErrorCauseCode.INVALID_MANDATORY_PARAMETER),)))
                return None
            ack = build_init_ack(config, self._signer, first, now, random_tag(config), config.rng.getrandbits(32))
            self._reply(config, first.initiate_tag, ack)
            return None
        if isinstance(first, CookieEchoChunk):
            cookie = self._signer.open(first.cookie)
            if cookie is None or cookie.local_tag != packet.verification_tag:
                return None  # 5.1.5: bad MAC or wrong tag, silently discarded
            if cookie.staleness(now) > 0:
                self._reply(config, cookie.peer_tag, ErrorChunk(causes=(stale_cookie_error(cookie.staleness(now)),)))
                return None
            association = Association(config, passive_open=True)
            association.receive(data, now)
            self._events.append(Accepted(association))
            return None
        reply = out_of_the_blue_reply(packet)  # 8.4
        if reply is not None:
            self._outgoing.append(reply.encode())
        return None

    def _reply(self, config: AssociationConfig, tag: int, chunk: Chunk) -> None:
        self._outgoing.append(SctpPacket(config.local_port, config.peer_port, tag, (chunk,)).encode())

    def data_to_send(self, now: float) -> list[bytes]:
        """SCTP packets to send: INIT ACKs and the answers of RFC 4960 8.4 (the Listener has no timers)."""
        packets, self._outgoing = self._outgoing, []
        return packets
