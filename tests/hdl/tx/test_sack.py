"""hdl.tx.engine.TxEngine sending the receive engine's SACKs (``sacks``: records of hdl.rx.sack_unit) between
its DDP segments: each one SCTP packet of one SACK chunk with the association row's verification tag and no
TSN (RFC 4960 6.2, 3.3.4), byte for byte the model's encoding (model.engine.sack.SackRecord.chunk, the
SctpPacket codec), read by scapy, at every Gap Ack Block and duplicate count the unit sends, ahead of the
local work that waits (RFC 4960 6.2: a SACK is due at once)."""

import random

import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from scapy.layers.sctp import SCTP, SCTPChunkSACK

from abi.tx import WorkOpcode
from model.engine.sack import SackRecord
from abi.tx import TsnOpcode
from tests.hdl.tx.harness import (PAGE_END, Association, TsnRequest, Work, check, engine_model_run, model_messages,
                                  random_memory, simulate)

WIDTHS = [8, 64]


def sctp_of(frame: bytes) -> SCTP:
    """scapy's SCTP packet of a frame, over IPv4 or UDP (RFC 6951: scapy does not bind the port)."""
    ether = Ether(frame)
    return SCTP(bytes(ether[UDP].payload)) if UDP in ether else ether[SCTP]


def sack_records(rng: random.Random, association: int, count: int) -> list[SackRecord]:
    """SACKs with 0..4 Gap Ack Blocks and 0..4 duplicates, in every combination the unit sends."""
    records = []
    for index in range(count):
        gaps, duplicates = index % 5, (index // 5) % 5
        starts = sorted(rng.sample(range(2, 60, 3), gaps))
        blocks = tuple((start, start + rng.randint(0, 1)) for start in starts)
        records.append(SackRecord(association, rng.getrandbits(32), blocks,
                                  tuple(rng.getrandbits(32) for _ in range(duplicates)), rng.getrandbits(32)))
    return records


@pytest.mark.parametrize("width", WIDTHS)
def test_sacks_between_segments_match_the_model(width):
    rng = random.Random(width)
    associations = [Association(0, 1480, rng.getrandbits(32)),
                    Association(1, 1468, rng.getrandbits(32), udp=True, peer_udp_port=40000, tag=0x0BADCAFE,
                                local_port=5001, peer_port=6001)]
    memory = random_memory(rng, width)
    works = [Work(WorkOpcode.RDMA_WRITE, index % 2, 0, PAGE_END - 0x2000 + 7 * index, rng.randrange(1, 4000),
                  stag=0x100 + index, to=rng.getrandbits(64), wr_id=index) for index in range(6)]
    sacks = sack_records(rng, 0, 13) + sack_records(rng, 1, 12)
    rng.shuffle(sacks)
    order = list(works)
    for sack in sacks:                    # each SACK goes out between two messages
        order.insert(rng.randrange(len(order) + 1), sack)
    sacks = [message for message in order if isinstance(message, SackRecord)]
    run = check(width, associations, {(0, 0): 1, (1, 0): 1}, works, memory, sacks=sacks, order=order,
                one_at_a_time=True)
    decoded = [packet[SCTPChunkSACK] for packet in map(sctp_of, run.frames) if SCTPChunkSACK in packet]
    assert [(d.cumul_tsn_ack, d.a_rwnd, d.n_gap_ack, d.n_dup_tsn) for d in decoded] == \
        [(s.cumulative_tsn_ack, s.a_rwnd, len(s.gap_blocks), len(s.duplicate_tsns)) for s in sacks]
    # The counters a host paces by: SACK frames, and the frames of its requests (the DATA ones, by scapy).
    assert run.sacks_sent == len(decoded)
    assert run.request_frames == len(run.frames) - len(decoded) > 0
    assert [d.gap_ack_list for d in decoded] == [[f"{a}:{b}" for a, b in s.gap_blocks] for s in sacks]
    assert [list(d.dup_tsn_list) for d in decoded] == [list(s.duplicate_tsns) for s in sacks]


def test_a_sack_never_waits_for_the_window():
    """A Write held back by the window (LIMIT: its first chunk only, RFC 4960 6.1 A, B) does not hold back
    the SACKs: they leave while its other chunks wait (RFC 4960 6.2: at once). Two engines each waiting for
    the other's SACK to open its window would otherwise wait for ever."""
    rng = random.Random(3)
    associations = [Association(0, 1480, rng.getrandbits(32))]
    memory = random_memory(rng, 8)
    works = [Work(WorkOpcode.RDMA_WRITE, 0, 0, PAGE_END - 0x2000, 3000, stag=0x100, to=0, wr_id=1)]
    sacks = sack_records(rng, 0, 3)
    first = associations[0].next_tsn
    requests = [TsnRequest(TsnOpcode.LIMIT, 0, first)]
    run = simulate(8, associations, {(0, 0): 1}, works, memory, 4, tsn_requests=requests, tsn_after_frames=[0],
                   acknowledge_after=None, work_delay=50, sacks=sacks, sack_after_frames=[1, 1, 1])
    model = engine_model_run(associations, {(0, 0): 1}, memory, [*works, *sacks], after_frames=[0, 1, 1, 1],
                             tsn_requests=requests, tsn_after_frames=[0])
    expected = model_messages(associations, {(0, 0): 1}, [*works, *sacks], memory)
    data_frames, sack_frames = expected[0], [frames[0] for frames in expected[1:]]
    assert run.frames == model.frames == [data_frames[0], *sack_frames]   # the Write's other two wait
