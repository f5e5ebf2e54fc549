"""Association.send_offloaded: DATA chunks a transmit offload engine builds and sends (RFC 5043 over the engine).

The expectation is the association's own sending (its RFC 4960 6.1, 6.3.3
and 7.2.4 behaviour is tested in test_association): over the same lossy link,
an association whose chunks an engine sends on its requests (LIMIT, RESEND,
ACK) must put exactly the packets on the wire, at the same times, that the
association sending those chunks itself does, when neither bundles DATA
(each chunk fills its packet). The engine here is the test's: it keeps each
chunk's bytes by TSN and builds the packet the way RFC 4960 3.3.1 lays it out.
"""

import random
from dataclasses import dataclass, field

import pytest

from model.sctp.association import EngineRequestKind
from model.sctp.events import DataReceived
from model.sctp.packet import PPID_DDP_SEGMENT, DataChunk, SctpPacket, serial_le
from model.sctp.state import InvalidStreamError, PayloadSizeError
from tests.model.sctp.test_association import Link, established_link

MESSAGES = 120


@dataclass
class ChunkEngine:
    """Sends the chunks it was given, by TSN, as the association asks."""
    link: Link
    chunks: dict = field(default_factory=dict)   # TSN -> (stream, payload)
    next_new: int | None = None
    acked: int | None = None
    last_queued: int | None = None
    resent: int = 0

    def queue(self, tsn: int, stream_id: int, payload: bytes) -> None:
        self.chunks[tsn] = (stream_id, payload)
        self.last_queued = tsn
        if self.next_new is None:
            self.next_new = tsn

    def packet(self, tsn: int) -> bytes:
        stream_id, payload = self.chunks[tsn]
        client = self.link.client
        return SctpPacket(client.config.local_port, client.config.peer_port, client.peer_tag,
                          (DataChunk(tsn, stream_id, 0, PPID_DDP_SEGMENT, payload, unordered=True),)).encode()

    def run(self, requests) -> list[bytes]:
        packets = []
        for request in requests:
            if request.kind is EngineRequestKind.LIMIT:
                while serial_le(self.next_new, request.tsn, 32):
                    packets.append(self.packet(self.next_new))
                    self.next_new = (self.next_new + 1) & 0xFFFFFFFF
            elif request.kind is EngineRequestKind.RESEND:
                assert request.tsn in self.chunks, f"a resend of TSN {request.tsn} after its ACK"
                packets.append(self.packet(request.tsn))
                self.resent += 1
            else:
                assert self.acked is None or serial_le(self.acked, request.tsn, 32)
                self.acked = request.tsn
                for tsn in [t for t in self.chunks if serial_le(t, request.tsn, 32)]:
                    del self.chunks[tsn]
        return packets


class OffloadedLink(Link):
    engine: ChunkEngine | None = None

    def client_packets(self) -> list[bytes]:
        return super().client_packets() + self.engine.run(self.client.engine_requests())


def lossy(link: Link, seed: int):
    """6% of packets lost, the rest delayed by up to 4 ms (reordered); nothing gets through from 0.1 s to 0.5 s
    after the association is up, so T3-rtx expires (RFC 4960 6.3.3) as well as fast retransmits (7.2.4)."""
    rng, start = random.Random(seed), link.now

    def fate(direction, packet):
        lost = rng.random() < 0.06 or 0.1 <= link.now - start < 0.5
        return [] if lost else [rng.uniform(0.0, 0.004)]
    return fate


def run(offloaded: bool, seed: int) -> tuple[Link, ChunkEngine | None]:
    link = established_link()
    engine = None
    if offloaded:   # the same association, its packets now joined by the engine's
        link.__class__ = OffloadedLink
        link.engine = engine = ChunkEngine(link)
    link.fate = lossy(link, seed)
    rng = random.Random(seed + 100)
    size = link.client.config.max_user_data
    for index in range(MESSAGES):
        payload = rng.randbytes(rng.choice((size, size, rng.randint(size // 2 + 1, size))))   # never two in a packet
        stream_id = index % 2
        if offloaded:
            tsn = link.client.send_offloaded(stream_id, PPID_DDP_SEGMENT, len(payload))
            engine.queue(tsn, stream_id, payload)
        else:
            link.client.send(stream_id, PPID_DDP_SEGMENT, payload)
        if index % 10 == 9:
            link.run(until=link.now + 0.02)
    link.run(condition=lambda: not link.client.outstanding_chunks)
    return link, engine


def test_rfc4960_6_1_offloaded_chunks_go_on_the_wire_as_the_association_sends_its_own():
    for seed in (1, 2):
        software, _ = run(False, seed)
        offloaded, engine = run(True, seed)
        wire = [(s.time, s.direction, s.packet) for s in software.log]
        assert [(s.time, s.direction, s.packet) for s in offloaded.log] == wire
        stats = software.client.statistics
        assert stats.fast_retransmitted and stats.retransmitted_by_timeout, "the run retransmits both ways"
        assert engine.resent == stats.fast_retransmitted + stats.retransmitted_by_timeout
        assert engine.chunks == {} and engine.acked == engine.last_queued   # all retired by the ACKs
        received = [e.payload for e in offloaded.events_b if isinstance(e, DataReceived)]
        assert len(received) == MESSAGES


def test_offloaded_data_is_checked_like_data():
    link = established_link()
    with pytest.raises(PayloadSizeError):
        link.client.send_offloaded(0, PPID_DDP_SEGMENT, link.client.config.max_user_data + 1)
    with pytest.raises(PayloadSizeError):
        link.client.send_offloaded(0, PPID_DDP_SEGMENT, 0)
    with pytest.raises(InvalidStreamError):
        link.client.send_offloaded(link.client.outbound_streams, PPID_DDP_SEGMENT, 10)
