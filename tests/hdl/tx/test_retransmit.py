"""hdl.tx.engine.TxEngine's retransmission ring and completions (s_axis_tsn, m_axis_completion).

The host's SCTP decides; the engine resends. A RESEND of a TSN still in the
ring must put the very frame of that TSN back on the wire, byte for byte as
the model sent it the first time (RFC 4960 6.3.3 E3, 7.2.4: the same DATA
chunk; its payload read again from host memory); a RESEND of a TSN never
sent, already acknowledged, or beyond the ring is refused, once, in order. A
work request (or session-control message) completes only once an ACK
covers its last DATA chunk (RFC 5041 5.4, Data Source), one completion per
request, in TSN order; Read Requests and Read Responses have none. A row
with ``ring_tsns`` chunks unacknowledged sends no more until an ACK.
"""

import random
from itertools import accumulate

import pytest

from abi.tx import CompletionStatus, TsnOpcode, WorkOpcode
from tests.hdl.tx.harness import (
    PAGE_END, Association, Control, TsnRequest, Work, check, data_tsn, engine_model_run, model_messages,
    random_memory, run_against_model, simulate,
)
from tests.hdl.tx.test_control import session_messages


def numbered(sources, associations) -> list[tuple[int, int, object]]:
    """(association, TSN, message) of each expected frame, the TSNs counted as RFC 4960 6.1 numbers DATA
    chunks: one per segment or session-control message, from the row's first, mod 2**32."""
    tsn = {a.index: a.next_tsn for a in associations}
    out = []
    for message in sources:
        out.append((message.association, tsn[message.association], message))
        tsn[message.association] = (tsn[message.association] + 1) & 0xFFFFFFFF
    return out


def completes(message) -> bool:
    """RFC 5041 5.4: what the engine completes at the ACK of its last chunk (not Read Requests)."""
    return isinstance(message, Control) or message.opcode is not WorkOpcode.RDMA_READ_REQUEST


def scenario(rng: random.Random):
    associations = [
        Association(0, 1480, 0xFFFFFFFB, tag=rng.getrandbits(32)),
        Association(1, 1468, rng.getrandbits(32), udp=True, peer_udp_port=40000, peer_ip="10.0.0.9",
                    local_port=5001, peer_port=6001, tag=rng.getrandbits(32), peer_mac=bytes.fromhex("02000000000c")),
    ]
    first_ssn = {(0, 0): 1, (1, 1): 1}
    works = [Work(opcode, *rng.choice(list(first_ssn)), PAGE_END - rng.randrange(3000), size, stag=5, to=size,
                  wr_id=rng.getrandbits(32))
             for opcode in WorkOpcode for size in (0, 700, 3000)]
    controls = session_messages(rng, 0, (0, 2), PAGE_END - 6000) + session_messages(rng, 1, (1,), PAGE_END - 5000)
    for control in controls:
        control.wr_id = rng.getrandbits(32)
    order = works + controls
    rng.shuffle(order)
    works, controls = ([m for m in order if isinstance(m, kind)] for kind in (Work, Control))
    return associations, first_ssn, works, controls, order


@pytest.mark.parametrize("width", [8, pytest.param(64, marks=pytest.mark.slow)])
def test_resend_acknowledge_and_complete(width):
    """After every frame has left and nothing is acknowledged: RESENDs of TSNs of both rows, and of TSNs the
    ring does not hold (the next one, the one before the first); an ACK of half of row 0; RESENDs of an
    acknowledged TSN and of the next; then ACKs of everything."""
    rng = random.Random(width)
    associations, first_ssn, works, controls, order = scenario(rng)
    memory = random_memory(rng, width, ar_ready=0.7, latency=(1, 10), r_gap=0.2)
    # The TSNs of the model's frames, as the requests below need them.
    per_message = model_messages(associations, first_ssn, order, memory)
    expected = [frame for frames in per_message for frame in frames]
    sources = [message for message, frames in zip(order, per_message) for _ in frames]
    tsns = numbered(sources, associations)
    by_tsn = {(association, tsn): frame for (association, tsn, _), frame in zip(tsns, expected)}
    row_tsns = {row: [tsn for association, tsn, _ in tsns if association == row] for row in (0, 1)}
    half = row_tsns[0][len(row_tsns[0]) // 2]
    resend = [TsnRequest(TsnOpcode.RESEND, association, tsn) for association, tsn, _ in rng.sample(tsns, 6)]
    outside = [TsnRequest(TsnOpcode.RESEND, 0, (row_tsns[0][-1] + 1) & 0xFFFFFFFF),
               TsnRequest(TsnOpcode.RESEND, 0, (row_tsns[0][0] - 1) & 0xFFFFFFFF),
               TsnRequest(TsnOpcode.RESEND, 1, (row_tsns[1][0] + 64) & 0xFFFFFFFF)]
    acknowledged = [TsnRequest(TsnOpcode.ACK, 0, half), TsnRequest(TsnOpcode.RESEND, 0, half),
                    TsnRequest(TsnOpcode.RESEND, 0, (half + 1) & 0xFFFFFFFF)]
    finish = [TsnRequest(TsnOpcode.ACK, 0, row_tsns[0][-1]), TsnRequest(TsnOpcode.ACK, 1, row_tsns[1][-1])]
    requests = resend + outside + acknowledged + finish
    again = resend + acknowledged[2:]
    last_tsn = {}
    for association, tsn, message in tsns:
        last_tsn[id(message)] = (association, tsn)
    done = [message for association, tsn, message in tsns if last_tsn[id(message)] == (association, tsn)
            and completes(message)]
    first_ack = [m for m in done if last_tsn[id(m)][0] == 0
                 and (last_tsn[id(m)][1] - row_tsns[0][0]) % (1 << 32) <= (half - row_tsns[0][0]) % (1 << 32)]
    rest = [m for m in done if m not in first_ack]
    rest = [m for m in rest if last_tsn[id(m)][0] == 0] + [m for m in rest if last_tsn[id(m)][0] == 1]

    run, model, _ = run_against_model(width, associations, first_ssn, works, memory, controls=controls, order=order,
                                      one_at_a_time=True, acknowledge_after=None, tsn_requests=requests,
                                      tsn_after_frames=[len(expected)] * len(requests), extra_frames=len(again),
                                      completion_count=len(done))
    assert model == expected
    assert run.frames[:len(expected)] == expected
    assert run.frames[len(expected):] == [by_tsn[(r.association, r.tsn)] for r in again]
    assert run.tsn_refused == outside + acknowledged[1:2]
    assert [(wr_id, opcode, association, status) for wr_id, opcode, association, status, _ in run.completions] == [
        (m.wr_id, int(m.opcode), m.association, CompletionStatus.SUCCESS) for m in first_ack + rest]
    acks_before = [acks for *_, acks in run.completions]
    assert all(acks >= 1 for acks in acks_before[:len(first_ack)]), "a completion before its ACK"
    assert all(acks >= 2 for acks in acks_before[len(first_ack):]), "a completion before its ACK"
    # The transmit engine's model, paced alike, sends, refuses and completes the same.
    before = list(accumulate([0, *map(len, per_message)]))[:-1]
    engine = engine_model_run(associations, first_ssn, memory, order, after_frames=before, tsn_requests=requests,
                              tsn_after_frames=[len(expected)] * len(requests))
    assert run.frames == engine.frames
    assert [(r.opcode, r.association, r.tsn) for r in run.tsn_refused] == engine.tsn_refused
    assert [completion[:4] for completion in run.completions] == engine.completions


def test_a_full_ring_waits_for_acks():
    """ring_tsns = 8 and a peer acknowledging each chunk 400 cycles after it left: a 40-segment Write and a
    Send still go out byte for byte, never more than 8 chunks above the last ACK, the ring full at times,
    and each completes once acknowledged."""
    rng = random.Random(1)
    memory = random_memory(rng, 8)
    works = [Work(WorkOpcode.RDMA_WRITE, 0, 0, PAGE_END - 2000, 40 * 32, stag=3, to=0, wr_id=11),
             Work(WorkOpcode.SEND, 0, 0, PAGE_END - 300, 100, wr_id=12)]
    run = check(8, [Association(0, 46, 0xFFFFFFF0)], {(0, 0): 1}, works, memory, ring_tsns=8,
                acknowledge_after=400, completion_count=2)
    assert run.most_unacknowledged == 8
    assert [(wr_id, opcode) for wr_id, opcode, *_ in run.completions] == [(11, WorkOpcode.RDMA_WRITE),
                                                                          (12, WorkOpcode.SEND)]


def serial_at_most(tsn: int, limit: int) -> bool:
    """tsn <= limit in serial number arithmetic (RFC 1982, as RFC 4960 1.6 uses it)."""
    return (limit - tsn) % (1 << 32) < (1 << 31)


def test_send_limit_holds_new_chunks_not_resends():
    """RFC 4960 6.1 A, B: the host's SCTP sets how far new DATA chunks may go (LIMIT) and the engine sends
    up to that TSN and no further. Row 1 is allowed its first three chunks, row 0 none (a limit below its
    first TSN, across the TSN wrap); once row 1's three have left, its first chunk is resent while it is held
    and row 0 is allowed everything (its messages wait behind row 1's, in order); then row 1 is allowed its
    last. Every new chunk must leave after a LIMIT that covers it, each row's frames byte for byte the
    model's in TSN order, the resend the very first frame again, and every request completes at the final
    ACKs."""
    rng = random.Random(5)
    memory = random_memory(rng, 8)
    associations = [Association(0, 1480, 0, tag=rng.getrandbits(32)),
                    Association(1, 500, 0xFFFFFFFE, udp=True, peer_udp_port=40000, local_port=5001,
                                peer_port=6001, tag=rng.getrandbits(32))]
    first_ssn = {(0, 0): 1, (1, 2): 1}
    works = [Work(WorkOpcode.SEND, 1, 2, PAGE_END - 2100, 2000, wr_id=2),
             Work(WorkOpcode.RDMA_WRITE, 0, 0, PAGE_END - 5000, 5000, stag=9, to=0x10, wr_id=1),
             Work(WorkOpcode.SEND, 0, 0, PAGE_END - 100, 100, wr_id=3),
             Work(WorkOpcode.RDMA_WRITE, 1, 2, PAGE_END - 7, 0, stag=4, to=0, wr_id=4)]
    per_message = model_messages(associations, first_ssn, works, memory)
    rows = {0: [], 1: []}
    for work, frames in zip(works, per_message):
        rows[work.association] += frames
    assert [len(rows[0]), len(rows[1])] == [5, 6]   # 4 + 1 and 5 + 1 DDP segments (RFC 5041 5.2)
    first = {a.index: a.next_tsn for a in associations}

    def tsn(row, n):
        return (first[row] + n) & 0xFFFFFFFF

    requests = [TsnRequest(TsnOpcode.LIMIT, 1, tsn(1, 2)), TsnRequest(TsnOpcode.LIMIT, 0, tsn(0, -1)),
                TsnRequest(TsnOpcode.RESEND, 1, tsn(1, 0)), TsnRequest(TsnOpcode.LIMIT, 0, tsn(0, 40)),
                TsnRequest(TsnOpcode.LIMIT, 1, tsn(1, 5)),
                TsnRequest(TsnOpcode.ACK, 0, tsn(0, 4)), TsnRequest(TsnOpcode.ACK, 1, tsn(1, 5))]
    after = [0, 0, 3, 3, 4, 12, 12]
    run = simulate(8, associations, first_ssn, works, memory, 12, tsn_requests=requests, tsn_after_frames=list(after),
                   acknowledge_after=None, completion_count=4, work_delay=50)
    engine = engine_model_run(associations, first_ssn, memory, works, tsn_requests=requests, tsn_after_frames=after)
    assert run.frames == engine.frames, "the RTL and the transmit engine's model differ"
    assert [completion[:4] for completion in run.completions] == engine.completions

    limits = {0: None, 1: None}
    taken = list(run.tsn_taken)
    seen, resent = {0: [], 1: []}, []
    for frame, cycle in zip(run.frames, run.frame_cycles):
        while taken and taken[0][0] < cycle:
            request = taken.pop(0)[1]
            if request.opcode is TsnOpcode.LIMIT:
                limits[request.association] = request.tsn
        port, number = data_tsn(frame)
        row = {a.local_port: a.index for a in associations}[port]
        if number in seen[row]:
            resent.append((row, number, frame))
            continue
        assert limits[row] is not None and serial_at_most(number, limits[row]), \
            f"row {row} TSN {number:#x} left beyond its limit {limits[row]}"
        seen[row].append(number)
        assert frame == rows[row][len(seen[row]) - 1], f"row {row} frame {len(seen[row]) - 1}"
    assert seen == {row: [tsn(row, n) for n in range(len(rows[row]))] for row in (0, 1)}
    assert resent == [(1, tsn(1, 0), rows[1][0])]
    assert run.tsn_refused == []
    assert sorted(wr_id for wr_id, *_ in run.completions) == [1, 2, 3, 4]
