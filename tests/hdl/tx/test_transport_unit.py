"""hdl.tx.transport_unit.TransportUnit in Amaranth's simulator against its golden model
(model/engine/transport.py, itself tested against RFC 4960 6.1-6.3, 7.2 and 8.1 in
tests/model/engine/test_transport.py): the same records in the same order for the same inputs and ticks,
and the same state after every input, over a lossy, reordering, reneging path with stale, truncated and
malformed SACKs, timeouts, Fast Recovery, idle periods, SHUTDOWNs, association failure and a protocol
violation."""

import random

import pytest
from amaranth.sim import Simulator

from abi.tx import RetransmitCause as RtlCause
from abi.tx import TransportOpcode
from hdl.tx.transport_unit import TransportUnit
from model.engine.transport import Limit, Retransmission
from model.engine.transport import TransportUnit as ModelTransportUnit
from sim.rtl_units import rtl_row_fields, transport_record_fields, transport_state_fields

ASSOCIATIONS = 3
GAP_BLOCKS = 4
_MASK = 0xFFFFFFFF


class Peer:
    """One association's far end: the TSNs it holds (some lost on the way, some reneged), the SACKs it sends."""

    def __init__(self, rng: random.Random, initial_tsn: int, loss: float):
        self.rng, self.loss = rng, loss
        self.cumulative = (initial_tsn - 1) & _MASK
        self.held: set[int] = set()          # offsets from `cumulative` received past it
        self.duplicates = 0

    def receive(self, tsn: int) -> None:
        if self.rng.random() < self.loss:
            return
        offset = (tsn - self.cumulative) & _MASK
        if offset == 0 or offset >= 1 << 31 or offset in self.held:
            self.duplicates += 1
            return
        self.held.add(offset)
        while 1 in self.held:
            self.held = {held - 1 for held in self.held if held != 1}
            self.cumulative = (self.cumulative + 1) & _MASK

    def renege(self) -> None:
        if self.held:
            self.held.discard(self.rng.choice(sorted(self.held)))

    def sack(self) -> tuple[int, tuple[tuple[int, int], ...], tuple[int, ...]]:
        blocks, offsets = [], sorted(self.held)
        for offset in offsets:
            if blocks and blocks[-1][1] == offset - 1:
                blocks[-1][1] = offset
            else:
                blocks.append([offset, offset])
        duplicates, self.duplicates = (self.cumulative,) * min(self.duplicates, 7), 0
        return self.cumulative, tuple(map(tuple, blocks)), duplicates


def scenario(seed: int, ring_tsns: int, events: int = 2000):
    """Inputs made against the model as it goes (a new chunk only up to its LIMIT), with the model's records
    and row states after each: [(input, records, {association: state})]."""
    rng = random.Random(seed)
    model = ModelTransportUnit(ASSOCIATIONS, ring_tsns=ring_tsns, gap_blocks=GAP_BLOCKS)
    steps, now, peers, limits, next_tsn, sacks_sent, chunk_bytes = [], 0, {}, {}, {}, {}, {}

    def run(event, records):
        for record in records:
            if isinstance(record, Limit):
                limits[record.association] = record.tsn
            elif isinstance(record, Retransmission):
                peers[record.association].receive(record.tsn)
        states = {association: transport_state_fields(model.state(association)) for association in peers}
        steps.append((event, [transport_record_fields(record) for record in records], states))

    for association in range(ASSOCIATIONS):
        initial = 0xFFFFFFF0 if association == 0 else rng.randrange(1 << 32)   # the TSNs wrap (RFC 4960 1.6)
        mtu = rng.choice([300, 1480])
        peer_a_rwnd = rng.choice([3000, 20000, 1 << 20])
        # Small RTO values in ticks, so timeouts, back-off and failure come within the run; association 2
        # fails after 2 expiries in a row.
        parameters = dict(mtu=mtu, rto_initial=rng.randint(2, 6), rto_min=1, rto_max=rng.randint(12, 40),
                          max_retrans=2 if association == 2 else 8, max_burst=rng.choice([2, 4]))
        peers[association] = Peer(rng, initial, loss=[0.02, 0.08, 0.3][association])
        next_tsn[association], sacks_sent[association], chunk_bytes[association] = initial, [], mtu - 28
        event = ("reset", association, initial, peer_a_rwnd, parameters)
        run(event, model.reset(association, initial, peer_a_rwnd, **parameters))

    for _ in range(events):
        association = rng.randrange(ASSOCIATIONS)
        peer, state = peers[association], model.state(association)
        choice = rng.random()
        if state.failed:
            choice = 0.95                                         # only ticks and SACKs reach a failed row
        if choice < 0.6 and next_tsn[association] != (limits[association] + 1) & _MASK:
            full = chunk_bytes[association]       # mostly full chunks, so the flight fills cwnd
            tsn, size = next_tsn[association], full if rng.random() < 0.8 else rng.randint(1, full)
            model.sent(association, tsn, size, now)
            next_tsn[association] = (tsn + 1) & _MASK
            peer.receive(tsn)
            run(("sent", association, tsn, size), [])
        elif choice < 0.85:
            if rng.random() < 0.05:
                peer.renege()
            cumulative, blocks, duplicates = peer.sack()
            a_rwnd = max(0, 30000 - 1000 * len(blocks)) if rng.random() < 0.8 else 0
            if rng.random() < 0.05:
                blocks += ((5, 2), (0, 3), (40000, 40001))[rng.randrange(3)],   # malformed, or past the chunks sent
            sacks_sent[association].append((cumulative, a_rwnd, blocks, duplicates))
            if rng.random() < 0.1 and len(sacks_sent[association]) > 3:
                cumulative, a_rwnd, blocks, duplicates = rng.choice(sacks_sent[association][-4:])   # reordered
            event = ("sack", association, cumulative, a_rwnd, blocks, len(duplicates))
            run(event, model.sack(association, cumulative, a_rwnd, blocks, duplicates, now))
        elif choice < 0.87:
            event = ("shutdown", association, peer.cumulative)
            run(event, model.shutdown(association, peer.cumulative, now))
        else:
            for _ in range(rng.choice([1, 1, 2, 5])):
                now += 1
                run(("tick",), model.tick(now))
    # Association 2's peer falls silent: its T3-rtx expires past Association.Max.Retrans (8.1).
    if next_tsn[2] == (model.state(2).cumulative_tsn_ack + 1) & _MASK and not model.state(2).failed:
        tsn = next_tsn[2]
        model.sent(2, tsn, 100, now)
        run(("sent", 2, tsn, 100), [])
    while not model.state(2).failed:
        now += 1
        run(("tick",), model.tick(now))
    # A SACK acknowledging a TSN never sent: the host aborts (the unit stops the row).
    live = [association for association in range(ASSOCIATIONS) if not model.state(association).failed]
    association = live[0]
    bogus = (model.state(association).highest_tsn_sent + 3) & _MASK
    run(("sack", association, bogus, 1000, (), 0), model.sack(association, bogus, 1000, (), (), now))
    return steps


def rtl_run(steps, ring_tsns: int, seed: int):
    """Replay the inputs on the unit; its records per input and the rows' states after each."""
    dut = TransportUnit(ASSOCIATIONS, ring_tsns=ring_tsns, gap_blocks=GAP_BLOCKS)
    rng = random.Random(seed)
    results = []

    def state_of(ctx, association):
        ctx.set(dut.peek, association)
        return ctx.get(dut.state)

    async def settle(ctx, records):
        """Cycles until the unit is idle, taking its records under random back-pressure."""
        while True:
            ready = rng.random() < 0.7
            ctx.set(dut.records.ready, ready)
            if ctx.get(dut.records.valid) and ready:
                payload = ctx.get(dut.records.payload)
                records.append((payload.opcode, payload.association, payload.tsn, payload.first_tsn,
                                payload.cause, payload.error_count))
            elif ctx.get(dut.idle) and not ctx.get(dut.records.valid):
                return
            await ctx.tick()

    async def put(ctx, stream, payload, records):
        ctx.set(stream.payload, payload)
        ctx.set(stream.valid, 1)
        while True:
            taken = ctx.get(stream.ready)
            ctx.set(dut.records.ready, 0)
            await ctx.tick()
            if taken:
                break
        ctx.set(stream.valid, 0)
        await settle(ctx, records)

    async def driver(ctx):
        written = set()
        for event, _, _ in steps:
            records = []
            kind = event[0]
            if kind == "reset":
                _, association, initial, peer_a_rwnd, p = event
                written.add(association)
                await put(ctx, dut.resets, {
                    "association": association, "initial_tsn": initial, "peer_a_rwnd": peer_a_rwnd,
                    "mtu": p["mtu"], "chunk_bytes": p["mtu"] - 28, "rto_initial": p["rto_initial"],
                    "rto_min": p["rto_min"], "rto_max": p["rto_max"], "max_retrans": p["max_retrans"],
                    "max_burst": p["max_burst"]}, records)
            elif kind == "sent":
                _, association, tsn, size = event
                await put(ctx, dut.sent, {"association": association, "tsn": tsn, "size": size,
                                          "sent_tick": ctx.get(dut.now)}, records)
            elif kind == "sack":
                _, association, cumulative, a_rwnd, blocks, duplicate_count = event
                gaps = [{"start": start & 0xFFFF, "end": end & 0xFFFF} for start, end in blocks[:GAP_BLOCKS]]
                gaps += [{"start": 0, "end": 0}] * (GAP_BLOCKS - len(gaps))
                await put(ctx, dut.sacks, {"association": association, "cumulative_tsn_ack": cumulative,
                                           "a_rwnd": a_rwnd, "gap_count": len(blocks), "gaps": gaps,
                                           "duplicate_count": duplicate_count}, records)
            elif kind == "shutdown":
                await put(ctx, dut.sacks, {"association": event[1], "shutdown": 1,
                                           "cumulative_tsn_ack": event[2]}, records)
            else:
                ctx.set(dut.tick, 1)
                await ctx.tick()
                ctx.set(dut.tick, 0)
                await settle(ctx, records)
            states = {}
            for association in sorted(written):
                row = state_of(ctx, association)
                states[association] = rtl_row_fields(row)
            results.append((records, states))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.run()
    return results


@pytest.mark.parametrize("ring_tsns, seed", [(64, 1), (16, 2), (16, 3)], ids=["ring64", "ring16-a", "ring16-b"])
def test_rtl_makes_the_models_records_and_keeps_its_state(ring_tsns, seed):
    steps = scenario(seed, ring_tsns)
    expected = [records for _, records, _ in steps]
    opcodes = {record[0] for records in expected for record in records}
    causes = {record[4] for records in expected for record in records if record[0] == TransportOpcode.RESEND}
    # The run reaches every decision: fast and timeout retransmissions, failure and the violation, slow
    # start's growth past a row's initial cwnd (7.2.1) and Fast Recovery.
    assert opcodes == set(TransportOpcode) and causes == {RtlCause.FAST, RtlCause.TIMEOUT}
    rows = [[row_states[a] for _, _, row_states in steps if a in row_states] for a in range(ASSOCIATIONS)]
    assert any(max(state[5] for state in row) > row[0][5] for row in rows)
    assert any(state[9] is not None for row in rows for state in row)
    got = rtl_run(steps, ring_tsns, seed)
    for step, (event, records, states) in enumerate(steps):
        assert got[step][0] == records, f"step {step} {event}: records"
        assert got[step][1] == states, f"step {step} {event}: state"
