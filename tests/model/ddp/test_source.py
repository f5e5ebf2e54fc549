"""Tests for model.ddp.source: segmentation (RFC 5041 5.2, 4.1, 4.3)."""

import pytest
from hypothesis import given, strategies as st

from model.ddp.segment import DdpSegment
from model.ddp.source import DdpSource, segment_tagged, segment_untagged
from model.errors import EncodeError


def test_untagged_worked_example_rfc5041_5_2():
    """2048 bytes at MULPDU 1500: MO 0 with 1482 bytes, then MO 1482 with 566 bytes."""
    segments = segment_untagged(bytes(2048), qn=0, msn=1, mulpdu=1500)
    assert [(s.header.mo, len(s.payload), s.header.last) for s in segments] == [(0, 1482, False), (1482, 566, True)]
    assert all(len(s.encode()) <= 1500 for s in segments)


def test_tagged_worked_example_rfc5041_5_2():
    """2048 bytes from TO 16384 at MULPDU 1500: 1486 bytes, then 562 bytes at TO 17870."""
    segments = segment_tagged(bytes(2048), stag=1, to=16384, mulpdu=1500)
    assert [(s.header.to, len(s.payload), s.header.last) for s in segments] == [(16384, 1486, False), (17870, 562, True)]
    assert len(segments[0].encode()) == 1500


def test_zero_length_message_is_one_segment_rfc5041_5_2():
    for segments in (segment_tagged(b"", 1, 0, 100), segment_untagged(b"", 0, 1, 100)):
        assert len(segments) == 1 and segments[0].header.last and segments[0].payload == b""


def test_msn_starts_at_one_and_wraps_rfc5041_4_3():
    source = DdpSource(100)
    assert source.untagged_message(b"a", 0)[0].header.msn == 1
    assert source.untagged_message(b"a", 0)[0].header.msn == 2
    assert source.untagged_message(b"a", 1)[0].header.msn == 1  # per queue
    source._next_msn[0] = 0xFFFFFFFF
    assert source.untagged_message(b"a", 0)[0].header.msn == 0xFFFFFFFF
    assert source.untagged_message(b"a", 0)[0].header.msn == 0


def test_transmit_rules_rfc5041_4_1():
    """Rsvd zero, DV 1, RsvdULP identical on every segment, L only on the last."""
    segments = segment_untagged(bytes(500), qn=3, msn=9, mulpdu=100, rsvd_ulp=0x43_00000007)
    assert [s.header.last for s in segments] == [False] * (len(segments) - 1) + [True]
    assert {(s.header.rsvd, s.header.dv, s.header.rsvd_ulp, s.header.qn, s.header.msn) for s in segments} == {
        (0, 1, 0x43_00000007, 3, 9)
    }


def test_source_errors():
    with pytest.raises(EncodeError):
        DdpSource(18)
    with pytest.raises(EncodeError):
        segment_tagged(b"", 1, 0, 14)
    with pytest.raises(EncodeError):
        segment_tagged(b"ab", 1, 2**64 - 1, 100)


@given(st.binary(max_size=3000), st.integers(19, 1600), st.integers(0, 2**40))
def test_random_segmentation_reassembles(payload, mulpdu, to):
    """Any MULPDU: segments fit, offsets are contiguous and the payload reassembles."""
    for segments, offset_of in (
        (segment_untagged(payload, 0, 1, mulpdu), lambda h: h.mo),
        (segment_tagged(payload, 5, to, mulpdu), lambda h: h.to - to),
    ):
        buffer = bytearray(len(payload))
        expected = 0
        for segment in segments:
            segment = DdpSegment.decode(segment.encode())
            assert len(segment) <= mulpdu
            assert offset_of(segment.header) == expected
            buffer[expected : expected + len(segment.payload)] = segment.payload
            expected += len(segment.payload)
        assert bytes(buffer) == payload and expected == len(payload)


def test_segment_lengths_without_reading_rfc5041_5_2():
    """The worked examples above (2048 bytes at MULPDU 1500), as lengths: what a transmit engine will send,
    known without the payload."""
    source = DdpSource(1500)
    assert source.segment_lengths(2048, tagged=False) == [1500, 18 + 566]
    assert source.segment_lengths(2048, tagged=True) == [1500, 14 + 562]
    assert source.segment_lengths(0, tagged=True) == [14] and source.segment_lengths(0, tagged=False) == [18]


@given(st.integers(0, 5000), st.integers(19, 1600), st.booleans())
def test_segment_lengths_are_the_encoded_segments(length, mulpdu, tagged):
    payload = bytes(length)
    segments = (segment_tagged(payload, 7, 0, mulpdu) if tagged else segment_untagged(payload, 0, 1, mulpdu))
    assert DdpSource(mulpdu).segment_lengths(length, tagged) == [len(s.encode()) for s in segments]


@given(length=st.integers(0, 5000), mulpdu=st.integers(40, 1500), to=st.integers(0, 1 << 40),
       stag=st.integers(0, 0xFFFFFFFF), rsvd_ulp=st.integers(0, 0xFF))
def test_encoded_tagged_segments_are_the_segments_encoded(length, mulpdu, to, stag, rsvd_ulp):
    """The sender's path without header objects gives the bytes of `tagged_segments`, segment for segment."""
    from model.ddp.source import encoded_tagged_segments, tagged_segments
    payload = bytes(i & 0xFF for i in range(length))
    read = lambda offset, count: payload[offset:offset + count]  # noqa: E731
    expected = [s.encode() for s in tagged_segments(read, length, stag, to, mulpdu, rsvd_ulp)]
    assert list(encoded_tagged_segments(read, length, stag, to, mulpdu, rsvd_ulp)) == expected


@given(length=st.integers(0, 5000), mulpdu=st.integers(40, 1500), qn=st.integers(0, 2),
       msn=st.integers(0, 0xFFFFFFFF), rsvd_ulp=st.integers(0, (1 << 40) - 1))
def test_encoded_untagged_segments_are_the_segments_encoded(length, mulpdu, qn, msn, rsvd_ulp):
    from model.ddp.source import encoded_untagged_segments, untagged_segments
    payload = bytes(i & 0xFF for i in range(length))
    read = lambda offset, count: payload[offset:offset + count]  # noqa: E731
    expected = [s.encode() for s in untagged_segments(read, length, qn, msn, mulpdu, rsvd_ulp)]
    assert list(encoded_untagged_segments(read, length, qn, msn, mulpdu, rsvd_ulp)) == expected


def test_encoded_segments_check_the_message_at_once():
    from model.ddp.source import encoded_tagged_segments
    with pytest.raises(EncodeError):
        encoded_tagged_segments(lambda o, c: bytes(c), 10, 1, (1 << 64) - 5, 100)
