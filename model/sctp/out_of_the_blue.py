"""Out-of-the-blue SCTP packets, RFC 4960 8.4: what an endpoint without an association for them answers.

One function for every endpoint that meets them: the stateless `model.sctp.listener.Listener` and the
software RNIC (`model.rnic.host`) when it neither has an association nor listens.
"""

from __future__ import annotations

from model.sctp.packet import (
    AbortChunk,
    CookieAckChunk,
    CookieEchoChunk,
    ErrorCauseCode,
    ErrorChunk,
    InitChunk,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownCompleteChunk,
)


def out_of_the_blue_reply(packet: SctpPacket) -> SctpPacket | None:
    """RFC 4960 8.4, rules 2-8, for an endpoint with no association for `packet`.

    Returns the packet to send back to the sender (ports swapped), or None to
    discard silently.  Rule 1 (non-unicast source) is the caller's: it sees
    the IP addresses.  The rules are applied in the RFC's order; a Listener
    answers INIT and COOKIE ECHO (rules 3, 4) itself before asking here."""
    chunks = packet.chunks
    if any(isinstance(c, AbortChunk) for c in chunks):
        return None  # rule 2
    if any(isinstance(c, InitChunk) for c in chunks):
        return None  # rule 3: only a listener processes an INIT (5.1)
    if isinstance(chunks[0], CookieEchoChunk):
        return None  # rule 4: no listener, so no State Cookie of ours (5.1.5)
    if any(isinstance(c, ShutdownAckChunk) for c in chunks):
        # Rule 5: SHUTDOWN COMPLETE, the SHUTDOWN ACK's own tag, T bit set.
        return _reply(packet, ShutdownCompleteChunk(tag_reflected=True))
    if any(isinstance(c, ShutdownCompleteChunk) for c in chunks):
        return None  # rule 6
    if any(isinstance(c, CookieAckChunk) for c in chunks) or any(
        isinstance(c, ErrorChunk) and any(cause.code == ErrorCauseCode.STALE_COOKIE for cause in c.causes)
        for c in chunks
    ):
        return None  # rule 7
    return _reply(packet, AbortChunk(tag_reflected=True))  # rule 8: the packet's own tag, T bit set


def _reply(packet: SctpPacket, chunk: AbortChunk | ShutdownCompleteChunk) -> SctpPacket:
    return SctpPacket(packet.dst_port, packet.src_port, packet.verification_tag, (chunk,))
