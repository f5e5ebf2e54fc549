"""The dissector (sim/commands/dissect.py) and the sample capture it ships with."""

from sim.samples import SAMPLE_CAPTURE
import json

import pytest
from hypothesis import given, settings, strategies as st

from model.ddp.segment import TaggedHeader, UntaggedHeader
from model.ddp.sctp_adaptation import DdpSegmentChunkData, FunctionCode
from sim.commands.dissect import dissect_capture, dissect_frame, format_frame
from model.net.frames import build_frame
from model.net.pcap import LinkType, read_capture, write_pcap
from model.rdmap.messages import Opcode, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import ChunkType, DataChunk, SctpPacket
from sim.commands.sample_capture import sample_capture

SAMPLE = SAMPLE_CAPTURE
CHUNK_NUMBERS = {t.name: int(t) for t in ChunkType}
MAC_A, MAC_B = b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02"


def frame_with(*chunks, udp=False) -> bytes:
    packet = SctpPacket(5001, 5002, 0x11223344, list(chunks)).encode()
    return build_frame(packet, MAC_A, MAC_B, "10.0.0.1", "10.0.0.2", udp=udp)


def ddp_chunk(segment: bytes, unordered=True, ssn=7) -> DataChunk:
    return DataChunk(1, 0, 0, 16, DdpSegmentChunkData(ssn, segment).encode(), unordered=unordered)


def test_shipped_sample_is_what_the_model_generates():
    assert SAMPLE.read_bytes() == sample_capture(), "regenerate with: rnic sample-capture sim/samples/sample.pcap"


@pytest.fixture(scope="module")
def sample():
    return list(dissect_capture(SAMPLE.read_bytes()))


def all_chunks(frames):
    return [chunk for frame in frames for chunk in frame["sctp"]["chunks"]]


def test_sample_is_clean(sample):
    assert [f["errors"] for f in sample if f["errors"]] == []
    assert all(f["sctp"]["checksum_ok"] and f["ipv4"]["checksum_ok"] for f in sample)


def test_sample_covers_every_rdmap_opcode_and_session_function(sample):
    chunks = all_chunks(sample)
    opcodes = {c["rdmap"]["opcode"] for c in chunks if "rdmap" in c}
    assert opcodes == {op.name for op in Opcode}
    functions = {c["session_control"]["function"] for c in chunks if "session_control" in c}
    assert functions == {f.name for f in FunctionCode}
    assert {c["ddp"]["tagged"] for c in chunks if "ddp" in c} == {True, False}


def test_sample_init_carries_ddp_adaptation_indication_rfc5043_11_1(sample):
    inits = [c for c in all_chunks(sample) if c["type"] in ("INIT", "INIT_ACK")]
    assert inits
    for chunk in inits:
        assert {"kind": "AdaptationLayerIndication", "code_point": 1} in chunk["parameters"]


def test_sample_ddp_chunks_are_unordered_and_whole_rfc5043_9_10(sample):
    ddp = [c for c in all_chunks(sample) if c["type"] == "DATA"]
    assert ddp and all(c["unordered"] and c["beginning"] and c["ending"] for c in ddp)


def test_sample_has_udp_encapsulated_frames_rfc6951(sample):
    udp = [f for f in sample if "udp" in f]
    assert udp and all(f["udp"]["dst_port"] == 9899 and f["udp"]["checksum_ok"] for f in udp)


def test_sample_terminate_names_the_invalid_stag_error(sample):
    (term,) = [c["rdmap"]["terminate"] for c in all_chunks(sample) if "terminate" in c.get("rdmap", {})]
    assert (term["layer"], term["etype"], term["code"]) == (1, 1, 0)  # DDP, tagged, invalid STag
    assert term["ddp_header"]["stag"] == 0x0F77


def test_sample_frames_agree_with_scapy():
    """An independent decoder (scapy) reads every sample frame: ports, tag, chunk types, CRC32c."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.layers.sctp import SCTP, crc32c as scapy_crc32c

    ours = list(dissect_capture(SAMPLE.read_bytes()))
    for record, frame in zip(read_capture(SAMPLE.read_bytes()), ours, strict=True):
        ip = Ether(record.data)[IP]
        sctp_bytes = bytes(ip[UDP].payload) if UDP in ip else bytes(ip.payload)
        sctp = SCTP(sctp_bytes)
        assert sctp.chksum == scapy_crc32c(sctp_bytes[:8] + bytes(4) + sctp_bytes[12:])
        assert (sctp.sport, sctp.dport, sctp.tag) == (
            frame["sctp"]["src_port"], frame["sctp"]["dst_port"], frame["sctp"]["verification_tag"])
        types = []
        layer = sctp.payload
        while layer and layer.name != "NoPayload" and hasattr(layer, "type"):
            types.append(layer.type)
            layer = layer.payload
        assert types == [CHUNK_NUMBERS[c["type"]] for c in frame["sctp"]["chunks"]]


def test_json_is_serialisable(sample):
    for frame in sample:
        assert json.loads(json.dumps(frame)) == frame


def test_text_format_mentions_each_layer(sample):
    text = "\n".join(format_frame(f) for f in sample)
    for word in ("INIT", "ENHANCED_INITIATE", "RDMA_READ_REQUEST", "TERMINATE", "UDP 9899", "crc ok"):
        assert word in text


def test_bad_sctp_checksum_is_flagged_rfc4960_6_8():
    data = bytearray(frame_with(DataChunk(1, 0, 0, 99, b"x")))
    data[14 + 20 + 8] ^= 0xFF
    frame = dissect_frame(bytes(data))
    assert frame["sctp"]["checksum_ok"] is False
    assert any("CRC32c" in e["error"] for e in frame["errors"])


def test_bad_ipv4_checksum_is_flagged_and_frame_still_shown():
    data = bytearray(frame_with(DataChunk(1, 0, 0, 99, b"x")))
    data[14 + 10] ^= 0x01
    frame = dissect_frame(bytes(data))
    assert frame["ipv4"]["checksum_ok"] is False and "sctp" in frame


def test_ordered_ddp_chunk_is_flagged_rfc5043_10():
    segment = TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), 1, 0).encode() + b"data"
    frame = dissect_frame(frame_with(ddp_chunk(segment, unordered=False)))
    assert any("RFC 5043 10" in e["error"] for e in frame["errors"])
    assert frame["sctp"]["chunks"][0]["rdmap"]["opcode"] == "RDMA_WRITE"


def test_bad_ddp_version_is_flagged_rfc5041_4_1():
    segment = TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), 1, 0, dv=2).encode()
    frame = dissect_frame(frame_with(ddp_chunk(segment)))
    assert any("DDP version 2" in e["error"] for e in frame["errors"])


@pytest.mark.parametrize(
    "header, message",
    [
        (UntaggedHeader(True, (0x80 | 3) << 32, 0, 1, 0), "RDMAP version 2"),
        (UntaggedHeader(True, (0x40 | 9) << 32, 0, 1, 0), "undefined RDMAP opcode 9"),
        (UntaggedHeader(True, untagged_rsvd_ulp(Opcode.SEND), 1, 1, 0), "on QN 1"),
        (TaggedHeader(True, 0x40 | Opcode.SEND, 1, 0), "untagged buffer model"),
    ],
)
def test_rdmap_header_problems_are_flagged_rfc5040_4(header, message):
    frame = dissect_frame(frame_with(ddp_chunk(header.encode())))
    assert any(message in e["error"] for e in frame["errors"]), frame["errors"]


def test_truncated_ddp_segment_is_flagged_with_the_model_error():
    frame = dissect_frame(frame_with(ddp_chunk(b"\x41\x40\x00")))
    assert frame["errors"] and frame["errors"][0]["layer"] == "DDP"


def test_chunk_length_past_packet_is_flagged():
    packet = bytearray(SctpPacket(1, 2, 3, [DataChunk(1, 0, 0, 0, b"abcd")]).encode())
    packet[12 + 2 : 12 + 4] = (200).to_bytes(2, "big")
    frame = dissect_frame(build_frame(bytes(packet), MAC_A, MAC_B, "10.0.0.1", "10.0.0.2"))
    assert any("past the end" in e["error"] for e in frame["errors"])


def test_non_ipv4_and_raw_link_types():
    assert dissect_frame(b"\xff" * 12 + b"\x86\xdd" + b"\0" * 40)["errors"][0]["layer"] == "eth"
    datagram = frame_with(DataChunk(1, 0, 0, 99, b"x"))[14:]
    assert dissect_frame(datagram, LinkType.RAW)["sctp"]["checksum_ok"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_frames_never_crash(data):
    frame = dissect_frame(data)
    json.dumps(frame)
    format_frame(frame)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_sample_frames_never_crash(data):
    records = list(read_capture(SAMPLE.read_bytes()))
    raw = bytearray(data.draw(st.sampled_from(records)).data)
    for _ in range(data.draw(st.integers(1, 6))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    frame = dissect_frame(bytes(raw[:cut]))
    format_frame(frame)


def test_capture_damage_raises_after_whole_frames():
    data = write_pcap([(0.0, frame_with(DataChunk(1, 0, 0, 99, b"x")))] * 2)[:-5]
    frames = dissect_capture(data)
    assert next(frames)["errors"] == []
    with pytest.raises(Exception) as info:
        next(frames)
    assert type(info.value).__name__ == "DecodeError"
