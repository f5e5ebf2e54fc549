"""Association.receive_offloaded: a packet a receive offload engine split (RFC 5043 over the engine).

The expectation is the association's own answer to the whole packet (its
RFC 4960 6.2 behaviour is tested in test_association): fed the same packets,
one association given the DATA chunks and one given only their TSNs and
lengths (`PlacedData`) must send the same SACKs (cumulative TSN, gap blocks,
duplicate TSNs), count the same, and deliver nothing of the placed data.
"""

import copy
from dataclasses import replace

from model.sctp.association import PlacedData
from model.sctp.events import DataReceived
from model.sctp.packet import PPID_DDP_SEGMENT, DataChunk, SackChunk, SctpPacket
from tests.model.sctp.test_association import established_link, initial_tsn


def offloaded(packet: SctpPacket) -> tuple[bytes, list[PlacedData]]:
    """What the engine passes up of `packet` (every chunk but DATA) and the DATA it places."""
    kept = b"".join(c.encode() for c in packet.chunks if not isinstance(c, DataChunk))
    return kept, [PlacedData(c.tsn, len(c.user_data)) for c in packet.chunks if isinstance(c, DataChunk)]


def test_rfc4960_6_2_placed_data_is_acknowledged_like_delivered_data():
    link = established_link()
    base = initial_tsn(link)
    for i in range(4):  # the initial cwnd's worth (RFC 4960 7.2.1), one chunk per packet
        link.client.send(0, PPID_DDP_SEGMENT, str(i).encode() * 1400)
    packets = [SctpPacket.decode(p) for p in link.client.data_to_send(link.now)]
    assert len(packets) == 4
    whole, split = link.server, copy.deepcopy(link.server)
    by_tsn = {p.chunks[0].tsn: p for p in packets}
    # TSN base+1 lost until the end, base+2 duplicated: a gap, then a duplicate, then the gap filled
    arrivals = [by_tsn[base], by_tsn[base + 2], by_tsn[base + 2], by_tsn[base + 3], by_tsn[base + 1]]
    now = link.now
    sacks = {"whole": [], "split": []}

    def collect() -> None:
        for name, association in (("whole", whole), ("split", split)):
            sacks[name] += [c for p in association.data_to_send(now) for c in SctpPacket.decode(p).chunks
                            if isinstance(c, SackChunk)]

    for packet in arrivals:
        now += 0.001
        whole.receive(packet.encode(), now)
        split.receive_offloaded(*offloaded(packet), now)
        collect()
    now += 0.2  # the delayed SACK of the last packet (RFC 4960 6.2)
    whole.handle_timeout(now)
    split.handle_timeout(now)
    collect()
    assert sacks["split"] == sacks["whole"]
    assert SackChunk(base, 65536, ((2, 2),), ()) in sacks["split"]
    assert SackChunk(base, 65536, ((2, 2),), (base + 2,)) in sacks["split"]
    assert sacks["split"][-1].cumulative_tsn_ack == base + 3
    assert split.statistics.data_chunks_received == whole.statistics.data_chunks_received == 4
    assert split.statistics.duplicate_tsns_received == 1
    assert [e for e in whole.next_events() if isinstance(e, DataReceived)]
    assert not [e for e in split.next_events() if isinstance(e, DataReceived)]


def test_control_chunks_passed_up_are_processed_with_the_placed_data():
    """A SACK bundled with DATA (RFC 4960 6.10) reaches the association through the exception stream: the
    association's own DATA is acknowledged by it while the peer's placed DATA counts for the next SACK."""
    link = established_link()
    link.server.send(0, PPID_DDP_SEGMENT, b"x" * 100)
    link.run(condition=lambda: link.client.outstanding_chunks == 0 and not link._wire)
    assert link.server.outstanding_chunks == 1  # the client's SACK is delayed: nothing of ours acknowledged yet
    link.client.send(0, PPID_DDP_SEGMENT, b"y" * 100)
    (packet,) = [SctpPacket.decode(p) for p in link.client.data_to_send(link.now + 0.001)]
    assert {type(c) for c in packet.chunks} == {SackChunk, DataChunk}
    chunks, placed = offloaded(packet)
    link.server.receive_offloaded(chunks, placed, link.now + 0.002)
    assert link.server.outstanding_chunks == 0
    assert link.server.statistics.data_chunks_received == 1


def test_rfc9260_6_2_a_packet_with_the_i_bit_is_sacked_at_once_whole_or_placed():
    """RFC 9260 3.3.1 and 6.2 (RFC 7053 4.2): the lone packet that would wait for the delayed SACK is SACKed at
    once when its DATA chunk has the I bit set, whether the association takes the chunk or its engine placed it
    (`PlacedData.immediate`, from the ack record)."""
    link = established_link()
    base = initial_tsn(link)
    link.client.send(0, PPID_DDP_SEGMENT, b"x" * 100)
    packet, = [SctpPacket.decode(p) for p in link.client.data_to_send(link.now)]
    marked = SctpPacket(packet.src_port, packet.dst_port, packet.verification_tag,
                        [replace(packet.chunks[0], immediate=True)])
    for flagged, expect_sack in ((packet, False), (marked, True)):
        whole, split = copy.deepcopy(link.server), copy.deepcopy(link.server)
        whole.receive(flagged.encode(), link.now + 0.001)
        kept, placed = offloaded(flagged)
        split.receive_offloaded(kept, [PlacedData(p.tsn, p.length, flagged.chunks[0].immediate) for p in placed],
                                link.now + 0.001)
        for association in (whole, split):
            sacks = [c for p in association.data_to_send(link.now + 0.001) for c in SctpPacket.decode(p).chunks
                     if isinstance(c, SackChunk)]
            assert sacks == ([SackChunk(base, sacks[0].a_rwnd, (), ())] if expect_sack else [])
