"""Tests for model.ddp.segment: DDP headers and segments (RFC 5041 4)."""

import pytest
from hypothesis import given, strategies as st

from model.ddp.segment import ControlField, DdpSegment, TaggedHeader, UntaggedHeader, decode_header
from model.errors import DecodeError, EncodeError


def test_tagged_header_layout_rfc5041_4_2():
    """RFC 5041 4.2: control, RsvdULP (8), STag (32), TO (64) = 14 bytes, T=1."""
    header = TaggedHeader(last=True, rsvd_ulp=0x40, stag=0x11223344, to=0x0102030405060708)
    assert header.encode() == bytes.fromhex("c140" "11223344" "0102030405060708")


def test_untagged_header_layout_rfc5041_4_3():
    """RFC 5041 4.3: control, RsvdULP (40), QN, MSN, MO = 18 bytes, T=0."""
    header = UntaggedHeader(last=False, rsvd_ulp=0x43_DEADBEEF, qn=0, msn=1, mo=0x1482)
    assert header.encode() == bytes.fromhex("01" "43deadbeef" "00000000" "00000001" "00001482")


def test_control_field_bits_rfc5041_4_1():
    """RFC 5041 4.1: T=0x80, L=0x40, Rsvd=0x3C, DV=0x03."""
    assert ControlField.decode(b"\xff") == ControlField(tagged=True, last=True, rsvd=0xF, dv=3)
    assert ControlField(tagged=False, last=False).encode() == b"\x01"


def test_decode_keeps_bad_dv_and_reserved_rfc5041_4_1():
    """RFC 5041 4.1: Rsvd is not checked on receive; a bad DV is reported by the sink, not the decoder."""
    raw = bytes([0x80 | 0x3C | 0x2, 0]) + bytes(12)
    segment = DdpSegment.decode(raw)
    assert segment.header.dv == 2 and segment.header.rsvd == 0xF and not segment.header.version_ok


def test_segment_decode_chooses_model_by_t_bit_rfc5041_4_4():
    tagged = DdpSegment(TaggedHeader(True, 0x42, 5, 100), b"abc")
    untagged = DdpSegment(UntaggedHeader(True, 0, 1, 2, 3), b"")
    assert DdpSegment.decode(tagged.encode()) == tagged
    assert DdpSegment.decode(untagged.encode()) == untagged
    assert len(tagged) == 17


@pytest.mark.parametrize("raw", [b"", b"\x80" + bytes(12), b"\x01" + bytes(16)])
def test_truncated_header_raises_decode_error(raw):
    with pytest.raises(DecodeError):
        DdpSegment.decode(raw)


def test_encode_rejects_out_of_range_fields():
    with pytest.raises(EncodeError):
        TaggedHeader(True, 256, 0, 0).encode()
    with pytest.raises(EncodeError):
        UntaggedHeader(True, 1 << 40, 0, 0, 0).encode()
    with pytest.raises(EncodeError):
        TaggedHeader(True, 0, 0, 1 << 64).encode()


def test_header_decoders_reject_wrong_model():
    with pytest.raises(DecodeError):
        TaggedHeader.decode(UntaggedHeader(True, 0, 0, 0, 0).encode())
    with pytest.raises(DecodeError):
        UntaggedHeader.decode(TaggedHeader(True, 0, 0, 0).encode() + bytes(4))


u32 = st.integers(0, 2**32 - 1)


@given(st.booleans(), st.integers(0, 255), u32, st.integers(0, 2**64 - 1), st.integers(0, 15), st.integers(0, 3), st.binary(max_size=64))
def test_tagged_round_trip(last, rsvd_ulp, stag, to, rsvd, dv, payload):
    segment = DdpSegment(TaggedHeader(last, rsvd_ulp, stag, to, rsvd, dv), payload)
    assert DdpSegment.decode(segment.encode()) == segment


@given(st.booleans(), st.integers(0, 2**40 - 1), u32, u32, u32, st.binary(max_size=64))
def test_untagged_round_trip(last, rsvd_ulp, qn, msn, mo, payload):
    segment = DdpSegment(UntaggedHeader(last, rsvd_ulp, qn, msn, mo), payload)
    assert DdpSegment.decode(segment.encode()) == segment
    assert decode_header(segment.encode()) == segment.header


@given(st.binary(max_size=40))
def test_random_bytes_raise_only_decode_error(raw):
    try:
        segment = DdpSegment.decode(raw)
    except DecodeError:
        return
    assert segment.encode() == raw
