"""The model's SCTP association against usrsctp, an SCTP stack nobody here wrote, in one process.

usrsctp (Debian's libusrsctp-dev, bound by `sim.usrsctp`) sits at one end of
an in-memory link and a `model.sctp` association (or its `Listener`) at the
other. usrsctp's AF_CONN address family hands over raw SCTP packets, so the
link carries exactly the bytes each side would put in an IP packet, CRC32c
included and checked by both (RFC 4960 6.8). Time is virtual, in whole
milliseconds, for both sides: it moves only in `Pair.run`, which jumps to the
next packet arrival or model timer, or by at most `STEP_MS` so that usrsctp's
timers (whose deadlines it does not tell) fire on time; usrsctp's time of day
is the same virtual clock (see `sim.usrsctp`), so its RTT measurements see
the link's delay, not the host's speed. The path is
usrsctp's AF_CONN default, 1280-byte SCTP packets; the model is configured to
the same (no IP header in front).

Every packet that enters the link is decoded with the model's codecs
(`SctpPacket.decode`, which checks the CRC32c) and logged, lost or not: the
assertions read what each side put on the wire (retransmitted TSNs, Gap Ack
Blocks, the chunks of a shutdown), what usrsctp reports through its socket
API (SCTP_STATUS, notifications, received messages) and what the model
reports (state, events), and compare the user data byte for byte.

Loss is this file's: a `random.Random` per direction, seeded, decides the
fate of each packet in turn. usrsctp's own random numbers (tags, initial
TSNs) change the bytes of a run but not its course, and its heartbeats (whose
timing is jittered by random numbers) are off but in the heartbeat test, which
loses nothing, so a seed gives the same sequence of packets every run,
however loaded the host.

The engine's acknowledgement and transport units face usrsctp twice: as
their golden models (`model.engine`) and as the gateware itself in Amaranth's
simulator (`sim.rtl_units`), where every SACK, transport record and row state
is also compared with the model's.

Every association here ends: the test's `pairs` fixture ABORTs what is still up
and closes usrsctp's sockets, so that the session's stack can stop
(``usrsctp_finish``).
"""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from model.sctp.association import Association, AssociationState
from model.sctp.config import AssociationConfig
from model.sctp.events import (
    AssociationAborted,
    AssociationClosed,
    AssociationEstablished,
    AssociationEvent,
    DataReceived,
    PeerShutdownStarted,
)
from model.engine.sack import TICK_SECONDS, SackUnit
from model.engine.transport import Limit, Retirement, Retransmission, TransportUnit, ticks
from model.sctp.listener import Listener
from model.sctp.out_of_the_blue import out_of_the_blue_reply
from model.sctp.packet import (
    ADAPTATION_CODE_POINT_DDP,
    PPID_DDP_SEGMENT,
    PPID_DDP_SESSION_CONTROL,
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
    SackChunk,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownChunk,
    ShutdownCompleteChunk,
    UnrecognizedParameter,
    serial_gt,
    serial_lt,
)
from sim.rtl_units import RtlSackUnit, RtlTransportUnit
from sim.usrsctp import (
    STRUCT_SIZES,
    AdaptationIndication,
    AssocChange,
    Message,
    RemoteError,
    ShutdownEvent,
    Socket,
    Stack,
    UsrsctpError,
    UsrsctpUnavailable,
    _load,
)

MODEL_PORT = 5000
USRSCTP_PORT = 6000
SECRET = b"usrsctp interop cookie secret!!!"
PATH_MTU = 1280
"""usrsctp's path MTU for an AF_CONN address (sctp_pcb.c): the whole SCTP packet, as no IP header goes in front."""
DELAY_MS = 1
"""One-way delay of the link."""
STEP_MS = 10
"""The longest usrsctp goes without being told the time: its timers fire at most this late."""
TO_USRSCTP = "model->usrsctp"
TO_MODEL = "usrsctp->model"
RTO_MIN_MS = 1000
"""RTO.Min of both sides (RFC 4960 15; usrsctp's default): no T3-rtx expires sooner after a transmission."""


@dataclass
class Sent:
    time_ms: int
    direction: str
    packet: SctpPacket
    lost: bool


@dataclass
class Pair:
    """The model's association and a usrsctp socket on one lossy in-memory link (see the module docstring).

    `model_initiates`: the model's `Association` connects to a listening usrsctp socket (RFC 4960 5.1);
    otherwise a usrsctp socket connects to the model's `Listener`. `collide`, with `model_initiates`: the usrsctp
    socket connects too, at the same instant (an INIT collision, 5.2.1)."""

    stack: Stack
    model_initiates: bool
    collide: bool = False
    seed: int = 1
    loss: float = 0.0
    """Probability that a packet is lost, each way (set it once the association is up to spare the handshake)."""
    model_overrides: dict = field(default_factory=dict)
    drop: Callable[[str, SctpPacket], bool] | None = None
    """Says, packet by packet, whether to lose it (besides `loss`)."""
    corrupt: Callable[[str, SctpPacket], bool] | None = None
    """Says, packet by packet, whether to flip a bit of it after its CRC32c was computed (RFC 4960 6.8)."""
    usrsctp_heartbeats: bool = False
    """usrsctp's heartbeats (RFC 4960 8.3), off by default: their times are jittered with its random numbers."""
    usrsctp_reads: bool = True
    """False: usrsctp's application stops reading its socket (what arrives fills usrsctp's receive buffer)."""
    now_ms: int = 0
    gateware: bool = False
    """The engine's units are the gateware's, in Amaranth's simulator (`sim.rtl_units`), each checked record for
    record and row for row against its golden model, instead of the models alone."""
    unit: SackUnit | RtlSackUnit | None = None
    unit_since_ms: int = 0
    unit_sent: int = 0
    """Once `hand_sacks_to_unit` is called, the receive engine's acknowledgement unit (model/engine/sack.py) SACKs
    the DATA usrsctp sends to the model, as the gateware's does, and the model's association sends no SACK."""
    transport: TransportUnit | RtlTransportUnit | None = None
    """Once `hand_transport_to_unit` is called, the transmit engine's transport unit (model/engine/transport.py)
    sends, windows and retransmits the model's DATA (`send_through_unit`) on usrsctp's SACKs, as the
    gateware's will; the model's association only numbers the chunks."""
    transport_packets: dict[int, tuple[bytes, int]] = field(default_factory=dict)
    """TSN -> the DATA packet the unit's engine sends for it, and its user data bytes."""
    transport_waiting: list[int] = field(default_factory=list)
    transport_limit: int = 0
    transport_stopped: list = field(default_factory=list)
    model: Association | None = None
    listener: Listener | None = None
    sock: Socket | None = None
    listening: Socket | None = None
    log: list[Sent] = field(default_factory=list)
    model_events: list[AssociationEvent] = field(default_factory=list)
    usrsctp_items: list = field(default_factory=list)
    """What usrsctp's socket read: `Message`s and notifications, in order."""
    _wire: list[tuple[int, int, str, bytes]] = field(default_factory=list)
    _sequence: int = 0

    def __post_init__(self) -> None:
        self.conn = self.stack.conn()
        self._fates = {TO_USRSCTP: random.Random(f"{self.seed}/{TO_USRSCTP}"),
                       TO_MODEL: random.Random(f"{self.seed}/{TO_MODEL}")}
        config = AssociationConfig(
            local_port=MODEL_PORT, peer_port=USRSCTP_PORT, rng=random.Random(self.seed), hmac_secret=SECRET,
            path_mtu=PATH_MTU, lower_layer_overhead=0, **self.model_overrides)
        if self.model_initiates and self.collide:
            self.model = Association(config)
            self.model.connect(self.seconds)
            self.sock = self._socket()
            self.sock.bind(self.conn, USRSCTP_PORT)
            self.sock.connect(self.conn, MODEL_PORT)
        elif self.model_initiates:
            self.listening = self._socket()
            self.listening.bind(self.conn, USRSCTP_PORT)
            self.listening.listen()
            self.model = Association(config)
            self.model.connect(self.seconds)
        else:
            self.listener = Listener(config)
            self.sock = self._socket()
            self.sock.bind(self.conn, USRSCTP_PORT)
            self.sock.connect(self.conn, MODEL_PORT)
        self._pump()

    def _socket(self) -> Socket:
        sock = self.stack.socket()
        sock.set_nodelay()
        sock.set_disable_fragments()  # RFC 5043 9: DDP segments are never fragmented
        sock.set_adaptation_layer(ADAPTATION_CODE_POINT_DDP)  # RFC 5043 5.1
        sock.set_heartbeat(self.usrsctp_heartbeats)
        return sock

    @property
    def seconds(self) -> float:
        return self.now_ms / 1000

    # -- moving packets

    def _put(self, direction: str, data: bytes) -> None:
        packet = SctpPacket.decode(data)  # raises on a bad CRC32c (RFC 4960 6.8) or a malformed packet
        if self.corrupt is not None and self.corrupt(direction, packet):
            data = data[:-1] + bytes([data[-1] ^ 0x01])
            packet = SctpPacket.decode(data, verify_checksum=False)
        lost = self.loss > 0 and self._fates[direction].random() < self.loss
        lost = lost or (self.drop is not None and self.drop(direction, packet))
        self.log.append(Sent(self.now_ms, direction, packet, lost))
        if not lost:
            self._sequence += 1
            self._wire.append((self.now_ms + DELAY_MS, self._sequence, direction, data))

    def _pump(self) -> None:
        """Put on the wire every packet either side has to send now, and read what usrsctp's socket has."""
        outgoing = []
        if self.listener is not None:
            outgoing += self.listener.data_to_send(self.seconds)
        if self.model is not None:
            outgoing += self.model.data_to_send(self.seconds)
            self.model_events += self.model.next_events()
            if self.transport is not None:
                for request in self.model.engine_requests():   # a SHUTDOWN's Cumulative TSN Ack (9.2)
                    self._transport_records(self.transport.shutdown(0, request.tsn, self._tick()))
                self._transport_send()
        for data in outgoing:
            self._put(TO_USRSCTP, data)
        for data in self.conn.output():
            self._put(TO_MODEL, data)
        if self.sock is None and self.listening is not None:
            self.sock = self.listening.accept()
            if self.sock is not None:
                self.sock.set_heartbeat(self.usrsctp_heartbeats)  # usrsctp 0.9.5 does not pass the listener's on
        if self.sock is not None and self.usrsctp_reads:
            self.usrsctp_items += self.sock.receive_all()

    def hand_sacks_to_unit(self) -> None:
        """The engine's acknowledgement unit SACKs from now on (`Association.hand_sacks_to_engine`), its delay the
        association's delayed-ACK time in the unit's ticks, its window the association's receive buffer."""
        self.unit, self.unit_since_ms = (RtlSackUnit if self.gateware else SackUnit)(1), self.now_ms
        delay = round(self.model.config.delayed_ack_time / TICK_SECONDS)
        self.unit.reset(0, self.model.hand_sacks_to_engine(), delay, window=self.model.config.receive_buffer,
                        held_bytes=self.model.config.max_user_data)

    def hand_transport_to_unit(self) -> None:
        """The transport unit's row from the association (`Association.hand_transport_to_engine`): its next TSN,
        the peer's rwnd, its MTU and largest chunk, RTO parameters in the unit's ticks, Max.Retrans, Max.Burst."""
        config = self.model.config
        rwnd = self.model.hand_transport_to_engine()
        self.transport = (RtlTransportUnit if self.gateware else TransportUnit)(1)
        self._transport_records(self.transport.reset(
            0, self.model.next_tsn, rwnd, mtu=config.max_packet_size, chunk_bytes=config.max_user_data,
            rto_initial=ticks(config.rto_initial), rto_min=ticks(config.rto_min), rto_max=ticks(config.rto_max),
            max_retrans=config.association_max_retrans, max_burst=config.max_burst))

    def send_through_unit(self, message: Outgoing) -> None:
        """One unordered message as the engine sends it: numbered by the association, sent as the unit allows."""
        tsn = self.model.send_offloaded(message.stream, message.ppid, len(message.payload))
        chunk = DataChunk(tsn, message.stream, 0, message.ppid, message.payload, unordered=True)
        packet = SctpPacket(MODEL_PORT, USRSCTP_PORT, self.model.peer_tag, [chunk]).encode()
        self.transport_packets[tsn] = (packet, len(message.payload))
        self.transport_waiting.append(tsn)

    def _transport_send(self) -> None:
        """New chunks up to the unit's LIMIT and within its ring, each told to the unit as it leaves."""
        while self.transport_waiting and not serial_gt(self.transport_waiting[0], self.transport_limit, 32):
            state = self.transport.state(0)
            if (state.highest_tsn_sent - state.cumulative_tsn_ack) & 0xFFFFFFFF >= self.transport.ring_tsns:
                return
            tsn = self.transport_waiting.pop(0)
            packet, size = self.transport_packets[tsn]
            self.transport.sent(0, tsn, size, self._tick())
            self._put(TO_USRSCTP, packet)

    def _transport_records(self, records) -> None:
        for record in records:
            if isinstance(record, Retirement):
                self.model.engine_acknowledged(record.last_tsn, self.seconds)
                self.model_events += self.model.next_events()
            elif isinstance(record, Retransmission):
                self._put(TO_USRSCTP, self.transport_packets[record.tsn][0])
            elif isinstance(record, Limit):
                self.transport_limit = record.tsn
            else:
                self.transport_stopped.append(record)

    def _transport_timer_ms(self) -> int | None:
        if self.transport is None or (deadline := self.transport.next_deadline()) is None:
            return None
        return math.ceil(deadline * TICK_SECONDS * 1000 - 1e-6)

    def _unit_sacks(self, records) -> None:
        for record in records:
            self.unit_sent += 1
            packet = SctpPacket(MODEL_PORT, USRSCTP_PORT, self.model.peer_tag, [record.chunk()])
            self._put(TO_USRSCTP, packet.encode())

    def _tick(self) -> int:
        return int(self.seconds / TICK_SECONDS + 1e-9)

    def _unit_timer_ms(self) -> int | None:
        if self.unit is None or (deadline := self.unit.next_deadline()) is None:
            return None
        return math.ceil(deadline * TICK_SECONDS * 1000 - 1e-6)

    def _deliver(self, direction: str, data: bytes) -> None:
        if direction == TO_USRSCTP:
            self.conn.input(data)
            return
        if self.transport is not None and self.model is not None:
            # The receive engine hands the SACK chunks of a packet with the association's tag to the transport
            # unit; the packet's other chunks go to the association.
            packet = SctpPacket.decode(data)
            sacks = [chunk for chunk in packet.chunks if isinstance(chunk, SackChunk)]
            if sacks and packet.verification_tag == self.model.local_tag:
                for sack in sacks:
                    self._transport_records(self.transport.sack(0, sack.cumulative_tsn_ack, sack.a_rwnd,
                                                                 sack.gap_blocks, sack.duplicate_tsns, self._tick()))
                rest = [chunk for chunk in packet.chunks if not isinstance(chunk, SackChunk)]
                if not rest:
                    return
                data = SctpPacket(packet.src_port, packet.dst_port, packet.verification_tag, rest).encode()
        if self.unit is not None:   # the engine's records: each DATA chunk's TSN and I bit, the packet's last ends it
            chunks = [chunk for chunk in SctpPacket.decode(data).chunks if isinstance(chunk, DataChunk)]
            for index, chunk in enumerate(chunks):
                self._unit_sacks(self.unit.chunk(0, chunk.tsn, self._tick(), index == len(chunks) - 1,
                                                 chunk.immediate))
        if self.model is not None and not self.model.is_closed:
            self.model.receive(data, self.seconds)
            self.model_events += self.model.next_events()
            return
        if self.listener is None:  # the model's closed client: its host answers as RFC 4960 8.4 says
            reply = out_of_the_blue_reply(SctpPacket.decode(data))
            if reply is not None:
                self._put(TO_USRSCTP, reply.encode())
            return
        self.listener.receive(data, self.seconds)
        for accepted in self.listener.next_events():
            self.model = accepted.association
            self.model_events += self.model.next_events()

    def _model_timer_ms(self) -> int | None:
        if self.model is None or (deadline := self.model.next_timeout()) is None:
            return None
        return math.ceil(deadline * 1000 - 1e-6)

    def run(self, until, within_ms: int = 60_000) -> None:
        """Move time and packets until `until()` holds; fail if it does not within `within_ms` more."""
        limit = self.now_ms + within_ms
        self._pump()
        while not until():
            if self.now_ms >= limit:
                raise AssertionError(f"not reached within {within_ms} ms (at {self.now_ms} ms)")
            candidates = [self.now_ms + STEP_MS] + [arrival for arrival, *_ in self._wire]
            for timer in (self._model_timer_ms(), self._unit_timer_ms(), self._transport_timer_ms()):
                if timer is not None:
                    candidates.append(timer)
            step = max(1, min(candidates) - self.now_ms)
            self.now_ms += step
            self.stack.advance(step)  # usrsctp's timers due by now fire (and may send)
            for item in sorted(w for w in self._wire if w[0] <= self.now_ms):
                self._wire.remove(item)
                self._deliver(item[2], item[3])
            if (timer := self._model_timer_ms()) is not None and timer <= self.now_ms:
                self.model.handle_timeout(max(self.seconds, self.model.next_timeout()))
            if self.unit is not None:
                self._unit_sacks(self.unit.tick(self._tick()))
            if self.transport is not None:
                self._transport_records(self.transport.tick(self._tick()))
            self._pump()

    def settle(self, ms: int) -> None:
        """Let `ms` pass."""
        end = self.now_ms + ms
        self.run(lambda: self.now_ms >= end, within_ms=ms + STEP_MS)

    def close(self) -> None:
        """Leave usrsctp with nothing of this pair: ABORT what is still up, close the sockets, drop the address."""
        for sock in (self.sock, self.listening):
            if sock is not None and not sock.closed:
                try:
                    sock.abort()
                except UsrsctpError:
                    pass  # no association (any more)
                sock.close()
        self.conn.close()

    # -- what happened

    def chunks(self, direction: str, kind: type, include_lost: bool = True) -> list[tuple[int, object]]:
        return [(sent.time_ms, chunk) for sent in self.log if sent.direction == direction
                and (include_lost or not sent.lost) for chunk in sent.packet.chunks if isinstance(chunk, kind)]

    def messages(self) -> list[Message]:
        return [item for item in self.usrsctp_items if isinstance(item, Message)]

    def notifications(self, kind: type) -> list:
        return [item for item in self.usrsctp_items if isinstance(item, kind)]

    def model_received(self) -> list[DataReceived]:
        return [event for event in self.model_events if isinstance(event, DataReceived)]

    def up(self) -> bool:
        return (self.model is not None and self.model.state is AssociationState.ESTABLISHED
                and bool(self.notifications(AssocChange)))


@pytest.fixture
def pairs(usrsctp):
    """Make `Pair`s on the session's usrsctp stack; each is closed after the test."""
    made: list[Pair] = []

    def make(**kwargs) -> Pair:
        pair = Pair(usrsctp, **kwargs)
        made.append(pair)
        return pair

    yield make
    for pair in made:
        pair.close()


def established(pairs, model_initiates: bool, **kwargs) -> Pair:
    pair = pairs(model_initiates=model_initiates, **kwargs)
    pair.run(pair.up, within_ms=5_000)
    return pair


# ---------------------------------------------------------------- the binding


def test_struct_layouts_match_the_installed_header(usrsctp, tmp_path) -> None:
    """The ctypes structs of sim/usrsctp.py have the sizes the C compiler gives usrsctp.h's."""
    compiler = next((c for c in (os.environ.get("CC"), "cc", "gcc", "g++") if c and shutil.which(c)), None)
    if compiler is None or not os.path.exists("/usr/include/usrsctp.h"):
        pytest.skip("no C compiler or no /usr/include/usrsctp.h to check the layouts against")
    source = tmp_path / "sizes.c"
    source.write_text("#include <stdio.h>\n#include <usrsctp.h>\nint main(void) {\n" + "".join(
        f'  printf("{name} %zu\\n", sizeof(struct {name}));\n' for name in STRUCT_SIZES) + "  return 0;\n}\n")
    program = tmp_path / "sizes"
    subprocess.run([compiler, "-x", "c", str(source), "-o", str(program)], check=True, capture_output=True)
    output = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    assert dict((name, int(size)) for name, size in (line.split() for line in output.splitlines())) == STRUCT_SIZES


def test_a_missing_library_is_a_typed_error_naming_the_package() -> None:
    """Runs without usrsctp too: the error a test or a user meets where the library is not installed."""
    with pytest.raises(UsrsctpUnavailable, match=r"apt-get install libusrsctp-dev"):
        _load(["libusrsctp-not-installed.so.0"])


# ---------------------------------------------------------------- set-up, RFC 4960 5.1


def test_rfc4960_5_1_model_initiates(pairs) -> None:
    pair = established(pairs, model_initiates=True)
    # The four-way handshake on the wire, each packet with the tag 8.5 asks for.
    [(_, init)] = pair.chunks(TO_USRSCTP, InitChunk)
    [(_, init_ack)] = pair.chunks(TO_MODEL, InitAckChunk)
    [echo_packet] = [s.packet for s in pair.log if isinstance(s.packet.chunks[0], CookieEchoChunk)]
    [ack_packet] = [s.packet for s in pair.log if isinstance(s.packet.chunks[0], CookieAckChunk)]
    assert [s.direction for s in pair.log] == [TO_USRSCTP, TO_MODEL, TO_USRSCTP, TO_MODEL]
    assert pair.log[0].packet.verification_tag == 0  # 8.5.1 A
    assert pair.log[1].packet.verification_tag == init.initiate_tag
    assert echo_packet.verification_tag == init_ack.initiate_tag
    assert ack_packet.verification_tag == init.initiate_tag
    assert echo_packet.chunks[0].cookie == init_ack.state_cookie
    # usrsctp's INIT ACK offers PR-SCTP (Forward-TSN-Supported, type 0xC000, RFC 3758), which the model does not
    # know: the upper bits 11 say skip it and report it, in an ERROR chunk bundled with the COOKIE ECHO (RFC 4960
    # 3.2.1, 3.2.2); usrsctp reads that report as a remote error. Its other unknown parameters (ECN, AUTH,
    # Supported Extensions: upper bits 10) are skipped silently.
    assert any(p.param_type == 0xC000 for p in init_ack.parameters)
    [error] = [c for c in echo_packet.chunks if isinstance(c, ErrorChunk)]
    [cause] = error.causes
    assert cause.code == ErrorCauseCode.UNRECOGNIZED_PARAMETERS and cause.value[:2] == b"\xc0\x00"
    [remote] = pair.notifications(RemoteError)
    assert remote.cause == ErrorCauseCode.UNRECOGNIZED_PARAMETERS
    # Both sides up, with the same view of the streams (RFC 4960 5.1.1: each sends on no more streams than the
    # other accepts; the model offers 8 each way) and of DDP (RFC 5043 5.1, 11.1).
    assert pair.model.state is AssociationState.ESTABLISHED
    [up] = [e for e in pair.model_events if isinstance(e, AssociationEstablished)]
    assert (up.outbound_streams, up.inbound_streams, up.ddp_enabled) == (8, 8, True)
    assert init_ack.outbound_streams <= init.inbound_streams
    status = pair.sock.status()
    assert (status.state, status.outbound_streams, status.inbound_streams) == ("ESTABLISHED", 8, 8)
    [comm_up] = pair.notifications(AssocChange)
    assert (comm_up.state, comm_up.outbound_streams, comm_up.inbound_streams) == ("COMM_UP", 8, 8)
    assert pair.notifications(AdaptationIndication) == [AdaptationIndication(ADAPTATION_CODE_POINT_DDP)]
    assert pair.model.peer_tag == init_ack.initiate_tag and pair.model.local_tag == init.initiate_tag


def test_rfc4960_5_1_usrsctp_initiates(pairs) -> None:
    pair = established(pairs, model_initiates=False)
    assert [type(s.packet.chunks[0]) for s in pair.log] == [InitChunk, InitAckChunk, CookieEchoChunk, CookieAckChunk]
    assert [s.direction for s in pair.log] == [TO_MODEL, TO_USRSCTP, TO_MODEL, TO_USRSCTP]
    init, init_ack = pair.log[0].packet.chunks[0], pair.log[1].packet.chunks[0]
    assert pair.log[0].packet.verification_tag == 0 and pair.log[1].packet.verification_tag == init.initiate_tag
    assert pair.log[2].packet.verification_tag == init_ack.initiate_tag
    assert pair.log[3].packet.verification_tag == init.initiate_tag
    # The Listener's INIT ACK reports usrsctp's Forward-TSN-Supported back (RFC 4960 3.2.1 upper bits 11, 3.3.3).
    reported = [p.parameter.param_type for p in init_ack.parameters if isinstance(p, UnrecognizedParameter)]
    assert reported == [0xC000]
    assert init_ack.adaptation_code_point == ADAPTATION_CODE_POINT_DDP
    assert pair.model.state is AssociationState.ESTABLISHED and pair.model.ddp_enabled
    status = pair.sock.status()
    assert (status.state, status.outbound_streams, status.inbound_streams) == ("ESTABLISHED", 8, 8)
    assert [n.state for n in pair.notifications(AssocChange)] == ["COMM_UP"]
    assert pair.notifications(AdaptationIndication) == [AdaptationIndication(ADAPTATION_CODE_POINT_DDP)]
    assert status.mtu + 12 == PATH_MTU  # usrsctp's AF_CONN path: 1280-byte packets, as the model is configured


def test_rfc4960_5_2_1_both_sides_initiate_at_once(pairs) -> None:
    """The two INITs cross: each side, in COOKIE-WAIT, answers the other's INIT with an INIT ACK that carries
    its own INIT's Initiate Tag (5.2.1); both COOKIE ECHOs are answered (5.2.4) and one association results,
    the same on both sides, which carries data both ways."""
    pair = pairs(model_initiates=True, collide=True)
    pair.run(lambda: pair.up() and pair.sock.status().state == "ESTABLISHED", within_ms=5_000)
    [(t_model, model_init)] = pair.chunks(TO_USRSCTP, InitChunk)
    [(t_usrsctp, usrsctp_init)] = pair.chunks(TO_MODEL, InitChunk)
    assert t_model == t_usrsctp == 0
    [(_, model_ack)] = pair.chunks(TO_USRSCTP, InitAckChunk)
    [(_, usrsctp_ack)] = pair.chunks(TO_MODEL, InitAckChunk)
    assert model_ack.initiate_tag == model_init.initiate_tag and model_ack.initial_tsn == model_init.initial_tsn
    assert usrsctp_ack.initiate_tag == usrsctp_init.initiate_tag
    assert len(pair.chunks(TO_USRSCTP, CookieEchoChunk)) == len(pair.chunks(TO_MODEL, CookieEchoChunk)) == 1
    assert (pair.model.local_tag, pair.model.peer_tag) == (model_init.initiate_tag, usrsctp_init.initiate_tag)
    assert len([e for e in pair.model_events if isinstance(e, AssociationEstablished)]) == 1
    assert [n.state for n in pair.notifications(AssocChange)] == ["COMM_UP"]
    pair.model.send(0, PPID_DDP_SEGMENT, b"from the model")
    pair.sock.send(b"from usrsctp", PPID_DDP_SESSION_CONTROL, unordered=True)
    pair.run(lambda: pair.messages() and pair.model_received())
    assert [m.data for m in pair.messages()] == [b"from the model"]
    assert [(e.ppid, e.payload) for e in pair.model_received()] == [(PPID_DDP_SESSION_CONTROL, b"from usrsctp")]
    tags = {s.direction: s.packet.verification_tag for s in pair.log if isinstance(s.packet.chunks[0], DataChunk)}
    assert tags == {TO_USRSCTP: usrsctp_init.initiate_tag, TO_MODEL: model_init.initiate_tag}  # 8.5


USRSCTP_STALE_COOKIE_FIRST = (
    "usrsctp (0.9.5, and its master branch as of this writing) checks a State Cookie's lifespan in "
    "sctp_handle_cookie_echo before it looks for an existing association, so it answers a COOKIE ECHO of its "
    "established association whose cookie has aged past the lifespan with a Stale Cookie ERROR, where RFC 4960 "
    "5.2.4 step 3 (RFC 9260 5.2.4 too) says that when both tags match the cookie is valid however old. The model "
    "takes the ERROR in COOKIE-ECHOED as 5.2.6 says and sends a new INIT (same Initiate Tag, a Cookie "
    "Preservative); usrsctp, still established, answers it as 5.2.2 says, and the COOKIE ECHO that follows, "
    "its own new tag but the model's old one (5.2.4 table: no row), is silently discarded, until the model "
    "gives up on the second Stale Cookie ERROR. usrsctp's side is the one off the RFC."
)


@pytest.mark.xfail(strict=True, reason=USRSCTP_STALE_COOKIE_FIRST)
def test_rfc4960_5_2_4_a_late_cookie_echo_of_an_established_association_is_acknowledged(pairs) -> None:
    """Every COOKIE ACK is lost for longer than the State Cookie's lifespan (60 s): usrsctp is established
    since the first COOKIE ECHO, the model, in COOKIE-ECHOED, sends it again on each T1-cookie expiry (5.1 C,
    backing off 3, 6, 12, 24, 48 s) until one, with both tags matching the association (case D), arrives
    after the lifespan. RFC 4960 5.2.4 step 3: "If both Verification Tags in the State Cookie match the
    Verification Tags of the current association, consider the State Cookie valid (i.e., lifespan expired)
    even if the lifespan is exceeded", so it is answered with COOKIE ACK and the association is up on both
    sides. (The model's own handling of case D does not look at the lifespan.)"""
    pair = pairs(model_initiates=True)
    lifespan_ms = int(pair.model.config.cookie_lifetime * 1000)
    pair.drop = lambda direction, packet: (isinstance(packet.chunks[0], CookieAckChunk)
                                           and pair.now_ms <= lifespan_ms + DELAY_MS)
    pair.settle(lifespan_ms + DELAY_MS)
    assert pair.model.state is AssociationState.COOKIE_ECHOED and pair.chunks(TO_MODEL, CookieAckChunk)
    pair.run(lambda: pair.model.state is not AssociationState.COOKIE_ECHOED, within_ms=600_000)
    [(echoed_ms, _)] = [(t, c) for t, c in pair.chunks(TO_USRSCTP, CookieEchoChunk) if t > lifespan_ms][:1]
    answer = next(s.packet for s in pair.log if s.direction == TO_MODEL and s.time_ms > echoed_ms)
    assert pair.notifications(AssocChange)[0].state == "COMM_UP"  # usrsctp was up all along
    assert isinstance(answer.chunks[0], CookieAckChunk), answer.chunks
    assert pair.model.state is AssociationState.ESTABLISHED


# ---------------------------------------------------------------- data, RFC 4960 6


@dataclass(frozen=True)
class Outgoing:
    stream: int
    ppid: int
    unordered: bool
    payload: bytes


def workload(seed: int, count: int, largest: int) -> list[Outgoing]:
    """`count` messages of a DDP association's kinds: PPID 16 (DDP segment) and 17 (session control), RFC 5043
    5.2; unordered (U=1, RFC 5043 10) on streams 0 and 2..7, and ordered on stream 1 to check RFC 4960 6.6 too.
    Sizes run from 1 byte to `largest` (one unfragmented DATA chunk, RFC 5043 9), the edges first."""
    rng = random.Random(seed)
    sizes = [1, 2, 3, 4, 5, 515, 516, 517, largest, largest - 1]
    sizes += [rng.randrange(1, largest + 1) for _ in range(count - len(sizes))]
    out = []
    for index, size in enumerate(sizes[:count]):
        stream = rng.randrange(8)
        ppid = PPID_DDP_SESSION_CONTROL if index % 5 == 0 else PPID_DDP_SEGMENT
        out.append(Outgoing(stream, ppid, stream != 1, rng.randbytes(size)))
    return out


def exchange(pair: Pair, count: int, seed: int, within_ms: int = 60_000) -> tuple[list[Outgoing], list[Outgoing]]:
    """Send `count` messages each way at once and run until both sides have read them all."""
    to_usrsctp = workload(seed, count, pair.model.config.max_user_data)
    to_model = workload(seed + 1, count, pair.sock.status().fragmentation_point)
    for message in to_usrsctp:
        pair.model.send(message.stream, message.ppid, message.payload, unordered=message.unordered)
    for message in to_model:
        assert pair.sock.send(message.payload, message.ppid, message.stream, message.unordered) == len(message.payload)
    pair.run(lambda: len(pair.messages()) >= count and len(pair.model_received()) >= count, within_ms=within_ms)
    pair.settle(500)  # the last SACKs (delayed up to 200 ms, RFC 4960 6.2)
    return to_usrsctp, to_model


def check_delivery(pair: Pair, to_usrsctp: list[Outgoing], to_model: list[Outgoing]) -> None:
    """Every message arrived once, byte for byte, with its stream, PPID and U flag; stream 1 in order (6.6)."""
    got_usrsctp = [Outgoing(m.stream, m.ppid, m.unordered, m.data) for m in pair.messages()]
    got_model = [Outgoing(e.stream_id, e.ppid, e.unordered, e.payload) for e in pair.model_received()]
    assert all(m.complete for m in pair.messages())
    for sent, got in ((to_usrsctp, got_usrsctp), (to_model, got_model)):
        key = lambda m: (m.stream, m.ppid, m.unordered, m.payload)  # noqa: E731
        assert sorted(got, key=key) == sorted(sent, key=key)
        assert [m for m in got if m.stream == 1] == [m for m in sent if m.stream == 1]


def data_chunks(pair: Pair, direction: str) -> list[tuple[int, DataChunk]]:
    return pair.chunks(direction, DataChunk)


def retransmissions(pair: Pair, direction: str) -> list[tuple[int, int, int]]:
    """(TSN, first sent, sent again) for every DATA chunk put on the wire more than once."""
    first: dict[int, int] = {}
    again = []
    for time_ms, chunk in data_chunks(pair, direction):
        if chunk.tsn in first:
            again.append((chunk.tsn, first[chunk.tsn], time_ms))
        else:
            first[chunk.tsn] = time_ms
    return again


def acked_by_gap(sack: SackChunk, tsn: int) -> bool:
    return any(serial_lt(sack.cumulative_tsn_ack + start - 1, tsn, 32)
               and not serial_lt(sack.cumulative_tsn_ack + end, tsn, 32) for start, end in sack.gap_blocks)


def reported_missing(sack: SackChunk, tsn: int) -> bool:
    """The SACK shows `tsn` missing: not covered by the Cumulative TSN Ack or a gap block, below a gap block's
    end (RFC 4960 7.2.4's miss indication)."""
    if not serial_gt(tsn, sack.cumulative_tsn_ack, 32) or acked_by_gap(sack, tsn):
        return False
    return any(serial_gt(sack.cumulative_tsn_ack + end, tsn, 32) for _, end in sack.gap_blocks)


@pytest.mark.parametrize("model_initiates", [True, False], ids=["model-initiates", "usrsctp-initiates"])
def test_rfc4960_6_data_both_ways_without_loss(pairs, model_initiates: bool) -> None:
    pair = established(pairs, model_initiates=model_initiates)
    to_usrsctp, to_model = exchange(pair, 40, seed=7)
    check_delivery(pair, to_usrsctp, to_model)
    # The wire carries the PPIDs and U flags as sent (RFC 4960 3.3.1): for usrsctp's, through its socket API.
    for direction, sent in ((TO_USRSCTP, to_usrsctp), (TO_MODEL, to_model)):
        chunks = [chunk for _, chunk in data_chunks(pair, direction)]
        assert sorted((c.ppid, c.unordered, c.user_data) for c in chunks) == sorted(
            (m.ppid, m.unordered, m.payload) for m in sent)
        assert all(c.beginning and c.ending for c in chunks)  # never fragmented (RFC 5043 9)
    # Nothing lost, nothing sent twice: each side's SACKs (6.2) kept the other's T3-rtx from expiring (6.3).
    assert retransmissions(pair, TO_USRSCTP) == [] and retransmissions(pair, TO_MODEL) == []
    for direction in (TO_USRSCTP, TO_MODEL):
        assert all(not sack.gap_blocks for _, sack in pair.chunks(direction, SackChunk))
    # The last SACKs acknowledge every TSN (6.2.1): both sides' send queues ran dry.
    assert pair.model.outstanding_chunks == 0 and pair.sock.status().unacked == 0
    assert pair.chunks(TO_MODEL, SackChunk)[-1][1].cumulative_tsn_ack == data_chunks(pair, TO_USRSCTP)[-1][1].tsn
    assert pair.chunks(TO_USRSCTP, SackChunk)[-1][1].cumulative_tsn_ack == data_chunks(pair, TO_MODEL)[-1][1].tsn


@pytest.mark.parametrize("model_initiates, seed, loss", [(True, 3, 0.03), (False, 4, 0.05)],
                         ids=["model-initiates-3%", "usrsctp-initiates-5%"])
def test_rfc4960_6_2_6_3_7_2_data_both_ways_with_loss(pairs, model_initiates: bool, seed: int, loss: float) -> None:
    """Packets lost each way: each side's SACKs carry Gap Ack Blocks (6.2) that the other reads to retransmit
    (fast retransmit, 7.2.4; or T3-rtx, 6.3.3); every message still arrives once."""
    pair = established(pairs, model_initiates=model_initiates, seed=seed)
    pair.loss = loss
    to_usrsctp, to_model = exchange(pair, 150, seed=seed)
    check_delivery(pair, to_usrsctp, to_model)
    for sender, receiver in ((TO_USRSCTP, TO_MODEL), (TO_MODEL, TO_USRSCTP)):
        assert any(s.lost and s.direction == sender and any(isinstance(c, DataChunk) for c in s.packet.chunks)
                   for s in pair.log), f"{sender}: no DATA lost"
        again = retransmissions(pair, sender)
        assert again, f"{sender}: nothing retransmitted"
        sacks = pair.chunks(receiver, SackChunk, include_lost=False)
        assert any(sack.gap_blocks for _, sack in sacks), f"{receiver}: no Gap Ack Blocks"
        # Fast retransmit (7.2.4): the sender sent a TSN again as one of the receiver's SACKs arrived, that SACK
        # and at least two before it having reported the TSN missing (below a Gap Ack Block, not acknowledged).
        fast = [tsn for tsn, _first, resent in again
                if any(time_ms + DELAY_MS == resent and reported_missing(sack, tsn) for time_ms, sack in sacks)
                and sum(reported_missing(sack, tsn) for time_ms, sack in sacks if time_ms + DELAY_MS <= resent) >= 3]
        assert fast, f"{sender}: no retransmission driven by the peer's Gap Ack Blocks"


UNITS = [pytest.param(False, id="model"), pytest.param(True, id="gateware")]
"""The engine's units as their golden models, or as the gateware itself (`Pair.gateware`)."""


@pytest.mark.parametrize("loss", [0.0, 0.05], ids=["lossless", "5%"])
@pytest.mark.parametrize("gateware", UNITS)
def test_rfc4960_6_2_the_engines_acknowledgement_unit_sacks_usrsctps_data(pairs, loss: float, gateware: bool) -> None:
    """The receive engine's acknowledgement unit (model/engine/sack.py, the gateware's golden model; with
    `gateware`, hdl/rx/sack_unit.py itself, each SACK compared with its model's) SACKs what
    usrsctp sends, in the unit's bounds (64 TSNs past the Cumulative TSN Ack, 4 Gap Ack Blocks, 4 duplicates)
    and ticks: usrsctp delivers every message once, its window and timers kept going by those SACKs alone
    (the model's association sends none); under loss the unit's Gap Ack Blocks drive usrsctp's fast
    retransmissions (RFC 4960 7.2.4), and at the end usrsctp has nothing unacknowledged."""
    pair = established(pairs, model_initiates=True, seed=6, gateware=gateware)
    pair.hand_sacks_to_unit()
    pair.loss = loss
    to_model = workload(11, 120, pair.sock.status().fragmentation_point)
    for message in to_model:
        assert pair.sock.send(message.payload, message.ppid, message.stream, message.unordered) == len(message.payload)
    pair.run(lambda: len(pair.model_received()) >= len(to_model), within_ms=120_000)
    pair.run(lambda: pair.sock.status().unacked == 0, within_ms=10_000)
    check_delivery(pair, [], to_model)
    # Every SACK on the wire since the hand-over is one of the unit's (the association sends none).
    sacks = [(time, chunk) for time, chunk in pair.chunks(TO_USRSCTP, SackChunk) if time >= pair.unit_since_ms]
    assert len(sacks) == pair.unit_sent > 0
    sacks = [(time, chunk) for time, chunk in sacks if not any(  # those that arrived
        s.lost and chunk in s.packet.chunks and s.time_ms == time for s in pair.log)]
    new_tsns = list(dict.fromkeys(chunk.tsn for _, chunk in data_chunks(pair, TO_MODEL)))
    assert sacks[-1][1].cumulative_tsn_ack == new_tsns[-1]    # the last TSN usrsctp sent, all before it too
    # RFC 4960 6.2, 3.3.4: a SACK acknowledges only TSNs that arrived, by its Cumulative TSN Ack (every TSN up
    # to it) and its Gap Ack Blocks.
    arrived: dict[int, int] = {}
    for sent in pair.log:
        if sent.direction == TO_MODEL and not sent.lost:
            for chunk in sent.packet.chunks:
                if isinstance(chunk, DataChunk):
                    arrived.setdefault(chunk.tsn, sent.time_ms + DELAY_MS)
    for time_ms, sack in sacks:
        acknowledged = [(sack.cumulative_tsn_ack + offset) & 0xFFFFFFFF
                        for start, end in sack.gap_blocks for offset in range(start, end + 1)]
        if sack.cumulative_tsn_ack in arrived or acknowledged:
            acknowledged += [tsn for tsn in new_tsns if not serial_gt(tsn, sack.cumulative_tsn_ack, 32)]
        assert all(arrived.get(tsn, time_ms + 1) <= time_ms for tsn in acknowledged), sack
    assert all(len(s.gap_blocks) <= 4 and len(s.duplicate_tsns) <= 4 for _, s in sacks)
    if loss:
        again = retransmissions(pair, TO_MODEL)
        assert again and any(s.gap_blocks for _, s in sacks)
        fast = [tsn for tsn, _first, resent in again
                if sum(reported_missing(sack, tsn) for time_ms, sack in sacks if time_ms + DELAY_MS <= resent) >= 3]
        assert fast, "no retransmission driven by the unit's Gap Ack Blocks"
    else:
        assert retransmissions(pair, TO_MODEL) == []
    if gateware:
        pair.unit.close()


@pytest.mark.parametrize("loss", [0.0, 0.05], ids=["lossless", "5%"])
@pytest.mark.parametrize("gateware", UNITS)
def test_rfc4960_6_7_the_engines_transport_unit_sends_to_usrsctp(pairs, loss: float, gateware: bool) -> None:
    """The transmit engine's transport unit (model/engine/transport.py, the gateware's golden model; with
    `gateware`, hdl/tx/transport_unit.py itself, each record and row state compared with its model's) sends the
    model's DATA on usrsctp's SACKs alone: every message arrives once; under loss the unit retransmits, on
    usrsctp's Gap Ack Blocks (three miss indications, RFC 4960 7.2.4) or T3-rtx (6.3.3); the unit retires
    every TSN, the association learns it and shuts down (9.2); the association itself sends no DATA."""
    pair = established(pairs, model_initiates=True, seed=8, gateware=gateware)
    pair.hand_transport_to_unit()
    pair.loss = loss
    to_usrsctp = [Outgoing(m.stream, m.ppid, True, m.payload)     # DDP's chunks are unordered (RFC 5043 10)
                  for m in workload(13, 150, pair.model.config.max_user_data)]
    for message in to_usrsctp:
        pair.send_through_unit(message)
    pair.run(lambda: len(pair.messages()) >= len(to_usrsctp), within_ms=180_000)
    last_tsn = (pair.model.next_tsn - 1) & 0xFFFFFFFF
    pair.run(lambda: pair.transport.state(0).cumulative_tsn_ack == last_tsn, within_ms=30_000)
    check_delivery(pair, to_usrsctp, [])
    assert pair.model.outstanding_chunks == 0 and pair.transport_stopped == []
    # Every DATA chunk on the wire is one the unit's engine sent: first transmissions in TSN order.
    new_tsns = list(dict.fromkeys(chunk.tsn for _, chunk in data_chunks(pair, TO_USRSCTP)))
    assert new_tsns == sorted(pair.transport_packets, key=lambda tsn: (tsn - new_tsns[0]) & 0xFFFFFFFF)
    sacks = pair.chunks(TO_MODEL, SackChunk, include_lost=False)
    again = retransmissions(pair, TO_USRSCTP)
    if loss:
        assert again and any(sack.gap_blocks for _, sack in sacks)
        fast = [tsn for tsn, _first, resent in again
                if sum(reported_missing(sack, tsn) for time_ms, sack in sacks if time_ms + DELAY_MS <= resent) >= 3]
        assert fast, "no retransmission driven by usrsctp's Gap Ack Blocks"
    else:
        assert again == []
    pair.model.shutdown(pair.seconds)
    pair.run(lambda: pair.model.is_closed, within_ms=30_000)
    assert pair.notifications(ShutdownEvent)
    if gateware:
        pair.transport.close()


@pytest.mark.parametrize("receiver", ["usrsctp", "model"])
def test_rfc4960_6_1_a_receiver_that_stops_reading_closes_its_window(pairs, receiver: str) -> None:
    """The receiving application stops reading: the receiver's a_rwnd falls below a message (6.2), the sender
    then keeps one DATA chunk in flight as a window probe, sent again as T3-rtx expires with the RTO doubling
    (6.1 A, 6.3.3 E2), and sends nothing new; when the application reads again, a SACK opens the window (6.2)
    and the rest follows, every message once."""
    pair = established(pairs, model_initiates=True, model_overrides={"manual_receive_window": receiver == "model"})
    payloads = [bytes([i]) * 1200 for i in range(200)]  # more than either receive window
    if receiver == "usrsctp":
        sender, acker = TO_USRSCTP, TO_MODEL
        pair.usrsctp_reads = False
        for payload in payloads:
            pair.model.send(0, PPID_DDP_SEGMENT, payload)
    else:
        sender, acker = TO_MODEL, TO_USRSCTP
        for payload in payloads:
            pair.sock.send(payload, PPID_DDP_SEGMENT, unordered=True)
    pair.settle(30_000)
    resumed = pair.now_ms
    assert pair.chunks(acker, SackChunk)[-1][1].a_rwnd < 1200
    # The probes: one TSN, again and again, the gaps doubling from at least RTO.Min; nothing else meanwhile.
    tail = [(t, chunk.tsn) for t, chunk in data_chunks(pair, sender)]
    probe = tail[-1][1]
    first = next(index for index, (_, tsn) in enumerate(tail) if tsn == probe)
    assert {tsn for _, tsn in tail[first:]} == {probe} and len(tail) - first >= 4
    gaps = [b[0] - a[0] for a, b in zip(tail[first:], tail[first + 1:])]
    assert gaps[0] >= RTO_MIN_MS and all(abs(later - 2 * earlier) <= STEP_MS for earlier, later in zip(gaps, gaps[1:]))
    if receiver == "usrsctp":
        pair.usrsctp_reads = True
        pair.run(lambda: len(pair.messages()) == len(payloads))
        got = [m.data for m in pair.messages()]
    else:
        consumed = 0

        def read_and_consume() -> bool:  # the model's user gives back the buffer of what it was handed
            nonlocal consumed
            delivered = sum(len(e.payload) for e in pair.model_received())
            pair.model.consume(delivered - consumed)
            consumed = delivered
            return len(pair.model_received()) == len(payloads)

        pair.run(read_and_consume)
        got = [e.payload for e in pair.model_received()]
    assert sorted(got) == sorted(payloads)
    # New data only after a SACK reopened the window (6.1 B).
    [first_new] = [t for t, chunk in data_chunks(pair, sender) if t >= resumed and chunk.tsn != probe][:1]
    assert any(sack.a_rwnd >= 1200 for t, sack in pair.chunks(acker, SackChunk) if resumed <= t < first_new)


# ---------------------------------------------------------------- shutdown, RFC 4960 9.2; ABORT, 9.1


@pytest.mark.parametrize("model_initiates", [True, False], ids=["model-initiates", "usrsctp-initiates"])
def test_rfc4960_9_2_model_shuts_down_after_its_data_is_acknowledged(pairs, model_initiates: bool) -> None:
    pair = established(pairs, model_initiates=model_initiates)
    payloads = [bytes([i]) * (100 * i + 1) for i in range(1, 9)]
    for payload in payloads:
        pair.model.send(0, PPID_DDP_SEGMENT, payload)
    pair.model.shutdown(pair.seconds)  # SHUTDOWN-PENDING: the SHUTDOWN waits for the SACK of all DATA
    pair.run(lambda: pair.model.is_closed and any(isinstance(n, AssocChange) and n.state == "SHUTDOWN_COMP"
                                                   for n in pair.usrsctp_items))
    assert [m.data for m in pair.messages()] == payloads
    [(shutdown_ms, shutdown)] = pair.chunks(TO_USRSCTP, ShutdownChunk)
    last_data_ms, last_data = data_chunks(pair, TO_USRSCTP)[-1]
    acked_ms = min(t for t, sack in pair.chunks(TO_MODEL, SackChunk) if sack.cumulative_tsn_ack == last_data.tsn)
    assert last_data_ms < acked_ms < shutdown_ms
    # SHUTDOWN, SHUTDOWN ACK, SHUTDOWN COMPLETE (T=0, the peer's tag: 8.5.1 C), nothing after.
    tail = [(s.direction, type(s.packet.chunks[0])) for s in pair.log if s.time_ms >= shutdown_ms]
    assert tail == [(TO_USRSCTP, ShutdownChunk), (TO_MODEL, ShutdownAckChunk), (TO_USRSCTP, ShutdownCompleteChunk)]
    complete = pair.log[-1].packet
    assert not complete.chunks[0].tag_reflected and complete.verification_tag == pair.model.peer_tag
    assert any(isinstance(e, AssociationClosed) for e in pair.model_events)
    assert pair.notifications(ShutdownEvent) == [ShutdownEvent()]  # usrsctp's user learnt of the SHUTDOWN
    assert [n.state for n in pair.notifications(AssocChange)] == ["COMM_UP", "SHUTDOWN_COMP"]
    assert pair.sock.eof  # recvv reads 0: the peer's end of the stream
    with pytest.raises(UsrsctpError):
        pair.sock.status()  # no association any more


@pytest.mark.parametrize("model_initiates", [True, False], ids=["model-initiates", "usrsctp-initiates"])
def test_rfc4960_9_2_usrsctp_shuts_down_after_its_data_is_acknowledged(pairs, model_initiates: bool) -> None:
    pair = established(pairs, model_initiates=model_initiates)
    payloads = [bytes([i]) * (150 * i) for i in range(1, 9)]
    for payload in payloads:
        pair.sock.send(payload, PPID_DDP_SEGMENT, unordered=True)
    pair.sock.shutdown()
    pair.run(lambda: pair.model.is_closed and any(isinstance(n, AssocChange) and n.state == "SHUTDOWN_COMP"
                                                   for n in pair.usrsctp_items))
    assert sorted(e.payload for e in pair.model_received()) == sorted(payloads)
    assert [type(e) for e in pair.model_events if not isinstance(e, (DataReceived, AssociationEstablished))] == [
        PeerShutdownStarted, AssociationClosed]
    [(shutdown_ms, shutdown)] = pair.chunks(TO_MODEL, ShutdownChunk)
    # usrsctp's SHUTDOWN acknowledges the model's (no) DATA: Cumulative TSN Ack = the model's Initial TSN - 1.
    init_tsn = (pair.chunks(TO_USRSCTP, InitChunk) or pair.chunks(TO_USRSCTP, InitAckChunk))[0][1].initial_tsn
    assert shutdown.cumulative_tsn_ack == (init_tsn - 1) & 0xFFFFFFFF
    last_data_ms, last_data = data_chunks(pair, TO_MODEL)[-1]
    assert last_data_ms <= shutdown_ms
    tail = [(s.direction, type(s.packet.chunks[0])) for s in pair.log if s.time_ms >= shutdown_ms
            and not isinstance(s.packet.chunks[0], (DataChunk, SackChunk))]
    assert tail == [(TO_MODEL, ShutdownChunk), (TO_USRSCTP, ShutdownAckChunk), (TO_MODEL, ShutdownCompleteChunk)]
    assert pair.log[-1].packet.verification_tag == pair.model.local_tag
    # All of usrsctp's DATA was acknowledged before the model's SHUTDOWN ACK (9.2).
    [(ack_ms, _)] = pair.chunks(TO_USRSCTP, ShutdownAckChunk)
    assert any(sack.cumulative_tsn_ack == last_data.tsn for t, sack in pair.chunks(TO_USRSCTP, SackChunk)
               if t <= ack_ms)


def test_rfc4960_9_1_model_aborts(pairs) -> None:
    pair = established(pairs, model_initiates=True)
    pair.model.abort(pair.seconds, "done here")
    pair.run(lambda: any(isinstance(n, AssocChange) and n.state == "COMM_LOST" for n in pair.usrsctp_items))
    [abort_packet] = [s.packet for s in pair.log if isinstance(s.packet.chunks[0], AbortChunk)]
    assert not abort_packet.chunks[0].tag_reflected and abort_packet.verification_tag == pair.model.peer_tag
    [cause] = abort_packet.chunks[0].causes
    assert cause.code == ErrorCauseCode.USER_INITIATED_ABORT
    assert pair.model.is_closed
    with pytest.raises(UsrsctpError):
        pair.sock.status()
    pair.settle(5_000)
    assert pair.log[-1].packet is abort_packet  # usrsctp sent nothing after it (9.1: no reply to an ABORT)


def test_rfc4960_9_1_usrsctp_aborts_with_a_reason(pairs) -> None:
    pair = established(pairs, model_initiates=False)
    pair.sock.abort(b"usrsctp says goodbye")
    pair.run(lambda: pair.model.is_closed)
    [aborted] = [e for e in pair.model_events if isinstance(e, AssociationAborted)]
    [cause] = aborted.causes
    assert (cause.code, cause.value) == (ErrorCauseCode.USER_INITIATED_ABORT, b"usrsctp says goodbye")  # 3.3.10.12
    abort_packet = pair.log[-1].packet
    assert isinstance(abort_packet.chunks[0], AbortChunk) and abort_packet.verification_tag == pair.model.local_tag
    assert [n.state for n in pair.notifications(AssocChange)] == ["COMM_UP", "COMM_LOST"]
    pair.settle(5_000)
    assert pair.log[-1].packet is abort_packet and pair.model.data_to_send(pair.seconds) == []


def closed_on_both_sides(pair: Pair) -> bool:
    return pair.model is not None and pair.model.is_closed and any(
        isinstance(n, AssocChange) and n.state == "SHUTDOWN_COMP" for n in pair.usrsctp_items)


WHOLE_LIFE_CASES = [
    # (the model opens, seed, chunks the seed has lost, the side that answers a SHUTDOWN ACK out of the blue)
    (True, 28, {InitChunk, InitAckChunk, ShutdownCompleteChunk}, TO_MODEL),
    (True, 26, {InitAckChunk, CookieEchoChunk, CookieAckChunk}, None),
    (True, 5, {ShutdownChunk, ShutdownAckChunk, ShutdownCompleteChunk}, TO_MODEL),
    (False, 32, {InitChunk, InitAckChunk, CookieAckChunk, ShutdownAckChunk, ShutdownCompleteChunk}, TO_USRSCTP),
    (False, 12, {CookieEchoChunk}, None),
    (False, 20, {InitAckChunk, ShutdownChunk, ShutdownAckChunk, ShutdownCompleteChunk}, TO_USRSCTP),
]


@pytest.mark.parametrize("model_initiates, seed, lost_kinds, out_of_the_blue", WHOLE_LIFE_CASES,
                         ids=[f"{'model' if case[0] else 'usrsctp'}-initiates-{case[1]}" for case in WHOLE_LIFE_CASES])
def test_rfc4960_a_whole_association_with_a_fifth_of_the_packets_lost(
        pairs, model_initiates: bool, seed: int, lost_kinds: set, out_of_the_blue: str | None) -> None:
    """20 % of the packets lost each way from the first INIT to the last SHUTDOWN COMPLETE: the association
    comes up, carries every message once and is closed on both sides, the side that did not open it closing
    it. The seeds are chosen so that handshake chunks are lost (T1-init, T1-cookie: 5.1, 5.3; a duplicate
    COOKIE ECHO: 5.2.4 D), shutdown chunks too (T2-shutdown, 9.2), and a SHUTDOWN COMPLETE, so that the side
    still in SHUTDOWN-ACK-SENT sends its SHUTDOWN ACK again and the other, which has closed, answers it as out
    of the blue: SHUTDOWN COMPLETE with the T bit (8.4 rule 5, 8.5.1 C)."""
    pair = pairs(model_initiates=model_initiates, seed=seed, loss=0.2)
    pair.run(pair.up, within_ms=600_000)
    to_usrsctp, to_model = exchange(pair, 30, seed=seed, within_ms=600_000)
    check_delivery(pair, to_usrsctp, to_model)
    if model_initiates:
        pair.sock.shutdown()
    else:
        pair.model.shutdown(pair.seconds)
    pair.run(lambda: closed_on_both_sides(pair), within_ms=600_000)
    assert not any(isinstance(e, AssociationAborted) for e in pair.model_events)
    assert not any(isinstance(n, AssocChange) and n.state == "COMM_LOST" for n in pair.usrsctp_items)
    assert lost_kinds <= {type(c) for s in pair.log if s.lost for c in s.packet.chunks}
    assert retransmissions(pair, TO_USRSCTP) and retransmissions(pair, TO_MODEL)
    reflected = [s.direction for s in pair.log
                 if isinstance(s.packet.chunks[0], ShutdownCompleteChunk) and s.packet.chunks[0].tag_reflected]
    assert set(reflected) == ({out_of_the_blue} if out_of_the_blue else set())


# ---------------------------------------------------------------- heartbeats, RFC 4960 8.3


@pytest.mark.parametrize("model_initiates", [True, False], ids=["model-initiates", "usrsctp-initiates"])
def test_rfc4960_8_3_each_side_answers_the_others_heartbeats(pairs, model_initiates: bool) -> None:
    """An idle association: each side sends HEARTBEAT every HB.interval + RTO, jittered by half an RTO (30 s
    and an RTO between RTO.Min and RTO.Initial, RFC 4960 15; usrsctp's defaults too), and the other answers
    each with a HEARTBEAT ACK carrying its Heartbeat Information unchanged (8.3); nothing fails."""
    pair = established(pairs, model_initiates=model_initiates, usrsctp_heartbeats=True)
    pair.settle(100_000)
    for sender, answerer in ((TO_USRSCTP, TO_MODEL), (TO_MODEL, TO_USRSCTP)):
        beats = pair.chunks(sender, HeartbeatChunk)
        answers = pair.chunks(answerer, HeartbeatAckChunk)
        assert len(beats) >= 2, sender
        assert [chunk.info for _, chunk in answers] == [chunk.info for _, chunk in beats]
        assert all(answer - beat == DELAY_MS for (beat, _), (answer, _) in zip(beats, answers))
        gaps = [later - earlier for (earlier, _), (later, _) in zip(beats, beats[1:])]
        assert all(30_000 + RTO_MIN_MS // 2 <= gap <= 30_000 + 3 * 3_000 // 2 + STEP_MS for gap in gaps), gaps
    assert pair.model.state is AssociationState.ESTABLISHED and pair.sock.status().state == "ESTABLISHED"
    assert not any(s.lost for s in pair.log) and all(
        isinstance(s.packet.chunks[0], (HeartbeatChunk, HeartbeatAckChunk)) for s in pair.log[4:])


# ---------------------------------------------------------------- checksums, RFC 4960 6.8


def test_rfc4960_6_8_each_side_drops_a_packet_with_a_bad_crc32c(pairs) -> None:
    """One bit flipped in a DATA packet each way: the receiver discards it (no SACK for it), the sender's T3-rtx
    sends it again, and the data arrives once."""
    pair = established(pairs, model_initiates=True)
    corrupted: list[str] = []

    def corrupt(direction: str, packet: SctpPacket) -> bool:
        if direction in corrupted or not any(isinstance(c, DataChunk) for c in packet.chunks):
            return False
        corrupted.append(direction)
        return True

    pair.corrupt = corrupt
    pair.model.send(0, PPID_DDP_SEGMENT, b"model's bytes")
    pair.sock.send(b"usrsctp's bytes", PPID_DDP_SEGMENT, unordered=True)
    pair.run(lambda: pair.messages() and pair.model_received(), within_ms=10_000)
    assert set(corrupted) == {TO_MODEL, TO_USRSCTP}
    assert sorted(s.direction for s in pair.log if not s.packet.checksum_ok) == sorted(corrupted)
    assert [m.data for m in pair.messages()] == [b"model's bytes"]
    assert [e.payload for e in pair.model_received()] == [b"usrsctp's bytes"]
    for direction in (TO_USRSCTP, TO_MODEL):
        [(tsn, first, again)] = retransmissions(pair, direction)
        assert again - first >= RTO_MIN_MS  # T3-rtx: the corrupted packet drew no SACK at all
