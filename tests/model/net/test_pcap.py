"""Capture file reader and writer (model/net/pcap.py), checked against scapy's writers."""

import pytest
from hypothesis import given, strategies as st

from model.errors import DecodeError, EncodeError
from model.net.pcap import LinkType, read_capture, write_pcap


def test_round_trip_keeps_bytes_and_timestamps():
    frames = [(1.5, b"\x01" * 60), (2.000001, b"\x02" * 1514), (3.0, b"")]
    records = list(read_capture(write_pcap(frames)))
    assert [r.data for r in records] == [f for _, f in frames]
    assert [r.timestamp for r in records] == pytest.approx([t for t, _ in frames], abs=1e-6)
    assert all(r.linktype == LinkType.ETHERNET and not r.truncated for r in records)
    assert [r.index for r in records] == [0, 1, 2]


def test_frame_longer_than_snaplen_is_refused():
    with pytest.raises(EncodeError):
        write_pcap([(0.0, b"x" * 100)], snaplen=64)


@pytest.mark.parametrize("writer", ["pcap", "pcapng"])
def test_reads_files_written_by_scapy(tmp_path, writer):
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapNgWriter, PcapWriter

    packets = [Ether(dst="02:00:00:00:00:01") / (b"A" * n) for n in (46, 100, 1500)]
    for i, p in enumerate(packets):
        p.time = 1000 + i / 4
    path = tmp_path / f"capture.{writer}"
    cls = PcapNgWriter if writer == "pcapng" else PcapWriter
    with cls(str(path)) as w:
        for p in packets:
            w.write(p)
    records = list(read_capture(path.read_bytes()))
    assert [r.data for r in records] == [bytes(p) for p in packets]
    assert [r.timestamp for r in records] == pytest.approx([1000, 1000.25, 1000.5])
    assert all(r.linktype == LinkType.ETHERNET for r in records)


def test_big_endian_nanosecond_pcap():
    import struct

    header = struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    record = struct.pack(">IIII", 7, 500_000_000, 3, 3) + b"abc"
    (r,) = read_capture(header + record)
    assert r.timestamp == pytest.approx(7.5) and r.data == b"abc"


def test_cut_record_yields_whole_records_then_raises():
    data = write_pcap([(0.0, b"a" * 10), (1.0, b"b" * 10)])[:-3]
    reader = read_capture(data)
    assert next(reader).data == b"a" * 10
    with pytest.raises(DecodeError, match="record 1"):
        next(reader)


def test_unknown_magic():
    with pytest.raises(DecodeError, match="magic"):
        list(read_capture(b"\x00" * 64))


@given(st.binary(max_size=200))
def test_garbage_raises_only_decode_error(data):
    try:
        list(read_capture(data))
    except DecodeError:
        pass


PCAPNG_SECTION_START = bytes.fromhex("0a0d0d0a1c0000004d3c2b1a01000000ffffffffffffffff1c000000")


@pytest.mark.parametrize("head", [write_pcap([]), PCAPNG_SECTION_START], ids=["pcap", "pcapng"])
@given(tail=st.binary(max_size=120))
def test_garbage_after_valid_header_raises_only_decode_error(head, tail):
    try:
        list(read_capture(head + tail))
    except DecodeError:
        pass
