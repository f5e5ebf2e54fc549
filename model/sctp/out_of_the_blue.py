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
    answers INIT and COOKIE ECHO (rules 3, 4) itself before asking here, so
    an INIT that reaches this function is one nothing listens for: it cannot
    be processed (5.1), and rule 3 answers it with an ABORT whose
    Verification Tag is the INIT's Initiate Tag, T bit 0, so that the
    initiator learns at once that the connection is refused."""
    chunks = packet.chunks
    if any(isinstance(c, AbortChunk) for c in chunks):
        return None  # rule 2
    init = next((c for c in chunks if isinstance(c, InitChunk)), None)
    if init is not None:
        if len(chunks) != 1 or packet.verification_tag != 0:
            return None  # 8.5.1 A: an INIT travels alone with tag 0, else it is discarded
        # Rule 3: no listener, so the INIT cannot be processed (5.1): ABORT, the Initiate Tag, T bit 0.
        return SctpPacket(packet.dst_port, packet.src_port, init.initiate_tag, (AbortChunk(tag_reflected=False),))
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
