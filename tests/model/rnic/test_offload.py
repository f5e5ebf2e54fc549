"""OffloadRnic: the SoftRnic's control plane over the receive engine's records (model.engine.rx as the engine).

Expectations from the RFCs: the RTR is the initiator's first DDP segment
(RFC 6581 9) and reaches the responder's session without being placed;
a session's MSNs start at 1 on every queue (RFC 5041 4.3), so a stream used
again must start its engine queues afresh; untagged buffers are consumed in
MSN order (RFC 5041 5.3); a Send with Invalidate revokes the STag for
further placement (RFC 5040 5.3, RFC 5041 7.2 Invalid STag).
"""

import random

import pytest

from model.ddp.memory import Access, SparseMemory
from model.engine.config import RegionEntry
from model.errors import DdpError
from model.rnic.events import ReceiveCompletion, RdmapTerminated, RtrArrived, SessionEstablished, StreamReleased
from model.rnic.link import Link, LinkConfig, Side
from model.rnic.offload import ASSOCIATION_INDEX, ModelEngine, OffloadRnic
from model.engine.rx import association_row
from model.rnic.pair import IPS, MACS, HostPair, host_config
from model.ddp.negotiation import LocalResources, RtrType

RESOURCES = LocalResources(ird=4, ord=4, peer_to_peer=True, rtr_types=(RtrType.WRITE,))
REGION = 0x200000
ALL = Access.REMOTE_WRITE | Access.REMOTE_READ | Access.LOCAL_WRITE


def offload_pair(link: LinkConfig | None = None) -> HostPair:
    hosts = {}
    for side in Side:
        memory = SparseMemory()
        hosts[side] = OffloadRnic(host_config(side, resources=RESOURCES, streams=4), memory,
                                  random.Random(7 + (side is Side.B)), ModelEngine(MACS[side], IPS[side], memory))
    pair = HostPair(hosts, Link(link))
    pair.connect()
    pair.open_stream(0)
    return pair


def engine(pair: HostPair, side: Side):
    return pair.hosts[side].engine.model


def test_rfc6581_9_the_rtr_reaches_the_session_from_its_record_and_is_not_placed():
    pair = offload_pair()
    assert pair.seen(Side.B, RtrArrived)
    responder = engine(pair, Side.B)
    assert responder.counters.delivered > 0 and responder.memory.writes == []
    assert responder.sinks[(0, 0)].delivery_point == 2  # the row starts after the RTR (DDP-SSN 1)


def test_rfc5041_5_3_more_receives_than_the_engine_holds_complete_in_msn_order():
    """Receives beyond the engine's posted buffers wait in the host and are posted as earlier ones complete: a
    sender that keeps within the posted buffers (here a round of 8 Sends at a time) finds every one."""
    pair = offload_pair(LinkConfig(loss=0.02, reordering=0.05, duplication=0.02, seed=5))
    a, b = pair.a, pair.b
    rounds, per_round = 3, b.buffers_per_queue
    count = rounds * per_round
    for index in range(count):
        b.post_recv(0, REGION + index * 2048, 2048)
    payloads = [bytes([index]) * (100 + index) for index in range(count)]
    for index, payload in enumerate(payloads):
        a.memory.write(REGION + index * 2048, payload)
        a.post_send(0, REGION + index * 2048, len(payload))
        if (index + 1) % per_round == 0:
            pair.run_until(lambda: pair.count(Side.B, ReceiveCompletion) == index + 1)
    received = pair.of(Side.B, ReceiveCompletion)
    assert [(r.address, r.length) for r in received] == [(REGION + i * 2048, len(p)) for i, p in enumerate(payloads)]
    for index, payload in enumerate(payloads):
        assert b.memory.read(REGION + index * 2048, len(payload)) == payload


def test_rfc5041_7_2_a_send_past_the_buffers_posted_to_the_engine_has_no_buffer():
    """Nine small Sends bundled in one packet (RFC 4960 6.10) meet the engine before any completes: the ninth
    finds no buffer posted to it, Invalid MSN - no buffer available (DDP 0x2/0x02), though the host holds one."""
    pair = offload_pair()
    a, b = pair.a, pair.b
    for index in range(b.buffers_per_queue + 1):
        b.post_recv(0, REGION + index * 64, 64)
        a.post_send(0, REGION, 8)
    pair.run_until(lambda: pair.seen(Side.A, RdmapTerminated))
    (terminated,) = pair.of(Side.A, RdmapTerminated)
    assert tuple(terminated.terminate.number) == DdpError.NO_BUFFER.number
    assert terminated.terminate.ddp_header.msn == b.buffers_per_queue + 1
    assert pair.count(Side.B, ReceiveCompletion) == b.buffers_per_queue


def test_rfc5041_4_3_a_stream_used_again_starts_its_msns_at_1():
    pair = offload_pair()
    a, b = pair.a, pair.b
    for session in range(2):
        b.post_recv(0, REGION, 64)
        a.memory.write(REGION, b"session %d" % session)
        a.post_send(0, REGION, 9)
        pair.run_until(lambda: pair.count(Side.B, ReceiveCompletion) == session + 1)
        a.terminate_stream(0)
        pair.run_until(lambda: pair.count(Side.A, StreamReleased) == session + 1
                       and pair.count(Side.B, StreamReleased) == session + 1)
        assert b.memory.read(REGION, 9) == b"session %d" % session
        if session == 0:
            a.open_stream(0)
            pair.run_until(lambda: pair.count(Side.A, SessionEstablished) == 2 and pair.count(Side.B, RtrArrived) == 2)
    assert not pair.seen(Side.B, RdmapTerminated)


def test_rfc5040_5_3_send_with_invalidate_revokes_the_stag_in_the_engine():
    pair = offload_pair()
    a, b = pair.a, pair.b
    target = b.register_memory(REGION, 4096, ALL)
    b.post_recv(0, REGION + 8192, 64)
    a.post_send(0, REGION, 0, invalidate_stag=target)
    pair.run_until(lambda: pair.seen(Side.B, ReceiveCompletion))
    assert pair.of(Side.B, ReceiveCompletion)[0].invalidated_stag == target
    a.memory.write(REGION, b"late")
    a.post_write(0, target, 0, REGION, 4)
    pair.run_until(lambda: pair.seen(Side.A, RdmapTerminated))
    (terminated,) = pair.of(Side.A, RdmapTerminated)
    assert tuple(terminated.terminate.number) == DdpError.INVALID_STAG.number  # RFC 5041 7.2: 0x1/0x00
    assert b.memory.read(REGION, 4) != b"late"
    assert engine(pair, Side.B).counters.delivered > 0


def registered_again(host: OffloadRnic, times: int) -> list[int]:
    """A region registered and deregistered `times` times over: its STags in order."""
    stags = []
    for _ in range(times):
        stags.append(host.register_memory(REGION, 4096, ALL))
        host.deregister_memory(stags[-1])
    return stags


def assert_refused_and_not_placed(pair: HostPair, stag: int) -> None:
    """A's RDMA Write with `stag` into B's REGION: an Invalid STag (RFC 5041 7.2: 0x1/0x00), nothing placed."""
    pair.a.memory.write(REGION, b"late")
    pair.a.post_write(0, stag, 0, REGION, 4)
    pair.run_until(lambda: pair.seen(Side.A, RdmapTerminated))
    (terminated,) = pair.of(Side.A, RdmapTerminated)
    assert tuple(terminated.terminate.number) == DdpError.INVALID_STAG.number
    assert pair.b.memory.read(REGION, 4) != b"late"


def test_rfc5042_5_1_a_row_registered_again_never_takes_its_last_key():
    """A region row registered again gets a fresh key, never the one before it: the STag a peer may still
    hold for the deregistered region is invalid for the new one (RFC 5041 7.2 Invalid STag), and over
    many registrations the keys spread over the key space (RFC 5042 5.1: hard to guess)."""
    pair = offload_pair()
    b = pair.b
    stags = registered_again(b, 600)
    rows = {stag >> 8 for stag in stags}
    assert len(rows) == 1                      # the freed row is taken again
    assert all(a != b for a, b in zip(stags, stags[1:]))
    assert len({stag & 0xFF for stag in stags}) > 200

    # The stale STag against the new registration: refused, nothing placed.
    stale, fresh = stags[-1], b.register_memory(REGION, 4096, ALL)
    assert fresh >> 8 == stale >> 8 and fresh != stale
    assert_refused_and_not_placed(pair, stale)


def test_rfc4960_5_3_1_both_hosts_initiate_tags_name_their_engine_row():
    """Each host's Initiate Tag (its INIT's on the connecting side, its cookie's on the listening one) carries
    the engine's association row in its low bits (abi.rx.association_row), and the rows the hosts wrote are
    at those rows: the engines find the association from each packet's tag, and the data flows."""
    pair = offload_pair()
    for side in (Side.A, Side.B):
        assert association_row(pair.hosts[side].association.local_tag) == ASSOCIATION_INDEX
    delivered = engine(pair, Side.A).counters.delivered
    stag = pair.a.register_memory(REGION, 4096, ALL)
    pair.b.memory.write(REGION, b"tagged")
    pair.b.post_write(0, stag, 0, REGION, 6)
    pair.run_until(lambda: pair.a.memory.read(REGION, 6) == b"tagged")
    assert engine(pair, Side.A).counters.delivered > delivered   # the engine took the Write's packet


# -- a wider STag key (issue 30 item 3) -------------------------------------------------------------

WIDE_KEY_BITS = 16


def wide_key_pair() -> HostPair:
    """As `offload_pair`, both engines and hosts with 16-bit STag keys."""
    hosts = {}
    for side in Side:
        memory = SparseMemory()
        hosts[side] = OffloadRnic(host_config(side, resources=RESOURCES, streams=4), memory,
                                  random.Random(7 + (side is Side.B)),
                                  ModelEngine(MACS[side], IPS[side], memory, WIDE_KEY_BITS), key_bits=WIDE_KEY_BITS)
    pair = HostPair(hosts, Link(None))
    pair.connect()
    pair.open_stream(0)
    return pair


class _RecordingRandom(random.Random):
    """A generator that records the bound of every `randrange` and answers it with `answer(bound)`."""

    def __init__(self, answer) -> None:
        super().__init__(1)
        self.answer, self.bounds = answer, []

    def randrange(self, bound, *rest):
        self.bounds.append(bound)
        return self.answer(bound)


@pytest.mark.parametrize("answer", [lambda bound: 0, lambda bound: bound - 1], ids=["lowest", "highest"])
def test_a_wide_key_is_drawn_over_every_key_but_the_rows_last(answer):
    """With 16-bit keys a row's first key is drawn from all 2**16, each later one from the 2**16 - 1 others than
    its last: a generator always answering its lowest (or highest) draw gives keys that alternate, never repeat."""
    rng = _RecordingRandom(answer)
    host = OffloadRnic(host_config(Side.B, resources=RESOURCES, streams=4), SparseMemory(), rng,
                       ModelEngine(MACS[Side.B], IPS[Side.B], SparseMemory(), WIDE_KEY_BITS), key_bits=WIDE_KEY_BITS)
    stags = []
    for _ in range(4):
        stags.append(host.register_memory(REGION, 4096, ALL))
        host.deregister_memory(stags[-1])
    assert rng.bounds == [1 << 16] + [(1 << 16) - 1] * 3
    first = 0 if answer(2) == 0 else 0xFFFF
    second = 1 if first == 0 else 0xFFFE
    assert stags == [1 << 16 | first, 1 << 16 | second, 1 << 16 | first, 1 << 16 | second]


def test_rfc5042_5_1_wide_keys_spread_over_16_bits_and_a_stale_stag_is_refused():
    """16-bit keys: every STag is row << 16 | key, the keys spread over all 16 bits, a row never takes its last
    key; the STag of the deregistered region, and one that matches the new key's low 8 bits only, are Invalid
    STags (RFC 5041 7.2, 0x1/0x00) with nothing placed."""
    pair = wide_key_pair()
    b = pair.b
    stags = registered_again(b, 600)
    assert {stag >> 16 for stag in stags} == {1} and all(stag < 1 << 17 for stag in stags)
    assert all(a != b for a, b in zip(stags, stags[1:]))
    keys = [stag & 0xFFFF for stag in stags]
    assert len(set(keys)) > 590 and max(keys) >= 1 << 15 and sum(key >> 8 != 0 for key in keys) > 550

    stale, fresh = stags[-1], b.register_memory(REGION, 4096, ALL)
    assert fresh >> 16 == stale >> 16 and fresh != stale
    assert_refused_and_not_placed(pair, stale)


def test_a_guess_matching_the_low_8_key_bits_is_an_invalid_stag():
    """A 16-bit key compared whole: the registered STag with its key's bit 15 flipped (the low 8 bits right) is
    refused by the engine as Invalid STag (RFC 5041 7.2), nothing placed; the right STag is placed."""
    pair = wide_key_pair()
    b = pair.b
    stag = b.register_memory(REGION, 4096, ALL)
    pair.a.memory.write(REGION, b"good")
    pair.a.post_write(0, stag, 0, REGION, 4)
    pair.run_until(lambda: b.memory.read(REGION, 4) == b"good")
    pair.a.memory.write(REGION, b"late")
    pair.a.post_write(0, stag ^ 1 << 15, 0, REGION, 4)
    pair.run_until(lambda: pair.seen(Side.A, RdmapTerminated))
    (terminated,) = pair.of(Side.A, RdmapTerminated)
    assert tuple(terminated.terminate.number) == DdpError.INVALID_STAG.number
    assert b.memory.read(REGION, 4) == b"good"


@pytest.mark.parametrize("key_bits, regions, limit", [(7, 16, "at least 8"), (29, 16, "at most 32"),
                                                      (25, 256, "at most 32")])
def test_a_key_width_outside_its_range_is_refused(key_bits, regions, limit):
    with pytest.raises(ValueError, match=limit):
        OffloadRnic(host_config(Side.B, resources=RESOURCES, streams=4), SparseMemory(), random.Random(1),
                    regions=regions, key_bits=key_bits)


def test_the_model_refuses_a_region_write_whose_stag_names_another_row():
    """The engine's row keeps only the key: an entry whose STag's row is not the row written would make the
    model and the gateware disagree, so the model refuses it."""
    memory = SparseMemory()
    model = ModelEngine(MACS[Side.B], IPS[Side.B], memory, WIDE_KEY_BITS).model
    entry = RegionEntry(2 << 16 | 0x8001, 1, 0, 4096, ALL, REGION)
    model.write_region(2, entry)
    with pytest.raises(ValueError, match="not of region row 1"):
        model.write_region(1, entry)
