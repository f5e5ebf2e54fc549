"""Tests for model.ddp.sink: validation, placement, delivery (RFC 5041 5.3, 5.4, 7.1, 7.2)."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.sink import DdpSink, Delivered, SinkError
from model.ddp.source import DdpSource
from model.errors import DdpError, RdmapError
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory

PD = ProtectionDomain(1)
STAG = 0x1000


def make_sink(buffers=1, buffer_length=100, **region):
    fields = dict(stag=STAG, pd=PD, base_to=0, length=100, access=Access.REMOTE_WRITE, address=0x10000)
    fields.update(region)
    table = MemoryTable()
    table.register(MemoryRegion(**fields))
    sink = DdpSink(pd=PD, memory_table=table, host_memory=SparseMemory(), stream_id=0, queues=(0, 1))
    for index in range(buffers):
        sink.post_buffer(0, 0x20000 + index * 0x1000, buffer_length)
    return sink


def untagged(payload=b"x", qn=0, msn=1, mo=0, last=True, dv=1):
    return DdpSegment(UntaggedHeader(last, 0, qn, msn, mo, dv=dv), payload).encode()


def tagged(payload=b"x", stag=STAG, to=0, last=True, dv=1):
    return DdpSegment(TaggedHeader(last, 0, stag, to, dv=dv), payload).encode()


# Every RFC 5041 7.2 number the sink emits, reached from crafted input.
ERROR_CASES = [
    ("tagged DV", {}, tagged(dv=2), DdpError.TAGGED_INVALID_VERSION),
    ("untagged DV", {}, untagged(dv=0), DdpError.UNTAGGED_INVALID_VERSION),
    ("invalid QN", {}, untagged(qn=7), DdpError.INVALID_QN),
    ("no buffer", {"buffers": 1}, untagged(msn=2), DdpError.NO_BUFFER),
    ("invalid MO", {"buffer_length": 10}, untagged(b"ab", mo=10), DdpError.INVALID_MO),
    ("too long", {"buffer_length": 10}, untagged(b"ab", mo=9), DdpError.MESSAGE_TOO_LONG),
    ("MSN behind", {}, untagged(msn=0), DdpError.MSN_RANGE),
    ("MSN far ahead", {}, untagged(msn=1 + 2**31), DdpError.MSN_RANGE),
    ("invalid STag", {}, tagged(stag=5), DdpError.INVALID_STAG),
    ("other PD", {"pd": ProtectionDomain(9)}, tagged(), DdpError.STAG_NOT_ASSOCIATED),
    ("other stream", {"stream": 4}, tagged(), DdpError.STAG_NOT_ASSOCIATED),
    ("TO below base", {"base_to": 10}, tagged(to=9), DdpError.BASE_OR_BOUNDS),
    ("TO+len past end", {}, tagged(b"ab", to=99), DdpError.BASE_OR_BOUNDS),
    ("TO wrap", {"base_to": 2**64 - 100}, tagged(b"ab", to=2**64 - 2), DdpError.TO_WRAP),
    ("no write right", {"access": Access.REMOTE_READ}, tagged(), RdmapError.ACCESS_RIGHTS),
    ("truncated", {}, b"\x81\x00", DdpError.LOCAL_CATASTROPHIC),
]


@pytest.mark.parametrize("name, setup, raw, error", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_error_numbers_rfc5041_7_2(name, setup, raw, error):
    """RFC 5041 7.1/7.2: each check reports its type/code, nothing is placed, the report has header and length."""
    sink = make_sink(**setup)
    events = sink.receive(raw)
    assert len(events) == 1 and isinstance(events[0], SinkError)
    assert events[0].error is error and events[0].number == error.number
    assert events[0].segment_length == len(raw)
    assert sink.host_memory.writes == []
    assert sink.final_message_allowed


def test_errors_silently_drop_later_segments_rfc5041_7_1():
    """After an error DDP MUST silently drop every subsequent segment and place nothing."""
    sink = make_sink()
    sink.receive(tagged(stag=5))
    assert sink.receive(untagged(b"ok")) == [] and sink.receive(tagged(b"ok")) == []
    assert sink.host_memory.writes == []
    assert sink.use_final_message() is True and sink.use_final_message() is False


def test_zero_length_tagged_not_checked_rfc5041_5_2():
    """STag and TO MUST NOT be checked for a zero-length tagged message."""
    sink = make_sink()
    events = sink.receive(tagged(b"", stag=0xBAD, to=2**64 - 1))
    assert len(events) == 1 and isinstance(events[0], Delivered) and events[0].length == 0


def test_delivery_reports_length_and_rsvd_ulp_rfc5041_5_4():
    sink = make_sink(buffer_length=4000)
    source = DdpSource(1500)
    events = []
    for raw in source.untagged_message(bytes(range(256)) * 8, 0, rsvd_ulp=0x43_00000001):
        events += sink.receive(raw.encode())
    delivered = [e for e in events if isinstance(e, Delivered)]
    assert len(delivered) == 1
    assert ((delivered[0].length, delivered[0].rsvd_ulp, delivered[0].qn, delivered[0].msn)
            == (2048, 0x43_00000001, 0, 1))
    assert sink.host_memory.read(0x20000, 2048) == bytes(range(256)) * 8


def test_out_of_order_placement_in_order_delivery_rfc5041_5_3():
    """Placement MAY be out of order; delivery MUST follow the source order (LLP sequence)."""
    sink = make_sink(buffers=2, length=5000)
    source = DdpSource(100)
    segments = (source.tagged_message(b"T" * 300, STAG, 0) + source.untagged_message(b"A" * 50, 0)
                + source.untagged_message(b"B" * 10, 0))
    order = list(range(len(segments)))
    random.Random(3).shuffle(order)
    delivered = []
    for index in order:
        for event in sink.receive(segments[index].encode(), index):
            if isinstance(event, Delivered):
                delivered.append(event)
    assert [(d.tagged, d.msn, d.length) for d in delivered] == [(True, None, 300), (False, 1, 50), (False, 2, 10)]


def test_duplicate_never_delivered_twice_rfc5041_5_3():
    """DDP MUST deliver a message at most once."""
    sink = make_sink()
    raw = untagged(b"hi")
    assert any(isinstance(e, Delivered) for e in sink.receive(raw, 0))
    assert sink.receive(raw, 0) == []
    assert sink.error is None


def test_sequence_numbers_wrap_modulo_16_bits():
    sink = DdpSink(pd=PD, memory_table=MemoryTable(), host_memory=SparseMemory(), stream_id=0, first_sequence=0xFFFF)
    sink.post_buffer(0, 0, 10)
    sink.post_buffer(0, 10, 10)
    assert sum(isinstance(e, Delivered) for e in sink.receive(untagged(msn=2), 0)) == 0
    assert sum(isinstance(e, Delivered) for e in sink.receive(untagged(msn=1), 0xFFFF)) == 2


def test_msn_window_moves_after_completion_rfc5041_7_1_item_5():
    sink = make_sink(buffers=2)
    sink.receive(untagged(msn=1))
    assert sink.receive(untagged(msn=1))[0].error is DdpError.MSN_RANGE


def test_ulp_check_runs_before_buffer_checks():
    sink = DdpSink(pd=PD, memory_table=MemoryTable(), host_memory=SparseMemory(), stream_id=0,
                   ulp_check=lambda segment: RdmapError.UNEXPECTED_OPCODE)
    assert sink.receive(untagged(msn=5))[0].error is RdmapError.UNEXPECTED_OPCODE


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["tagged", "untagged", "junk"]), st.binary(max_size=300),
                          st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1)), max_size=8),
       st.integers(15, 400), st.randoms(use_true_random=False))
def test_random_traffic_never_writes_outside_regions_rfc5041_8_3_1(messages, mulpdu, rng):
    """RFC 5041 8.3.1 item 3: whatever arrives, writes stay inside registered regions and posted buffers."""
    sink = make_sink(buffers=3, buffer_length=200, length=1000)
    source = DdpSource(max(mulpdu, 19))
    segments = []
    for kind, payload, to, stag in messages:
        if kind == "tagged":
            segments += [s.encode() for s in source.tagged_message(
                payload, rng.choice([STAG, stag]), rng.choice([0, to % 2000, min(to, 2**64 - len(payload))]))]
        elif kind == "untagged":
            segments += [s.encode() for s in source.untagged_message(payload, rng.choice([0, 0, 1]))]
        else:
            segments.append(payload[:40])
    order = list(range(len(segments)))
    rng.shuffle(order)
    for index in order:
        sink.receive(segments[index], index)
    allowed = [(0x10000, 1000)] + [(0x20000 + i * 0x1000, 200) for i in range(3)]
    assert sink.host_memory.written_outside(allowed) == []


MIDDLES = [
    ("placed", untagged(b"bb", mo=2, last=False)),
    ("invalid MO", untagged(b"bb", mo=10, last=False)),
    ("too long", untagged(b"bb", mo=9, last=False)),
    ("no buffer", untagged(b"bb", msn=2, mo=2, last=False)),
    ("invalid QN", untagged(b"bb", qn=7, mo=2, last=False)),
    ("MSN behind", untagged(b"bb", msn=0, mo=2, last=False)),
    ("last", untagged(b"bb", mo=2, last=True)),
    ("untagged DV", untagged(b"bb", mo=2, last=False, dv=0)),
    ("other RsvdULP", DdpSegment(UntaggedHeader(False, 9 << 32, 0, 1, 2), b"bb").encode()),
    ("tagged", tagged(b"bb", to=2, last=False)),
]


@pytest.mark.parametrize("name, middle", MIDDLES, ids=[m[0] for m in MIDDLES])
def test_place_next_untagged_does_what_receive_does_rfc5041_5_3_7_1(name, middle):
    """A Send's middle segment placed straight (`place_next_untagged`) ends as `receive` leaves it; any other
    segment, or one failing a check, is left to `receive` with nothing done."""
    sinks = []
    for straight in (False, True):
        sink = DdpSink(pd=PD, memory_table=MemoryTable(), host_memory=SparseMemory(), stream_id=0, queues=(0, 1),
                       report_placed=False, untagged_checked_by_header={0: 0})
        sink.post_buffer(0, 0x20000, 10)
        assert sink.receive(untagged(b"aa", last=False), 0) == []
        if not (straight and sink.place_next_untagged(middle, 1)):
            events = sink.receive(middle, 1)
            assert not straight or name != "placed"
            sinks.append((events, sink))
        else:
            assert name == "placed"
            sinks.append(([], sink))
    (plain_events, plain), (straight_events, straight) = sinks
    assert straight_events == plain_events
    assert (straight.delivery_point, straight.error) == (plain.delivery_point, plain.error)
    assert straight.host_memory.read(0x20000, 10) == plain.host_memory.read(0x20000, 10)
    if plain.error is None:
        last = untagged(b"c", mo=4)
        assert straight.receive(last, 2) == plain.receive(last, 2)


def test_place_next_tagged_takes_a_state_checked_rsvd_ulp_only_while_the_state_holds():
    """An RsvdULP whose ULP check needs the ULP's state (a Read Response needs a read outstanding, RFC 5040 4.4)
    is placed straight only when the caller says that state holds; otherwise `receive` takes it."""
    for holds in (False, True):
        table = MemoryTable()
        table.register(MemoryRegion(STAG, PD, 0, 100, Access.LOCAL_WRITE, 0x10000))
        sink = DdpSink(pd=PD, memory_table=table, host_memory=SparseMemory(), stream_id=0, report_placed=False,
                       tagged_access=lambda header: Access.LOCAL_WRITE,
                       checked_with_ulp_state={0x42: Access.LOCAL_WRITE})
        assert sink.receive(DdpSegment(TaggedHeader(False, 0x42, STAG, 0), b"aa").encode(), 0) == []
        middle = DdpSegment(TaggedHeader(False, 0x42, STAG, 2), b"bb").encode()
        assert sink.place_next_tagged(middle, 1, ulp_state_holds=holds) is holds
        assert sink.host_memory.read(0x10002, 2) == (b"bb" if holds else b"\x00\x00")
        assert sink.delivery_point == (2 if holds else 1)
