"""A software RNIC host whose SCTP is usrsctp: the model's DDP sessions and RDMAP endpoints over a stack nobody
here wrote.

`UsrsctpSctp` is a `model.rnic.host.Sctp`: the associations and listeners it
makes for a `SoftRnic` are usrsctp sockets (`sim.usrsctp`) on one AF_CONN
address, behind the calls the host makes of `model.sctp`'s. The host keeps
its Ethernet and IPv4 framing, its DDP stream sessions (RFC 5043, RFC 6581)
and its RDMAP endpoints (RFC 5040); usrsctp does SCTP (RFC 4960): the
handshake, TSNs, SACKs, windows, retransmissions, shutdown. `usrsctp_host`
makes such a host, so a fabric can put it where a peer goes (the
`peer_host` of `driver.backends.soft.SoftFabric`, of the `engine` backend's
fabric and of `sim.driver_sim.SimFabric`) and any driver program runs
against it unchanged: the RNIC's receive and transmit engines, their SACKs and
their transport unit then meet usrsctp's.

How the calls map:

* time: usrsctp's clock (`Stack.advance`, virtual milliseconds) follows the
  host's ``now`` on every call; its timers' deadlines are not told, so an
  association asks to be called every `STEP_SECONDS` while it is open;
* packets: `receive(packet, now)` is ``usrsctp_conninput``; `data_to_send(now)`
  what usrsctp sent through the address since;
* messages: `send(stream, ppid, payload)` is one unordered, unfragmented user
  message (RFC 5043 9, 10), held here while usrsctp's send buffer is full;
  each message read becomes `DataReceived`;
* events: COMMUNICATION UP (``SCTP_ASSOC_CHANGE``) with the peer's
  ``SCTP_ADAPTATION_INDICATION`` becomes `AssociationEstablished` with RFC
  5043 11.1's verdict; the peer's SHUTDOWN `PeerShutdownStarted`; SHUTDOWN
  COMPLETE `AssociationClosed`; COMMUNICATION LOST `AssociationAborted` (with
  the causes of the ABORT that arrived) or `AssociationFailed`;
* acknowledgements: every packet each way is also decoded with the model's
  codecs (`SctpPacket.decode`), so the chunks a Cumulative TSN Ack passes are
  counted per stream (`DataAcknowledged`, RFC 5043 6.6) exactly as the
  model's association counts them, and `statistics` counts what went over the
  wire (new DATA chunks, DATA chunks sent again, packets).

usrsctp's path MTU is set to the host's SCTP packet size (`AssociationConfig.max_packet_size`),
so its fragmentation point takes every DDP segment the host makes (checked at COMMUNICATION UP).
"""

from __future__ import annotations

import errno as errno_codes
import math
import random
from collections import Counter, deque
from dataclasses import dataclass, replace

from model.ddp.memory import SparseMemory
from model.errors import DecodeError
from model.rnic.host import RnicConfig, SoftRnic
from model.sctp.association import AssociationError
from model.sctp.config import AssociationConfig
from model.sctp.events import (
    AssociationAborted, AssociationClosed, AssociationEstablished, AssociationEvent, AssociationFailed,
    DataAcknowledged, DataReceived, DdpProceduresForbidden, PeerShutdownStarted,
)
from model.sctp.listener import Accepted
from model.sctp.packet import (
    ADAPTATION_CODE_POINT_DDP, AbortChunk, DataChunk, SackChunk, SctpPacket, ShutdownChunk, serial_gt,
)
from model.sctp.state import AssociationState
from sim.usrsctp import AdaptationIndication, AssocChange, Message, ShutdownEvent, Socket, Stack, UsrsctpError

__all__ = ["UsrsctpSctp", "UsrsctpAssociation", "UsrsctpListener", "UsrsctpStatistics", "usrsctp_host",
           "STEP_SECONDS", "SEND_BUFFER_FULL", "abort_and_close", "configure"]

STEP_SECONDS = 0.01
"""The longest an open association goes without being called: usrsctp's timers fire at most this late."""
SEND_BUFFER_FULL = (errno_codes.EWOULDBLOCK, errno_codes.EAGAIN, errno_codes.ENOBUFS)
"""The errors of a send usrsctp's buffer cannot take now: the message is offered again later."""


class UsrsctpSctp:
    """usrsctp's SCTP for one host (a `model.rnic.host.Sctp`): its sockets on one AF_CONN address."""

    def __init__(self, stack: Stack | None = None) -> None:
        self.stack = stack if stack is not None else Stack.instance()
        self.conn = self.stack.conn()
        self._origin_ms = self.stack.clock_ms
        self._sockets: list[Socket] = []
        self.now = 0.0

    def association(self, config: AssociationConfig) -> UsrsctpAssociation:
        return UsrsctpAssociation(self, config)

    def listener(self, config: AssociationConfig) -> UsrsctpListener:
        return UsrsctpListener(self, config)

    def advance(self, now: float) -> None:
        """usrsctp's clock to the host's `now` (whole milliseconds since the host's time 0): its due timers fire."""
        self.now = max(self.now, now)
        target = self._origin_ms + math.floor(now * 1000 + 1e-6)
        if target > self.stack.clock_ms:
            self.stack.advance(target - self.stack.clock_ms)

    def socket(self, config: AssociationConfig) -> Socket:
        """A socket as a DDP association wants it (RFC 5043 5.1, 9, 10), on the host's port."""
        sock = self.stack.socket()
        self._sockets.append(sock)
        configure(sock, config)
        sock.bind(self.conn, config.local_port)
        return sock

    def adopt(self, sock: Socket, config: AssociationConfig) -> None:
        """A socket a listener accepted, configured again (usrsctp 0.9.5 does not pass every option on)."""
        self._sockets.append(sock)
        configure(sock, config)

    def close(self) -> None:
        """Leave usrsctp with nothing of this host: ABORT what is still up, close the sockets, drop the address."""
        abort_and_close(self._sockets)
        self.conn.close()


def abort_and_close(sockets: list[Socket]) -> None:
    """ABORT the association of each socket still open (RFC 4960 9.1), then close it."""
    for sock in sockets:
        if not sock.closed:
            try:
                sock.abort()
            except UsrsctpError:
                pass    # no association (any more)
            sock.close()


def configure(sock: Socket, config: AssociationConfig) -> None:
    """No Nagle-like delay, no fragments (RFC 5043 9), the host's Adaptation Layer Indication (RFC 5043 5.1),
    its streams, its SCTP packet size as the path MTU, no heartbeats (their times are jittered by usrsctp's
    random numbers; the host's side sends its own)."""
    sock.set_nodelay()
    sock.set_disable_fragments()
    if config.adaptation_code_point is not None:
        sock.set_adaptation_layer(config.adaptation_code_point)
    sock.set_streams(config.streams, config.streams)
    sock.set_path_mtu(config.max_packet_size)
    sock.set_heartbeat(False)


@dataclass(frozen=True)
class UsrsctpStatistics:
    """What went over the wire through one usrsctp association, as decoded here."""

    data_chunks_sent: int
    """New DATA chunks usrsctp sent."""
    data_chunks_resent: int
    """DATA chunks usrsctp sent again (T3-rtx or fast retransmit: usrsctp does not say which)."""
    data_chunks_received: int
    """User messages read from the socket (one DATA chunk each: no fragments)."""
    packets_sent: int
    packets_received: int
    sacks_received: int
    """SACK chunks of the peer that reached usrsctp."""


class UsrsctpAssociation:
    """One usrsctp association behind `model.sctp.association.Association`'s calls (see the module docstring)."""

    def __init__(self, sctp: UsrsctpSctp, config: AssociationConfig, sock: Socket | None = None) -> None:
        self.config = config
        self._sctp = sctp
        self._sock = sock
        self.state = AssociationState.ESTABLISHED if sock is not None else AssociationState.CLOSED
        self._events: list[AssociationEvent] = []
        self._adaptation: int | None = None
        self._up: AssocChange | None = None
        self._established = False
        self._held: deque[tuple[int, int, bytes]] = deque()          # messages usrsctp had no room for
        self._in_flight: deque[tuple[int, int, int]] = deque()       # (TSN, stream, bytes) of new DATA, in order
        self._highest_tsn: int | None = None
        self._queued_bytes = 0
        self._abort_causes: tuple | None = None
        self._counts: Counter[str] = Counter()

    # -- what the host reads

    @property
    def is_closed(self) -> bool:
        return self.state is AssociationState.CLOSED

    @property
    def mulpdu(self) -> int:
        return self.config.mulpdu

    @property
    def queued_bytes(self) -> int:
        """User data handed to `send` and not yet passed by the peer's Cumulative TSN Ack."""
        return self._queued_bytes

    @property
    def statistics(self) -> UsrsctpStatistics:
        c = self._counts
        return UsrsctpStatistics(c["data_sent"], c["data_resent"], c["data_received"], c["packets_sent"],
                                 c["packets_received"], c["sacks_received"])

    @property
    def data_chunks_received(self) -> int:
        """`statistics.data_chunks_received`, without building the rest."""
        return self._counts["data_received"]

    def next_events(self) -> list[AssociationEvent]:
        self._read()
        events, self._events = self._events, []
        return events

    def next_timeout(self) -> float | None:
        return None if self.is_closed else self._sctp.now + STEP_SECONDS

    # -- the host's calls

    def connect(self, now: float) -> None:
        """Active open (RFC 4960 5.1): usrsctp's INIT leaves on the next `data_to_send`."""
        self._sctp.advance(now)
        self._sock = self._sctp.socket(self.config)
        self._sock.connect(self._sctp.conn, self.config.peer_port)
        self.state = AssociationState.COOKIE_WAIT

    def send(self, stream_id: int, ppid: int, payload: bytes) -> None:
        """One unordered, unfragmented user message (RFC 5043 9, 10)."""
        if self.state is not AssociationState.ESTABLISHED:
            raise AssociationError(f"no new data in {self.state.value} (RFC 4960 9.2)")
        self._queued_bytes += len(payload)
        self._held.append((stream_id, ppid, bytes(payload)))
        self._offer()

    def receive(self, packet: bytes, now: float) -> None:
        self._sctp.advance(now)
        self._note_incoming(packet)
        self._sctp.conn.input(packet)
        self._read()

    def data_to_send(self, now: float) -> list[bytes]:
        self._sctp.advance(now)
        self._offer()
        self._read()
        packets = self._sctp.conn.output()
        for packet in packets:
            self._note_outgoing(packet)
        return packets

    def handle_timeout(self, now: float) -> None:
        self._sctp.advance(now)
        self._read()

    def shutdown(self, now: float) -> None:
        """Graceful close (RFC 4960 9.2): usrsctp's SHUTDOWN once its data is acknowledged."""
        self._sctp.advance(now)
        if self._sock is not None:
            self._sock.shutdown()
            self.state = AssociationState.SHUTDOWN_PENDING

    def abort(self, now: float) -> None:
        """ABORT at once (RFC 4960 9.1)."""
        self._sctp.advance(now)
        if self._sock is not None and not self.is_closed:
            self._sock.abort()
            self._closed()

    # -- usrsctp's side

    def _offer(self) -> None:
        while self._held and self._sock is not None and self.state is AssociationState.ESTABLISHED:
            stream_id, ppid, payload = self._held[0]
            try:
                self._sock.send(payload, ppid, stream_id, unordered=True)
            except UsrsctpError as error:
                if error.errno in SEND_BUFFER_FULL:
                    return
                raise
            self._held.popleft()

    def _read(self) -> None:
        if self._sock is None:
            return
        for item in self._sock.receive_all():
            if isinstance(item, Message):
                if not item.complete:
                    raise UsrsctpError(errno_codes.EMSGSIZE, "usrsctp delivered part of a message: DDP segments "
                                                             "are never fragmented (RFC 5043 9)")
                self._counts["data_received"] += 1
                self._events.append(DataReceived(item.stream, item.ppid, item.tsn, item.data, item.unordered))
            elif isinstance(item, AdaptationIndication):
                self._adaptation = item.code_point
            elif isinstance(item, ShutdownEvent):
                self._events.append(PeerShutdownStarted())
            elif isinstance(item, AssocChange):
                self._assoc_change(item)
        if self._up is not None and not self._established:
            self._establish()
        self._track_state()

    def _assoc_change(self, change: AssocChange) -> None:
        if change.state in ("COMM_UP", "RESTART"):
            self._up = change
            self.state = AssociationState.ESTABLISHED
        elif change.state == "SHUTDOWN_COMP":
            self._closed()
            self._events.append(AssociationClosed())
        elif change.state in ("COMM_LOST", "CANT_STR_ASSOC"):
            self._closed()
            if self._abort_causes is not None:
                self._events.append(AssociationAborted(self._abort_causes))
            else:
                self._events.append(AssociationFailed(f"usrsctp: {change.state} (error {change.error})"))

    def _establish(self) -> None:
        """COMMUNICATION UP with RFC 5043 11.1's verdict on the Adaptation Layer Indications."""
        up = self._up
        assert up is not None and self._sock is not None
        ours, peers = self.config.adaptation_code_point, self._adaptation
        ddp = ours == ADAPTATION_CODE_POINT_DDP and peers == ADAPTATION_CODE_POINT_DDP
        fragmentation_point = self._sock.status().fragmentation_point
        if ddp and fragmentation_point < self.config.max_user_data:
            raise UsrsctpError(errno_codes.EMSGSIZE, f"usrsctp's fragmentation point {fragmentation_point} is below "
                                                     f"the host's largest DATA chunk, {self.config.max_user_data}")
        self._established = True
        streams = min(up.outbound_streams, up.inbound_streams)
        self._events.append(AssociationEstablished(up.outbound_streams, up.inbound_streams, streams, peers, ddp,
                                                   self.config.mulpdu))
        if ours == ADAPTATION_CODE_POINT_DDP and not ddp:
            self._events.append(DdpProceduresForbidden(peers, "the peer did not indicate DDP (RFC 5043 11.1)"))

    def _track_state(self) -> None:
        """The RFC 4960 4 state usrsctp reports, while it has an association."""
        if self._sock is None or self.is_closed or not self._established:
            return
        try:
            state = self._sock.status().state
        except UsrsctpError:
            return
        try:
            self.state = AssociationState(state)
        except ValueError:
            pass     # a state of usrsctp's own (BOUND, LISTEN): no association to report on

    def _closed(self) -> None:
        self.state = AssociationState.CLOSED
        self._held.clear()

    # -- the wire, as decoded

    def _note_outgoing(self, data: bytes) -> None:
        self._counts["packets_sent"] += 1
        for chunk in SctpPacket.decode(data).chunks:
            if not isinstance(chunk, DataChunk):
                continue
            if self._highest_tsn is not None and not serial_gt(chunk.tsn, self._highest_tsn, 32):
                self._counts["data_resent"] += 1
                continue
            self._highest_tsn = chunk.tsn
            self._counts["data_sent"] += 1
            self._in_flight.append((chunk.tsn, chunk.stream_id, len(chunk.user_data)))

    def _note_incoming(self, data: bytes) -> None:
        self._counts["packets_received"] += 1
        try:
            packet = SctpPacket.decode(data)
        except DecodeError:
            return          # usrsctp drops it too (RFC 4960 6.8); nothing acknowledged
        for chunk in packet.chunks:
            if isinstance(chunk, SackChunk):
                self._counts["sacks_received"] += 1
                self._acknowledged(chunk.cumulative_tsn_ack)
            elif isinstance(chunk, ShutdownChunk):
                self._acknowledged(chunk.cumulative_tsn_ack)
            elif isinstance(chunk, AbortChunk):
                self._abort_causes = chunk.causes

    def _acknowledged(self, cumulative_tsn_ack: int) -> None:
        """RFC 5043 6.6: the chunks the Cumulative TSN Ack passed, per stream."""
        acked: Counter[int] = Counter()
        while self._in_flight and not serial_gt(self._in_flight[0][0], cumulative_tsn_ack, 32):
            _, stream_id, length = self._in_flight.popleft()
            acked[stream_id] += 1
            self._queued_bytes -= length
        for stream_id in sorted(acked):
            self._events.append(DataAcknowledged(stream_id, acked[stream_id]))


class UsrsctpListener:
    """A listening usrsctp socket behind `model.sctp.listener.Listener`'s calls: `Accepted` once usrsctp has
    taken a valid COOKIE ECHO (RFC 4960 5.1.5)."""

    def __init__(self, sctp: UsrsctpSctp, config: AssociationConfig) -> None:
        self.config = config
        self._sctp = sctp
        self._sock = sctp.socket(config)
        self._sock.listen()
        self._peer_port: int | None = None

    def receive(self, packet: bytes, now: float) -> None:
        self._sctp.advance(now)
        self._peer_port = int.from_bytes(packet[0:2], "big")
        self._sctp.conn.input(packet)

    def data_to_send(self, now: float) -> list[bytes]:
        self._sctp.advance(now)
        return self._sctp.conn.output()

    def next_events(self) -> list[Accepted]:
        sock = self._sock.accept()
        if sock is None:
            return []
        self._sctp.adopt(sock, self.config)
        config = replace(self.config, peer_port=self._peer_port or 0)
        return [Accepted(UsrsctpAssociation(self._sctp, config, sock))]  # type: ignore[arg-type]


def usrsctp_host(config: RnicConfig, rng: random.Random) -> SoftRnic:
    """A `SoftRnic` over usrsctp (every session request waits for the driver, as a fabric's hosts do)."""
    return SoftRnic(config, SparseMemory(), rng, session_policy=None, sctp=UsrsctpSctp())
