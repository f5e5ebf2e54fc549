"""Enhanced connection establishment over MPA Request/Reply frames (RFC 5044 7.1, RFC 6581 6, 9, 10).

The same negotiation as `model.ddp.negotiation`, carried in the Private Data of
MPA frames with S=1, so a driver can set up a connection over TCP/MPA with
the rules it uses over SCTP:

* initiator: `build_request(local)`, send it, then `complete(reply, local)`;
  if the result names an RTR (`parameters.rtr`), the first FPDU sent MUST be
  `model.ddp.negotiation.rtr_segment(parameters.rtr)` (RFC 6581 5, 9);
* responder: decode the request (`MpaRequest.decode`) to show the ULP its
  private data, then `respond(request, local, private_data, reject=...)`
  and send the reply; with `parameters.rtr_accepted` non-empty, hold every
  FPDU until the first FPDU received is one of those RTRs (MPA Fencing,
  RFC 6581 3, 9), else send the TERM of `llp_terminate_segment(0x07)`.

Flags: the Reply's C is 1 if the Request's C is 1 or the responder wants
CRCs (the CRC is then used in both directions, RFC 5044 7.1); M is each
side's own choice.  Rev is 2 exactly when S=1 (RFC 6581 6).

Failures: malformed frames raise `model.errors.DecodeError`; a reply with
R=1 raises `ConnectionRejected`; a negotiation the initiator cannot accept
raises `NegotiationError` naming the RFC 6581 8 code for the TERM it MUST
send; an enhanced request to a responder configured without enhanced
support raises `EnhancedRequestUnsupported` (RFC 6581 10: close the TCP
connection).
"""

from __future__ import annotations

from dataclasses import dataclass

from model.ddp.sctp_adaptation import EnhancedData
from model.errors import EncodeError, LlpError, RnicError
from model.mpa.frames import (
    MAX_PRIVATE_DATA,
    REVISION_BASIC,
    REVISION_ENHANCED,
    MpaReply,
    MpaRequest,
)
from model.ddp.negotiation import (
    LocalResources,
    NegotiatedParameters,
    NegotiationFailed,
    check_reply,
    initiator_data,
)
from model.ddp.negotiation import respond as decide


@dataclass(frozen=True)
class Rejected:
    """A refused connection: `error` is the RFC 6581 8 code when the provider
    refused (0x06, 0x07), None when the ULP did or the wire does not say;
    `peer` and `private_data` are the other side's enhanced data and ULP
    private data (RFC 6581 9: the initiator MUST pass the responder's IRD and
    ORD to the ULP for a reject too)."""

    error: LlpError | None
    peer: EnhancedData | None
    private_data: bytes


class ConnectionRejected(RnicError):
    """The responder's Reply had R=1 (RFC 5044 7.1); `rejected` says what it sent."""

    def __init__(self, rejected: Rejected):
        self.rejected = rejected
        super().__init__(f"MPA connection rejected by the responder: {rejected}")


class NegotiationError(RnicError):
    """The initiator cannot use the responder's reply: it MUST send a TERM with
    layer 2, EType 0 and `error.code` (see `model.ddp.negotiation.llp_terminate_segment`)
    and close the connection (RFC 6581 9)."""

    def __init__(self, failed: NegotiationFailed):
        self.error = failed.error
        self.peer = failed.peer
        super().__init__(f"enhanced negotiation failed: {failed.error.name} (peer sent {failed.peer})")


class EnhancedRequestUnsupported(RnicError):
    """An S=1 request to a responder without enhanced support: RFC 6581 10 says close the TCP connection."""


def _private_data(enhanced: EnhancedData | None, ulp_private_data: bytes) -> bytes:
    data = (enhanced.encode() if enhanced is not None else b"") + bytes(ulp_private_data)
    if len(data) > MAX_PRIVATE_DATA:
        raise EncodeError(f"RFC 5044 7.1 / RFC 6581 9: {len(data)} bytes of private data exceed {MAX_PRIVATE_DATA}")
    return data


def build_request(
    local: LocalResources | None, private_data: bytes = b"", *, markers: bool = False, crc: bool = True
) -> bytes:
    """An MPA Request: enhanced (S=1, Rev 2, RFC 6581 6) when `local` is given, else RFC 5044 Rev 1.

    RFC 6581 10: the initiator MUST NOT use the enhanced format when no
    enhanced functionality is desired, so `local=None` sends the plain one.
    """
    enhanced = initiator_data(local) if local is not None else None
    return MpaRequest(
        markers=markers,
        crc=crc,
        enhanced=enhanced is not None,
        revision=REVISION_ENHANCED if enhanced is not None else REVISION_BASIC,
        private_data=_private_data(enhanced, private_data),
    ).encode()


def respond(
    request_bytes: bytes,
    local: LocalResources | None,
    private_data: bytes = b"",
    *,
    reject: bool = False,
    markers: bool = False,
    crc: bool = True,
) -> tuple[bytes, NegotiatedParameters | Rejected | None]:
    """The responder's Reply to `request_bytes` and what it means locally.

    Result: `NegotiatedParameters` for an accepted enhanced request, None for
    an accepted unenhanced one (RFC 6581 10: answered unenhanced, the ULP
    negotiates IRD/ORD itself), `Rejected` when `reject` (the ULP's word) or
    the negotiation refused it (code 0x06 or 0x07; the reply then carries
    R=1 and the responder's enhanced data, RFC 6581 7, 9).
    """
    request = MpaRequest.decode(request_bytes)
    use_crc = crc or request.crc
    peer = request.enhanced_data
    if peer is None:
        reply = MpaReply(markers=markers, crc=use_crc, reject=reject, private_data=_private_data(None, private_data))
        result: NegotiatedParameters | Rejected | None = None
        if reject:
            result = Rejected(None, None, request.ulp_private_data)
        return reply.encode(), result
    if local is None:
        raise EnhancedRequestUnsupported("RFC 6581 10: enhanced MPA Request to a responder without enhanced support")
    reply_data, decision = decide(peer, local)
    if reject:
        result = Rejected(None, peer, request.ulp_private_data)
    elif isinstance(decision, NegotiationFailed):
        result = Rejected(decision.error, peer, request.ulp_private_data)
    else:
        result = decision
    reply = MpaReply(
        markers=markers,
        crc=use_crc,
        enhanced=True,
        revision=REVISION_ENHANCED,
        reject=isinstance(result, Rejected),
        private_data=_private_data(reply_data, private_data),
    )
    return reply.encode(), result


def complete(reply_bytes: bytes, local: LocalResources | None) -> NegotiatedParameters | None:
    """The initiator's reading of the Reply to the request `build_request(local)` sent.

    Returns the negotiated parameters (enhanced), or None for an accepted
    unenhanced exchange.  The responder's ULP private data is
    `MpaReply.decode(reply_bytes).ulp_private_data`.
    """
    reply = MpaReply.decode(reply_bytes)
    if reply.reject:
        raise ConnectionRejected(Rejected(None, reply.enhanced_data, reply.ulp_private_data))
    if local is None:
        if reply.enhanced:
            # RFC 6581 10: an unenhanced request MUST get an unenhanced reply.
            raise NegotiationError(NegotiationFailed(LlpError.NO_MATCHING_RTR, reply.enhanced_data))
        return None
    result = check_reply(local, reply.enhanced_data)
    if isinstance(result, NegotiationFailed):
        raise NegotiationError(result)
    return result
