"""Enhanced RDMA connection establishment: IRD/ORD and RTR negotiation (RFC 6581 9, 10).

Pure functions over `model.ddp.sctp_adaptation.EnhancedData`, shared by the DDP/SCTP
session layer (`model.ddp.session`) and the MPA Request/Reply exchange
(`model.mpa.negotiation`):

* `initiator_data(local)`: the initiator's enhanced data (RFC 6581 9);
* `respond(request, local)`: the responder's reply data and decision;
* `check_reply(local, reply)`: the initiator's check of that reply;
* `rtr_segment`, `rtr_type_of`, `llp_terminate_segment`: the zero-length
  RDMAP messages that carry the RTR indication, and the RDMAP Terminate
  carrying an RFC 6581 8 LLP error code.

Decisions recorded here (the RFC leaves them open):

* Responder IRD = min(local IRD, max(initiator ORD, 1 if a Read RTR is
  offered)): just enough for the initiator's ORD (RFC 6581 9 "greater than
  or equal to the initiator ORD"; the example of raising it to 1 for a Read
  RTR).  When the local IRD cannot reach the initiator ORD the responder
  offers what it has and the initiator lowers its ORD ("its ORD at most to
  the responder IRD"); only a ULP-required ORD (`required_ord`) that cannot
  be met is "insufficient IRD resources" (code 0x06).
* Responder ORD = min(local ORD, initiator IRD); an initiator IRD below the
  responder's `required_ord` is rejected with code 0x06 and the reply's ORD
  says the ORD required (RFC 6581 9).
* Initiator: IRD stays at the advertised local IRD (at least the responder
  ORD, else 0x06); ORD = min(local ORD, responder IRD), a responder IRD below
  `required_ord` is 0x06.
* 0x3FFF (no automatic negotiation, RFC 6581 9): an initiator with
  `automatic_ird`/`automatic_ord` False sends 0x3FFF; the responder then keeps
  its local ORD/IRD and answers 0x3FFF in the matching field; an initiator
  receiving 0x3FFF keeps its local value.
* RTR: the responder offers every initiator-requested type it supports (a
  Read RTR only with a local IRD of at least 1).  None in common: the
  provider refuses with an enhanced reject listing its own types (RFC 6581
  7 "MAY generate a reject reply message indicating which RTR indication
  types it supports") and code 0x07.  The initiator takes the first of its
  own `rtr_types` (its preference order) that the reply offers; none, or a
  reply whose A differs from the request, is code 0x07.
* RFC 6581 10 interoperability: an unenhanced request always gets an
  unenhanced reply (the callers do this: `respond` is only for enhanced
  requests).  An enhanced initiator that receives an unenhanced reply treats
  it as a failed negotiation, code 0x07 (no mutually compatible connection
  model): RFC 6581 10 requires an enhanced responder to answer enhanced, and
  an unenhanced one closes the connection instead of replying.  The ULP MAY
  then retry unenhanced and negotiate IRD/ORD itself (RFC 6581 10).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.sctp_adaptation import IRD_ORD_NO_NEGOTIATION, EnhancedData
from model.errors import DecodeError, LlpError, RnicError
from model.rdmap.messages import (
    RDMAP_VERSION,
    Opcode,
    QueueNumber,
    ReadRequest,
    Terminate,
    rdmap_control_of,
    tagged_rsvd_ulp,
    untagged_rsvd_ulp,
)

MAX_QUEUE_DEPTH = IRD_ORD_NO_NEGOTIATION - 1
"""The largest IRD/ORD a side can have: 14 bits, all ones being reserved (RFC 6581 9)."""


class NegotiationConfigError(RnicError, ValueError):
    """Local resources that cannot be advertised (out of range, inconsistent)."""


class RtrType(Enum):
    """The RTR indication options of RFC 6581 9: flags B, C and D."""

    SEND = "zero-length Send"  # B
    WRITE = "zero-length RDMA Write"  # C
    READ = "zero-length RDMA Read"  # D


class Role(Enum):
    INITIATOR = "initiator"
    RESPONDER = "responder"


@dataclass(frozen=True)
class LocalResources:
    """One side's RDMA Read resources and RTR abilities (RFC 6581 9).

    `ird`: inbound RDMA Read Requests this side can hold for the connection.
    `ord`: outbound RDMA Reads this side wants outstanding.
    `required_ord`: the ORD the ULP cannot do without; a peer IRD below it is
    "insufficient IRD resources" (code 0x06).
    `peer_to_peer`: initiator only, request the peer-to-peer model (A=1, an
    RTR follows the reply); a responder mirrors the request's A (RFC 6581 9).
    `rtr_types`: initiator, the RTR messages it can send, in preference
    order; responder, the RTR messages it can accept.
    `automatic_ird` / `automatic_ord`: False makes the initiator send 0x3FFF
    ("no automatic negotiation") in that field.
    """

    ird: int
    ord: int
    peer_to_peer: bool = False
    rtr_types: tuple[RtrType, ...] = (RtrType.SEND, RtrType.WRITE, RtrType.READ)
    required_ord: int = 0
    automatic_ird: bool = True
    automatic_ord: bool = True

    def __post_init__(self) -> None:
        for name in ("ird", "ord", "required_ord"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= MAX_QUEUE_DEPTH:
                raise NegotiationConfigError(f"{name}={value!r} is not in 0..{MAX_QUEUE_DEPTH}")
        if self.required_ord > self.ord:
            raise NegotiationConfigError(f"required_ord {self.required_ord} exceeds ord {self.ord}")
        types = tuple(self.rtr_types)
        if any(not isinstance(t, RtrType) for t in types) or len(set(types)) != len(types):
            raise NegotiationConfigError(f"rtr_types {types!r} must be distinct RtrType values")
        object.__setattr__(self, "rtr_types", types)


@dataclass(frozen=True)
class NegotiatedParameters:
    """The outcome of a successful enhanced negotiation, for one side.

    `ird`, `ord`: the values to configure on the local endpoint.
    `rtr`: initiator, the RTR message it MUST send first (None: no RTR);
    responder, None (the initiator picks among `rtr_accepted`).
    `rtr_accepted`: the RTR messages the responder accepts as the first
    message (the initiator: {rtr} or empty).
    `rtr_sender`: who sends the RTR (always the initiator, RFC 6581 9), None
    in the client-server model.
    `peer`: the peer's enhanced data as received; `local`: what this side
    sent.  RFC 6581 9: both sides MUST pass the peer's IRD and ORD to the ULP.
    """

    role: Role
    ird: int
    ord: int
    peer_to_peer: bool
    rtr: RtrType | None
    rtr_accepted: frozenset[RtrType]
    peer: EnhancedData
    local: EnhancedData

    @property
    def rtr_sender(self) -> Role | None:
        return Role.INITIATOR if self.peer_to_peer else None


@dataclass(frozen=True)
class NegotiationFailed:
    """An enhanced negotiation that cannot succeed: `error` is the RFC 6581 8
    LLP code to carry in the TERM (0x06 insufficient IRD, 0x07 no matching
    RTR option); `peer` is the peer's enhanced data (None if it sent none)."""

    error: LlpError
    peer: EnhancedData | None


def _flags(types: frozenset[RtrType] | tuple[RtrType, ...]) -> dict[str, bool]:
    return {
        "send_rtr": RtrType.SEND in types,
        "write_rtr": RtrType.WRITE in types,
        "read_rtr": RtrType.READ in types,
    }


def offered_rtr_types(data: EnhancedData) -> frozenset[RtrType]:
    """The RTR options flagged B, C, D in `data` (none when A=0, RFC 6581 9)."""
    if not data.peer_to_peer:
        return frozenset()
    flags = ((RtrType.SEND, data.send_rtr), (RtrType.WRITE, data.write_rtr), (RtrType.READ, data.read_rtr))
    return frozenset(t for t, flagged in flags if flagged)


def initiator_data(local: LocalResources) -> EnhancedData:
    """The initiator's enhanced data (RFC 6581 9): A, its RTR options, IRD and ORD."""
    types = local.rtr_types if local.peer_to_peer else ()
    return EnhancedData(
        peer_to_peer=local.peer_to_peer,
        ird=local.ird if local.automatic_ird else IRD_ORD_NO_NEGOTIATION,
        ord=local.ord if local.automatic_ord else IRD_ORD_NO_NEGOTIATION,
        **_flags(types),
    )


def respond(request: EnhancedData, local: LocalResources) -> tuple[EnhancedData, NegotiatedParameters | NegotiationFailed]:
    """The responder's reply data and decision for an enhanced request (RFC 6581 9).

    On `NegotiationFailed` the reply data belongs in an enhanced reject
    (Enhanced Reject, or an MPA Reply with R=1 and S=1).
    """
    peer_to_peer = request.peer_to_peer
    offered: frozenset[RtrType] = frozenset()
    if peer_to_peer:
        acceptable = [t for t in local.rtr_types if t is not RtrType.READ or local.ird >= 1]
        offered = frozenset(acceptable) & offered_rtr_types(request)
        if not offered:
            # RFC 6581 7/9: refuse, listing the RTR options (and the IRD/ORD) this side supports.
            reply = EnhancedData(True, ird=local.ird, ord=local.ord, **_flags(tuple(acceptable)))
            return reply, NegotiationFailed(LlpError.NO_MATCHING_RTR, request)
    # RFC 6581 9: responder IRD >= initiator ORD; initiator ORD 0x3FFF -> keep local IRD, answer 0x3FFF.
    if request.ord == IRD_ORD_NO_NEGOTIATION:
        ird, ird_field = local.ird, IRD_ORD_NO_NEGOTIATION
    else:
        ird = min(local.ird, max(request.ord, 1 if RtrType.READ in offered else 0))
        ird_field = ird
    # RFC 6581 9: responder ORD <= initiator IRD; initiator IRD 0x3FFF -> keep local ORD, answer 0x3FFF.
    if request.ird == IRD_ORD_NO_NEGOTIATION:
        ord_, ord_field = local.ord, IRD_ORD_NO_NEGOTIATION
    else:
        if request.ird < local.required_ord:
            reply = EnhancedData(peer_to_peer, ird=ird_field, ord=local.required_ord, **_flags(offered))
            return reply, NegotiationFailed(LlpError.INSUFFICIENT_IRD, request)
        ord_ = min(local.ord, request.ird)
        ord_field = ord_
    reply = EnhancedData(peer_to_peer, ird=ird_field, ord=ord_field, **_flags(offered))
    parameters = NegotiatedParameters(
        role=Role.RESPONDER,
        ird=ird,
        ord=ord_,
        peer_to_peer=peer_to_peer,
        rtr=None,
        rtr_accepted=offered,
        peer=request,
        local=reply,
    )
    return reply, parameters


def check_reply(local: LocalResources, reply: EnhancedData | None) -> NegotiatedParameters | NegotiationFailed:
    """The initiator's reading of the responder's accepting reply (RFC 6581 9, 10).

    `reply` None is an unenhanced reply to the enhanced request (see the
    module docstring: a failure with code 0x07).
    """
    sent = initiator_data(local)
    if reply is None or reply.peer_to_peer != sent.peer_to_peer:
        return NegotiationFailed(LlpError.NO_MATCHING_RTR, reply)
    # RFC 6581 9: initiator IRD at least the responder ORD (0x3FFF: unchanged).
    if reply.ord != IRD_ORD_NO_NEGOTIATION and reply.ord > local.ird:
        return NegotiationFailed(LlpError.INSUFFICIENT_IRD, reply)
    # RFC 6581 9: initiator ORD at most the responder IRD (0x3FFF: unchanged).
    if reply.ird == IRD_ORD_NO_NEGOTIATION:
        ord_ = local.ord
    else:
        if reply.ird < local.required_ord:
            return NegotiationFailed(LlpError.INSUFFICIENT_IRD, reply)
        ord_ = min(local.ord, reply.ird)
    rtr: RtrType | None = None
    if sent.peer_to_peer:
        offered = offered_rtr_types(reply)
        rtr = next((t for t in local.rtr_types if t in offered), None)
        if rtr is None:
            return NegotiationFailed(LlpError.NO_MATCHING_RTR, reply)
    return NegotiatedParameters(
        role=Role.INITIATOR,
        ird=local.ird,
        ord=ord_,
        peer_to_peer=sent.peer_to_peer,
        rtr=rtr,
        rtr_accepted=frozenset({rtr}) if rtr else frozenset(),
        peer=reply,
        local=sent,
    )


# -- the RTR messages and the LLP Terminate, as DDP segments (RFC 6581 1, 8) --

_FIRST_MSN = 1
"""RFC 5041 5.1: the MSN of the first message on a queue is 1."""


def rtr_segment(rtr: RtrType) -> bytes:
    """The DDP segment of an RTR indication (RFC 6581 1): a zero-length Send
    (QN 0), a zero-length RDMA Write (STag 0, TO 0), or a zero-length RDMA
    Read Request (QN 1, all Read Request fields 0), each a whole message
    (L=1) and the first on its queue (MSN 1)."""
    if rtr is RtrType.WRITE:
        header: TaggedHeader | UntaggedHeader = TaggedHeader(
            last=True, rsvd_ulp=tagged_rsvd_ulp(Opcode.RDMA_WRITE), stag=0, to=0
        )
        return DdpSegment(header).encode()
    opcode = Opcode.SEND if rtr is RtrType.SEND else Opcode.RDMA_READ_REQUEST
    header = UntaggedHeader(
        last=True, rsvd_ulp=untagged_rsvd_ulp(opcode), qn=opcode.queue_number, msn=_FIRST_MSN, mo=0
    )
    payload = ReadRequest(0, 0, 0, 0, 0).encode() if rtr is RtrType.READ else b""
    return DdpSegment(header, payload).encode()


def rtr_type_of(segment: bytes) -> RtrType | None:
    """Which RTR indication `segment` is, or None if it is none of them.

    A zero-length Send on QN 0, a zero-length tagged RDMA Write, or an RDMA
    Read Request on QN 1 for 0 bytes; whole (L=1), DDP and RDMAP version 1,
    at offset 0.  STag, TO and MSN are the sender's choice and not checked.
    """
    try:
        decoded = DdpSegment.decode(segment)
    except DecodeError:
        return None
    header = decoded.header
    control = rdmap_control_of(header)
    if not header.last or not header.version_ok or control.rv != RDMAP_VERSION:
        return None
    opcode = control.known_opcode
    if header.tagged:
        return RtrType.WRITE if opcode is Opcode.RDMA_WRITE and not decoded.payload else None
    if header.mo != 0:
        return None
    if opcode is Opcode.SEND and header.qn == QueueNumber.SEND and not decoded.payload:
        return RtrType.SEND
    if opcode is Opcode.RDMA_READ_REQUEST and header.qn == QueueNumber.READ_REQUEST:
        try:
            request = ReadRequest.decode(decoded.payload)
        except DecodeError:
            return None
        return RtrType.READ if request.size == 0 else None
    return None


def is_rdmap_terminate(segment: bytes) -> bool:
    """True if `segment` is an RDMAP Terminate message (untagged, QN 2, opcode 7, RFC 5040 4.8)."""
    try:
        header = DdpSegment.decode(segment).header
    except DecodeError:
        return False
    return (
        not header.tagged
        and header.qn == QueueNumber.TERMINATE
        and rdmap_control_of(header).known_opcode is Opcode.TERMINATE
    )


def llp_terminate_segment(error: LlpError) -> bytes:
    """The RDMAP Terminate (QN 2, MSN 1, L=1) carrying an RFC 6581 8 LLP error
    (layer 2, EType 0, code 0x05/0x06/0x07) for a negotiation that failed
    before any other RDMAP message was sent."""
    number = error.number
    header = UntaggedHeader(
        last=True,
        rsvd_ulp=untagged_rsvd_ulp(Opcode.TERMINATE),
        qn=QueueNumber.TERMINATE,
        msn=_FIRST_MSN,
        mo=0,
    )
    body = Terminate(layer=int(number.layer), etype=number.etype, code=number.code).encode()
    return DdpSegment(header, body).encode()
