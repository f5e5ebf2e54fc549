"""Association set-up, RFC 4960 5: INIT, INIT ACK, COOKIE ECHO, COOKIE ACK, their timers and collisions.

`HandshakeMixin` holds the handlers the association's transition table
(`model.sctp.association`) names for the four-way handshake: the active
open with T1-init and T1-cookie back-off (5.1, 5.3), INIT collisions and
duplicates (5.2.1, 5.2.2), COOKIE ECHO cases A, B and D (5.2.4), the Stale
Cookie retry (5.2.6), and COMMUNICATION UP with the RFC 5043 11.1 verdict on
the adaptation layer.  `build_init_ack` is shared with the stateless
`model.sctp.listener.Listener`.

Unrecognized parameters of an INIT or INIT ACK (RFC 4960 3.2.1, 3.2.2) are
sorted by `scan_parameters`: those whose type asks for a report go back in
the INIT ACK as Unrecognized Parameter parameters (an INIT's) or in an ERROR
chunk bundled after the COOKIE ECHO (an INIT ACK's), and a type whose upper
bits are 00 or 01 ends the processing of the parameters after it.

The handlers work on the `Association`'s attributes (it is the only class
that mixes this in); a handler returns False when the RFC has it discard the
chunk.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from model.sctp.config import AssociationConfig
from model.sctp.congestion import CongestionControl
from model.sctp.cookie import CookieSigner, CookieState
from model.sctp.events import (AssociationEstablished, DdpProceduresForbidden, ErrorReported, PeerRestarted,
                               RetransmissionLimit)
from model.sctp.packet import (
    ADAPTATION_CODE_POINT_DDP,
    AbortChunk,
    AdaptationLayerIndication,
    CookieAckChunk,
    CookieEchoChunk,
    ErrorCause,
    ErrorCauseCode,
    ErrorChunk,
    InitAckChunk,
    InitChunk,
    Parameter,
    ParameterBase,
    ParameterType,
    SctpPacket,
    ShutdownAckChunk,
    StateCookieParameter,
    UnrecognizedParameter,
    unrecognized_parameters_cause,
)
from model.sctp.state import AssociationState, InvalidStateError, Trigger
from model.sctp.tsn_tracker import TsnTracker


def random_tag(config: AssociationConfig) -> int:
    """A non-zero Initiate Tag (RFC 4960 5.3.1): uniform over all of them, or over those whose low bits hold
    the row `config.tag_row` names."""
    if config.tag_row is None:
        return config.rng.randrange(1, 1 << 32)
    bits, row = config.tag_row
    return config.rng.randrange(0 if row else 1, 1 << (32 - bits)) << bits | row


def adaptation_parameters(config: AssociationConfig) -> tuple[ParameterBase, ...]:
    """The Adaptation Layer Indication announced in INIT and INIT ACK (RFC 5043 5.1), if any."""
    if config.adaptation_code_point is None:
        return ()
    return (AdaptationLayerIndication(code_point=config.adaptation_code_point),)


INIT_PARAMETERS = frozenset({
    ParameterType.IPV4_ADDRESS, ParameterType.IPV6_ADDRESS, ParameterType.COOKIE_PRESERVATIVE,
    ParameterType.HOST_NAME_ADDRESS, ParameterType.SUPPORTED_ADDRESS_TYPES,
    ParameterType.ADAPTATION_LAYER_INDICATION,
})
"""The INIT parameters this endpoint recognizes (RFC 4960 3.3.2, RFC 5061 4.2.5)."""
INIT_ACK_PARAMETERS = frozenset({
    ParameterType.STATE_COOKIE, ParameterType.IPV4_ADDRESS, ParameterType.IPV6_ADDRESS,
    ParameterType.UNRECOGNIZED_PARAMETER, ParameterType.HOST_NAME_ADDRESS,
    ParameterType.ADAPTATION_LAYER_INDICATION,
})
"""The INIT ACK parameters this endpoint recognizes (RFC 4960 3.3.3, RFC 5061 4.2.5)."""


@dataclass(frozen=True)
class ParameterScan:
    """An INIT's or INIT ACK's parameters sorted by RFC 4960 3.2.1."""

    processed: tuple[ParameterBase, ...]
    """The recognized parameters before any unrecognized one of action 00 or 01."""
    to_report: tuple[ParameterBase, ...]
    """The unrecognized parameters whose action reports them (01, 11), in order."""


def scan_parameters(parameters: tuple[ParameterBase, ...], recognized: frozenset[int]) -> ParameterScan:
    """RFC 4960 3.2.1: an unrecognized type's upper two bits say whether to report it (01, 11) and whether the
    parameters after it are processed (10, 11) or not (00, 01: "the processing of the parameters after the
    unknown parameter is canceled, but no processing already done is rolled back")."""
    processed: list[ParameterBase] = []
    to_report: list[ParameterBase] = []
    for parameter in parameters:
        if parameter.param_type in recognized:
            processed.append(parameter)
            continue
        action = parameter.unrecognized_action
        if action.report:
            to_report.append(parameter)
        if not action.skip:
            break
    return ParameterScan(tuple(processed), tuple(to_report))


def invalid_init(init: InitChunk | InitAckChunk) -> bool:
    """RFC 4960 3.3.2/3.3.3: Initiate Tag 0 or no streams make the INIT (ACK) invalid."""
    return init.initiate_tag == 0 or init.outbound_streams == 0 or init.inbound_streams == 0


def _cookie_preservative(init: InitChunk) -> float:
    """Suggested Cookie Life-Span Increment in seconds (RFC 4960 3.3.2.1 type 9), 0 if absent."""
    for parameter in init.parameters:
        if parameter.param_type == ParameterType.COOKIE_PRESERVATIVE and len(parameter.value) == 4:
            return struct.unpack("!I", parameter.value)[0] / 1000
    return 0.0


def build_init_ack(
    config: AssociationConfig,
    signer: CookieSigner,
    init: InitChunk,
    now: float,
    local_tag: int,
    local_initial_tsn: int,
    local_tie_tag: int = 0,
    peer_tie_tag: int = 0,
) -> InitAckChunk:
    """The INIT ACK answering `init`, its State Cookie sealed by `signer` (RFC 4960 5.1.3).

    A Cookie Preservative is honoured up to one more `cookie_lifetime` (5.2.6 lets the receiver bound it).
    The INIT's unrecognized parameters to report come back as Unrecognized Parameters (3.2.2, 3.3.3); only
    the parameters `scan_parameters` processes count (3.2.1).
    """
    scan = scan_parameters(init.parameters, INIT_PARAMETERS)
    init = replace(init, parameters=scan.processed)
    lifetime = config.cookie_lifetime + min(_cookie_preservative(init), config.cookie_lifetime)
    state = CookieState(
        created=now,
        lifetime=lifetime,
        local_port=config.local_port,
        peer_port=config.peer_port,
        local_tag=local_tag,
        peer_tag=init.initiate_tag,
        local_initial_tsn=local_initial_tsn,
        peer_initial_tsn=init.initial_tsn,
        peer_a_rwnd=init.a_rwnd,
        peer_outbound_streams=init.outbound_streams,
        peer_inbound_streams=init.inbound_streams,
        local_outbound_streams=min(config.streams, init.inbound_streams),
        local_inbound_streams=min(config.streams, init.outbound_streams),
        peer_adaptation_code_point=init.adaptation_code_point,
        local_tie_tag=local_tie_tag,
        peer_tie_tag=peer_tie_tag,
    )
    return InitAckChunk(
        initiate_tag=local_tag,
        a_rwnd=config.receive_buffer,
        outbound_streams=config.streams,
        inbound_streams=config.streams,
        initial_tsn=local_initial_tsn,
        parameters=(StateCookieParameter(cookie=signer.seal(state)),) + adaptation_parameters(config)
        + tuple(UnrecognizedParameter(parameter) for parameter in scan.to_report),
    )


def stale_cookie_error(staleness: float) -> ErrorCause:
    """Stale Cookie cause: Measure of Staleness in microseconds (RFC 4960 3.3.10.3)."""
    micros = min(int(staleness * 1_000_000), 0xFFFFFFFF)
    return ErrorCause(ErrorCauseCode.STALE_COOKIE, struct.pack("!I", micros))


class HandshakeMixin:
    """The association's handlers for RFC 4960 5 (see the module docstring)."""

    # -- active open ------------------------------------------------------------------

    def _send_init(self, now: float) -> None:
        """5.1 A: send INIT and start T1-init."""
        if self._used:
            raise InvalidStateError(self.state, Trigger.CONNECT, "an Association object opens once; create a new one")
        self._used = True
        self._init_chunk = self._make_init()
        self._queue_control(self._init_chunk, tag=0, alone=True)
        self._timers[Trigger.T1_INIT] = now + self._rto.rto

    def _make_init(self) -> InitChunk:
        parameters: list[ParameterBase] = list(adaptation_parameters(self.config))
        if self._cookie_preservative_ms:
            parameters.append(Parameter(ParameterType.COOKIE_PRESERVATIVE, struct.pack("!I", self._cookie_preservative_ms)))
        return InitChunk(
            initiate_tag=self.local_tag,
            a_rwnd=self.config.receive_buffer,
            outbound_streams=self.config.streams,
            inbound_streams=self.config.streams,
            initial_tsn=self._initial_tsn,
            parameters=tuple(parameters),
        )

    def _on_init_ack(self, now: float, packet: SctpPacket, ack: InitAckChunk) -> bool | None:
        """5.1 C: take the peer's tag and parameters, echo its cookie and start T1-cookie.  Unrecognized
        parameters to report go in an ERROR chunk bundled after the COOKIE ECHO (3.2.2); the mandatory
        State Cookie is echoed even after a parameter that stops processing (3.2.1: "in all four cases, an
        INIT ACK or COOKIE ECHO chunk is sent")."""
        cookie = ack.state_cookie
        scan = scan_parameters(ack.parameters, INIT_ACK_PARAMETERS)
        ack = replace(ack, parameters=scan.processed)
        if invalid_init(ack) or cookie is None:
            self._events.append(self._failure("invalid INIT ACK (RFC 4960 3.3.3)"))
            self._timers.clear()
            causes = (ErrorCause(ErrorCauseCode.INVALID_MANDATORY_PARAMETER),)
            if ack.initiate_tag:
                self.peer_tag = ack.initiate_tag
                self._close_with_abort(*causes)
            else:
                self.state = AssociationState.CLOSED
            return None
        self.peer_tag = ack.initiate_tag
        self._learn_peer(ack.initial_tsn, ack.a_rwnd, min(self.config.streams, ack.inbound_streams),
                         min(self.config.streams, ack.outbound_streams), ack.adaptation_code_point)
        self._timers.pop(Trigger.T1_INIT, None)
        self._cookie_echo = CookieEchoChunk(cookie=cookie)
        self._queue_control(self._cookie_echo)
        if scan.to_report:
            self._queue_control(ErrorChunk(causes=(unrecognized_parameters_cause(scan.to_report),)))
        self._init_retransmits = 0
        self._timers[Trigger.T1_COOKIE] = now + self._rto.rto
        return None

    def _on_cookie_ack(self, now: float, packet: SctpPacket, chunk: CookieAckChunk) -> None:
        """5.1 E: COMMUNICATION UP."""
        self._timers.pop(Trigger.T1_COOKIE, None)
        self._establish(now)

    def _on_t1_init(self, now: float) -> None:
        """5.1 C / 6.3.3: retransmit INIT with a backed-off RTO, up to Max.Init.Retransmits; then "abort the
        initialization process and report the error to the SCTP user"."""
        self._init_retransmits += 1
        limit = self.config.max_init_retransmits
        if self._init_retransmits > limit:
            self._events.append(self._failure(
                f"INIT unanswered after {limit} retransmissions: Max.Init.Retransmits exceeded (RFC 4960 5.1 C)",
                RetransmissionLimit.MAX_INIT_RETRANSMITS))
            self.state = AssociationState.CLOSED
            self._timers.clear()
            return
        self._rto.back_off()
        assert self._init_chunk is not None
        self._queue_control(self._init_chunk, tag=0, alone=True)
        self._timers[Trigger.T1_INIT] = now + self._rto.rto

    def _on_t1_cookie(self, now: float) -> None:
        """5.1 C: retransmit COOKIE ECHO with a backed-off RTO, up to Max.Init.Retransmits; then give up."""
        self._init_retransmits += 1
        limit = self.config.max_init_retransmits
        if self._init_retransmits > limit:
            self._events.append(self._failure(
                f"COOKIE ECHO unanswered after {limit} retransmissions: Max.Init.Retransmits exceeded "
                "(RFC 4960 5.1 C)", RetransmissionLimit.MAX_INIT_RETRANSMITS))
            self._timers.clear()
            self._close_with_abort()
            return
        self._rto.back_off()
        assert self._cookie_echo is not None
        self._queue_control(self._cookie_echo)
        self._timers[Trigger.T1_COOKIE] = now + self._rto.rto

    def _on_error_in_cookie_echoed(self, now: float, packet: SctpPacket, chunk: ErrorChunk) -> bool | None:
        """5.2.6: a Stale Cookie error gets one new INIT with a Cookie Preservative of twice the staleness;
        a second one gives up.  Any other ERROR is reported and the state stays."""
        stale = [c for c in chunk.causes if c.code == ErrorCauseCode.STALE_COOKIE and len(c.value) == 4]
        if not stale:
            self._events.append(ErrorReported(chunk.causes))
            return False
        if self._stale_cookie_retried:
            self._events.append(self._failure("State Cookie stale twice (RFC 4960 5.2.6)"))
            self._timers.clear()
            self._close_with_abort()
            return None
        self._stale_cookie_retried = True
        staleness_us = struct.unpack("!I", stale[0].value)[0]
        self._cookie_preservative_ms = min(max(2 * staleness_us // 1000, 1), 0xFFFFFFFF)
        self._timers.pop(Trigger.T1_COOKIE, None)
        self.peer_tag = 0
        self._init_chunk = self._make_init()
        self._queue_control(self._init_chunk, tag=0, alone=True)
        self._timers[Trigger.T1_INIT] = now + self._rto.rto
        return None

    # -- INIT received ----------------------------------------------------------------

    def _init_answerable(self, init: InitChunk) -> bool:
        """3.3.2: an invalid INIT is answered with ABORT; without a cookie secret nothing can be answered."""
        if invalid_init(init):
            self._queue_control(AbortChunk(tag_reflected=True, causes=(
                ErrorCause(ErrorCauseCode.INVALID_MANDATORY_PARAMETER),)), tag=0, alone=True)
            return False
        return self._signer is not None

    def _answer_init_in_cookie_wait(self, now: float, packet: SctpPacket, init: InitChunk) -> bool | None:
        """5.2.1: INIT collision: answer with our original INIT's tag and TSN, Tie-Tags zero."""
        if not self._init_answerable(init):
            return False
        ack = build_init_ack(self.config, self._signer, init, now, self.local_tag, self._initial_tsn)
        self._queue_control(ack, tag=init.initiate_tag, alone=True)
        return None

    def _answer_init_in_cookie_echoed(self, now: float, packet: SctpPacket, init: InitChunk) -> bool | None:
        """5.2.1: the same parameters as our INIT; Tie-Tags populated."""
        if not self._init_answerable(init):
            return False
        ack = build_init_ack(self.config, self._signer, init, now, self.local_tag, self._initial_tsn,
                             self.local_tag, self.peer_tag)
        self._queue_control(ack, tag=init.initiate_tag, alone=True)
        return None

    def _answer_init_when_up(self, now: float, packet: SctpPacket, init: InitChunk) -> bool | None:
        """5.2.2: new tag and TSN, Tie-Tags are the current tags; the association goes on."""
        if not self._init_answerable(init):
            return False
        ack = build_init_ack(self.config, self._signer, init, now, random_tag(self.config),
                             self.config.rng.getrandbits(32), self.local_tag, self.peer_tag)
        self._queue_control(ack, tag=init.initiate_tag, alone=True)
        return None

    def _resend_shutdown_ack(self, now: float, packet: SctpPacket, init: InitChunk) -> bool | None:
        """9.2: in SHUTDOWN-ACK-SENT an INIT is discarded and the SHUTDOWN ACK sent again."""
        if not self._init_answerable(init):
            return False
        self._queue_control(ShutdownAckChunk())
        return None

    # -- COOKIE ECHO received ---------------------------------------------------------

    def _open_cookie(self, packet: SctpPacket, echo: CookieEchoChunk) -> CookieState | None:
        """5.1.5 steps 1-2: the cookie's MAC, tag and ports must be ours; None silently discards it."""
        if self._signer is None:
            return None
        cookie = self._signer.open(echo.cookie)
        if cookie is None or packet.verification_tag != cookie.local_tag:
            return None
        if cookie.local_port != self.config.local_port or cookie.peer_port != self.config.peer_port:
            return None
        return cookie

    def _accept_cookie_echo(self, now: float, packet: SctpPacket, echo: CookieEchoChunk) -> bool | None:
        """5.1.5: the passive side's association comes to life from a valid, fresh cookie."""
        cookie = self._open_cookie(packet, echo)
        if cookie is None or not self._passive_open or self._used:
            return False
        if cookie.staleness(now) > 0:
            self._stale(cookie, now)
            return False
        self._used = True
        self._adopt_cookie(cookie)
        self._queue_control(CookieAckChunk())
        self._establish(now)
        return None

    def _on_cookie_echo(self, now: float, packet: SctpPacket, echo: CookieEchoChunk) -> bool | None:
        """5.2.4: case D (tags match: COOKIE ACK, again if established), case B (INIT collision: the peer's
        tag from the cookie) and case A (the peer restarted: this association ends, `PeerRestarted`, and its owner
        hands the COOKIE ECHO to a new one); case C is discarded by 5.2.4."""
        cookie = self._open_cookie(packet, echo)
        if cookie is None:
            return False
        opening = self.state in (AssociationState.COOKIE_WAIT, AssociationState.COOKIE_ECHOED)
        local_match = cookie.local_tag == self.local_tag
        if local_match and cookie.peer_tag == self.peer_tag:
            if opening:
                self._adopt_cookie(cookie)
                self._timers.pop(Trigger.T1_INIT, None)
                self._timers.pop(Trigger.T1_COOKIE, None)
                self._establish(now)
            self._queue_control(CookieAckChunk())
            return None
        if local_match and (cookie.local_tie_tag == 0 or self.state is AssociationState.COOKIE_WAIT):
            if cookie.staleness(now) > 0:
                self._stale(cookie, now)
                return False
            self._adopt_cookie(cookie)
            self._timers.pop(Trigger.T1_INIT, None)
            self._timers.pop(Trigger.T1_COOKIE, None)
            if opening:
                self._establish(now)
            self._queue_control(CookieAckChunk())
            return None
        if (not local_match and cookie.peer_tag != self.peer_tag and cookie.local_tie_tag == self.local_tag
                and cookie.peer_tie_tag == self.peer_tag and not opening
                and self.state is not AssociationState.SHUTDOWN_ACK_SENT):
            # case A: the peer restarted (in SHUTDOWN-ACK-SENT it must not make a new association: discarded)
            if cookie.staleness(now) > 0:
                self._stale(cookie, now)
                return False
            self._timers.clear()
            self._control.clear()
            self._send_queue.clear()
            self._queued_bytes = 0
            self._final_packet_sent = True
            self.state = AssociationState.CLOSED
            self._events.append(PeerRestarted())
            return None
        return False

    def _adopt_cookie(self, cookie: CookieState) -> None:
        self.local_tag = cookie.local_tag
        self.peer_tag = cookie.peer_tag
        if self._initial_tsn != cookie.local_initial_tsn:
            self._initial_tsn = self._next_tsn = cookie.local_initial_tsn
            self._last_cum_ack = (cookie.local_initial_tsn - 1) & 0xFFFFFFFF
        self._learn_peer(cookie.peer_initial_tsn, cookie.peer_a_rwnd, cookie.local_outbound_streams,
                         cookie.local_inbound_streams, cookie.peer_adaptation_code_point)

    def _stale(self, cookie: CookieState, now: float) -> None:
        """5.1.5 step 3: answer a stale cookie with ERROR "Stale Cookie" (tag = the peer's)."""
        self._queue_control(ErrorChunk(causes=(stale_cookie_error(cookie.staleness(now)),)), tag=cookie.peer_tag)

    def _learn_peer(self, peer_initial_tsn: int, peer_a_rwnd: int, outbound: int, inbound: int,
                    code_point: int | None) -> None:
        self._tracker = TsnTracker(cumulative_tsn=(peer_initial_tsn - 1) & 0xFFFFFFFF)
        self._peer_a_rwnd = self._peer_rwnd = peer_a_rwnd
        self.outbound_streams = outbound
        self.inbound_streams = inbound
        self.peer_adaptation_code_point = code_point

    def _establish(self, now: float) -> None:
        """COMMUNICATION UP with the RFC 5043 11.1 verdict and the RFC 5043 8 stream count."""
        self.state = AssociationState.ESTABLISHED
        self._cc = CongestionControl(mtu=self.config.max_packet_size, ssthresh=self._peer_a_rwnd)
        self._last_cum_ack = (self._initial_tsn - 1) & 0xFFFFFFFF
        local_ddp = self.config.adaptation_code_point == ADAPTATION_CODE_POINT_DDP
        peer_ddp = self.peer_adaptation_code_point == ADAPTATION_CODE_POINT_DDP
        self.ddp_enabled = local_ddp and peer_ddp
        self._events.append(AssociationEstablished(
            outbound_streams=self.outbound_streams,
            inbound_streams=self.inbound_streams,
            streams=min(self.outbound_streams, self.inbound_streams),
            peer_adaptation_code_point=self.peer_adaptation_code_point,
            ddp_enabled=self.ddp_enabled,
            mulpdu=self.mulpdu,
        ))
        if not self.ddp_enabled:
            if not local_ddp:
                reason = "this endpoint did not announce the DDP adaptation (RFC 5043 11.1)"
            elif self.peer_adaptation_code_point is None:
                reason = "peer sent no Adaptation Layer Indication: NONE (RFC 5043 11.1)"
            else:
                reason = (f"peer indicated adaptation code point 0x{self.peer_adaptation_code_point:08x}: "
                          "ANY-OTHER (RFC 5043 11.1)")
            self._events.append(DdpProceduresForbidden(self.peer_adaptation_code_point, reason))
        self._restart_heartbeat(now)
