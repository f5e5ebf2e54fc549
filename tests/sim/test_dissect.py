"""The dissector (sim/commands/dissect.py) and the sample capture it ships with."""

from sim.samples import SAMPLE_CAPTURE
import json
import struct

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
    assert frame["errors"] and frame["errors"][0]["layer"] == "ddp"


def test_chunk_length_past_packet_is_flagged():
    packet = bytearray(SctpPacket(1, 2, 3, [DataChunk(1, 0, 0, 0, b"abcd")]).encode())
    packet[12 + 2 : 12 + 4] = (200).to_bytes(2, "big")
    frame = dissect_frame(build_frame(bytes(packet), MAC_A, MAC_B, "10.0.0.1", "10.0.0.2"))
    assert any("past the end" in e["error"] for e in frame["errors"])


def test_non_ipv4_and_raw_link_types():
    ipv6 = dissect_frame(b"\xff" * 12 + b"\x86\xdd" + b"\0" * 40)
    assert ipv6["errors"] == [] and ipv6["not_dissected"] == "ethertype 0x86dd (IPv6)"
    assert dissect_frame(b"\x60" + b"\0" * 39, LinkType.RAW)["not_dissected"] == "IPv6"
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


# -- issue 9 item 4: what the dissector claims, and what it does not ---------------------------


def rdma_write_frame(**frame_options) -> bytes:
    segment = TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), 0x142, 0x8000).encode() + b"payload"
    return frame_with(ddp_chunk(segment), **frame_options)


def dns_query_frame() -> bytes:
    from scapy.layers.dns import DNS, DNSQR
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.53")
                 / UDP(sport=40000, dport=53) / DNS(qd=DNSQR(qname="example.org")))


def test_udp_on_other_ports_is_udp_not_sctp_rfc6951():
    """A DNS query used to be decoded as SCTP ("chunk length past the end"): now it is shown as UDP."""
    frame = dissect_frame(dns_query_frame())
    assert frame["errors"] == []
    assert frame["udp"] == {"src_port": 40000, "dst_port": 53, "length": frame["ipv4"]["total_length"] - 20}
    assert "sctp" not in frame and "not SCTP over UDP" in frame["not_dissected"]
    assert "UDP 40000 > 53" in format_frame(frame) and "not dissected" in format_frame(frame)


def test_sctp_over_udp_on_a_port_the_user_names():
    data = rdma_write_frame(udp=True)
    moved = build_frame(SctpPacket(5001, 5002, 1, [DataChunk(1, 0, 0, 99, b"x")]).encode(), MAC_A, MAC_B,
                        "10.0.0.1", "10.0.0.2", udp=True, src_port=30000, dst_port=30001)
    assert dissect_frame(data)["sctp"]["chunks"][0]["rdmap"]["opcode"] == "RDMA_WRITE"  # 9899 always
    plain = dissect_frame(moved)
    assert plain["errors"] == [] and "sctp" not in plain
    for port in (30000, 30001):  # either port, as tshark's decode-as udp.port
        decoded = dissect_frame(moved, udp_ports=frozenset({9899, port}))
        assert decoded["errors"] == [] and decoded["sctp"]["chunks"][0]["ppid"] == 99
    (via_capture,) = dissect_capture(write_pcap([(0.0, moved)]), udp_ports=[30001])
    assert "sctp" in via_capture


def test_a_datagram_to_the_sctp_port_that_is_not_sctp_is_an_error():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    frame = dissect_frame(bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=9899, dport=9899)
                                / b"\x01\x02\x03"))
    assert [e["layer"] for e in frame["errors"]] == ["sctp"]


BROKEN = {
    "chunk length": lambda: _with_chunk_length(200),
    "crc": lambda: _flip(frame_with(DataChunk(1, 0, 0, 99, b"x")), 14 + 20 + 8),
    "udp checksum": lambda: _flip(frame_with(DataChunk(1, 0, 0, 99, b"x"), udp=True), 14 + 20 + 6),
    "ipv4 version": lambda: _flip(frame_with(DataChunk(1, 0, 0, 99, b"x")), 14, 0x70),
    "ddp": lambda: frame_with(ddp_chunk(b"\x41\x40\x00")),
    "session": lambda: frame_with(DataChunk(1, 0, 0, 17, b"\x00\x01\x00\x09", unordered=True)),
    "terminate": lambda: frame_with(ddp_chunk(UntaggedHeader(True, untagged_rsvd_ulp(Opcode.TERMINATE), 2, 1, 0)
                                              .encode() + b"\x00")),
}


def _flip(data: bytes, offset: int, mask: int = 0xFF) -> bytes:
    out = bytearray(data)
    out[offset] ^= mask
    return bytes(out)


def _with_chunk_length(length: int) -> bytes:
    packet = bytearray(SctpPacket(1, 2, 3, [DataChunk(1, 0, 0, 0, b"abcd")]).encode())
    packet[12 + 2 : 12 + 4] = length.to_bytes(2, "big")
    return build_frame(bytes(packet), MAC_A, MAC_B, "10.0.0.1", "10.0.0.2")


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_errors_name_their_layer_once(name):
    """It used to say "sctp: sctp: chunk length 200 ...": the layer is the `layer` key, not repeated."""
    frame = dissect_frame(BROKEN[name]())
    assert frame["errors"], frame
    for error in frame["errors"]:
        assert error["layer"] in {"eth", "ipv4", "udp", "sctp", "ddp-sctp", "ddp", "rdmap", "frame"}
        assert not error["error"].lower().startswith(error["layer"].lower()), error
        assert f"{error['layer']}:" not in error["error"].lower(), error
    assert "sctp: sctp" not in format_frame(frame).lower()


def test_chunk_length_error_reads_once():
    frame = dissect_frame(_with_chunk_length(200))
    assert frame["errors"] == [{"layer": "sctp", "error": "chunk length 200 past the end of the packet at offset 12"}]


def vlan_tagged(frame: bytes, *tags: tuple[int, int]) -> bytes:
    """Insert VLAN tags ((TPID, TCI) pairs, outermost first) after the MAC addresses."""
    return frame[:12] + b"".join(tpid.to_bytes(2, "big") + tci.to_bytes(2, "big") for tpid, tci in tags) + frame[12:]


@pytest.mark.parametrize("tags", [[(0x8100, 0x2064)], [(0x88A8, 0x000A), (0x8100, 0xB064)]], ids=["802.1Q", "QinQ"])
def test_vlan_tagged_frames_are_decoded(tags):
    from scapy.layers.l2 import Dot1AD, Dot1Q, Ether

    data = vlan_tagged(rdma_write_frame(), *tags)
    frame = dissect_frame(data)
    assert frame["errors"] == [] and frame["eth"]["ethertype"] == 0x0800
    assert frame["sctp"]["chunks"][0]["rdmap"]["opcode"] == "RDMA_WRITE"
    expected = [{"tpid": tpid, "pcp": tci >> 13, "dei": bool(tci & 0x1000), "vid": tci & 0xFFF} for tpid, tci in tags]
    assert frame["eth"]["vlan"] == expected
    # scapy, an independent decoder, reads the same tags
    layer, theirs = Ether(data).payload, []
    while isinstance(layer, (Dot1Q, Dot1AD)):
        theirs.append({"pcp": layer.prio, "dei": bool(layer.dei), "vid": layer.vlan})
        layer = layer.payload
    assert theirs == [{k: v for k, v in tag.items() if k != "tpid"} for tag in expected]
    assert "vlan " + "/".join(str(t["vid"]) for t in expected) in format_frame(frame)


def test_vlan_tag_cut_short_is_an_ethernet_error():
    frame = dissect_frame(b"\x02" * 12 + b"\x81\x00\x00")
    assert [e["layer"] for e in frame["errors"]] == ["eth"]


def snapped_pcap(frames: list[bytes], snaplen: int) -> bytes:
    """A libpcap file whose records keep at most `snaplen` bytes of each frame (original length kept)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1)]
    for data in frames:
        out.append(struct.pack("<IIII", 0, 0, min(len(data), snaplen), len(data)) + data[:snaplen])
    return b"".join(out)


@pytest.mark.parametrize("snaplen", [10, 14, 16, 30, 34, 40, 42, 46, 54, 60, 64, 80, 96, 128, 256])
def test_frames_cut_by_the_snap_length_are_truncated_not_broken(snaplen):
    """Every sample frame cut at `snaplen` is clean (the sample is): the cut is named, no layer is blamed."""
    whole = [record.data for record in read_capture(SAMPLE.read_bytes())]
    whole.append(vlan_tagged(whole[-1], (0x8100, 7)))
    for frame, data in zip(dissect_capture(snapped_pcap(whole, snaplen)), whole, strict=True):
        assert frame["errors"] == [], (snaplen, frame)
        assert frame["original_length"] == len(data) and frame["length"] == min(len(data), snaplen)
        assert frame["truncated"] is (len(data) > snaplen)
        if frame["truncated"]:
            assert "snap length" in frame["not_dissected"]
            assert f"(of {len(data)}B)" in format_frame(frame)
        else:
            assert "not_dissected" not in frame


def test_cut_frame_shows_the_headers_and_whole_chunks_it_has():
    bundle = frame_with(DataChunk(1, 0, 0, 99, b"first"), DataChunk(2, 0, 0, 16, b"\x00\x07" + b"\x41" * 40))
    (frame,) = dissect_capture(snapped_pcap([bundle], 14 + 20 + 12 + 24 + 8))
    assert frame["ipv4"]["total_length"] == len(bundle) - 14 and frame["ipv4"]["checksum_ok"]
    assert frame["sctp"]["checksum_ok"] is None and [c["tsn"] for c in frame["sctp"]["chunks"]] == [1]
    assert "after 1 whole chunk" in frame["not_dissected"] and frame["errors"] == []
    assert "crc not checked" in format_frame(frame)


def test_short_frame_that_is_not_cut_is_still_an_ipv4_error():
    """The same missing bytes without a snap length to explain them are the IPv4 layer's fault."""
    data = rdma_write_frame()[:60]
    assert [e["layer"] for e in dissect_frame(data)["errors"]] == ["ipv4"]
    assert dissect_frame(data, original_length=len(rdma_write_frame()))["errors"] == []


def other_traffic() -> list[bytes]:
    from scapy.layers.inet import ICMP, IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Ether

    eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    return [bytes(eth / ARP(psrc="10.0.0.1", pdst="10.0.0.2")), bytes(eth / IP() / TCP(dport=80, flags="S")),
            bytes(eth / IP() / ICMP()), bytes(eth / IPv6() / TCP()), dns_query_frame()]


def test_other_traffic_is_listed_not_an_error():
    frames = [dissect_frame(data) for data in other_traffic()]
    assert [f["errors"] for f in frames] == [[]] * len(frames)
    reasons = [f["not_dissected"] for f in frames]
    assert reasons[:4] == ["ethertype 0x0806 (ARP)", "IPv4 protocol 6 (TCP)", "IPv4 protocol 1 (ICMP)",
                           "ethertype 0x86dd (IPv6)"]


def test_damaged_ipv4_header_is_an_error_whatever_it_claims_to_carry():
    """A flipped protocol or fragment field could hide an SCTP packet: the header checksum decides."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    tcp = dissect_frame(bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2", chksum=0x1234) / TCP(dport=22)))
    assert [e["layer"] for e in tcp["errors"]] == ["ipv4"] and tcp["not_dissected"] == "IPv4 protocol 6 (TCP)"
    fragment = bytearray(rdma_write_frame(udp=True))
    fragment[14 + 6] |= 0x10  # a fragment offset appears, the checksum no longer matches
    assert [e["layer"] for e in dissect_frame(bytes(fragment))["errors"]] == ["ipv4"]
