"""State Cookie of the SCTP four-way handshake, RFC 4960 5.1.3 and 5.1.5.

The passive side keeps no state between INIT and COOKIE ECHO: everything it
needs to create the association travels in the State Cookie of its INIT ACK,
with a creation timestamp and lifetime (5.1.3) and a MAC keyed by a secret
only it knows (HMAC-SHA256 from the standard library, RFC 2104).  On COOKIE
ECHO, `CookieSigner.open` recomputes the MAC (5.1.5 steps 1-2); a mismatch or
a malformed cookie yields None, which the caller discards silently.  The
lifetime check (step 3) is the caller's, with `CookieState.staleness`.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

_BODY = struct.Struct("!ddHHIIIIIHHHH?IIII")
_MAC_LENGTH = hashlib.sha256().digest_size
COOKIE_LENGTH = _BODY.size + _MAC_LENGTH


@dataclass(frozen=True)
class CookieState:
    """What the passive side needs to build the association from a COOKIE ECHO (RFC 4960 5.1.3)."""

    created: float
    lifetime: float
    local_port: int
    peer_port: int
    local_tag: int
    peer_tag: int
    local_initial_tsn: int
    peer_initial_tsn: int
    peer_a_rwnd: int
    peer_outbound_streams: int
    peer_inbound_streams: int
    local_outbound_streams: int
    local_inbound_streams: int
    peer_adaptation_code_point: int | None
    local_tie_tag: int = 0
    peer_tie_tag: int = 0

    def staleness(self, now: float) -> float:
        """Seconds past the end of the cookie's lifetime; > 0 means stale (5.1.5 step 3)."""
        return now - (self.created + self.lifetime)

    def _pack(self) -> bytes:
        has_adaptation = self.peer_adaptation_code_point is not None
        return _BODY.pack(
            self.created, self.lifetime, self.local_port, self.peer_port,
            self.local_tag, self.peer_tag, self.local_initial_tsn, self.peer_initial_tsn,
            self.peer_a_rwnd, self.peer_outbound_streams, self.peer_inbound_streams,
            self.local_outbound_streams, self.local_inbound_streams,
            has_adaptation, self.peer_adaptation_code_point or 0,
            self.local_tie_tag, self.peer_tie_tag, 0,
        )

    @classmethod
    def _unpack(cls, body: bytes) -> CookieState:
        (created, lifetime, local_port, peer_port, local_tag, peer_tag, local_tsn, peer_tsn,
         peer_a_rwnd, peer_os, peer_mis, local_os, local_mis, has_adaptation, code_point,
         local_tie, peer_tie, _reserved) = _BODY.unpack(body)
        return cls(
            created=created, lifetime=lifetime, local_port=local_port, peer_port=peer_port,
            local_tag=local_tag, peer_tag=peer_tag, local_initial_tsn=local_tsn,
            peer_initial_tsn=peer_tsn, peer_a_rwnd=peer_a_rwnd,
            peer_outbound_streams=peer_os, peer_inbound_streams=peer_mis,
            local_outbound_streams=local_os, local_inbound_streams=local_mis,
            peer_adaptation_code_point=code_point if has_adaptation else None,
            local_tie_tag=local_tie, peer_tie_tag=peer_tie,
        )


class CookieSigner:
    """Seals each `CookieState` into a MAC-protected State Cookie and opens them again."""

    def __init__(self, secret: bytes):
        if len(secret) < 16:
            raise ValueError("the cookie secret needs at least 16 bytes (RFC 4960 5.1.3)")
        self._secret = bytes(secret)

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._secret, body, hashlib.sha256).digest()

    def seal(self, state: CookieState) -> bytes:
        body = state._pack()
        return body + self._mac(body)

    def open(self, cookie: bytes) -> CookieState | None:
        """The state in `cookie`, or None if its length or MAC is wrong (5.1.5 steps 1-2)."""
        if len(cookie) != COOKIE_LENGTH:
            return None
        body, mac = cookie[: _BODY.size], cookie[_BODY.size :]
        if not hmac.compare_digest(mac, self._mac(body)):
            return None
        return CookieState._unpack(body)
