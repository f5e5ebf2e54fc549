"""The shipped Wireshark Lua dissector (scripts/wireshark/rnic_ddp_sctp.lua) agrees with `rnic dissect`.

tshark loads the script (-X lua_script:...) and writes its tree as PDML; every
DDP Segment and Session Control chunk's rnic_ddp.* fields must equal the values
`rnic dissect --json` gives for the same chunk, on the shipped sample capture
and on captures of the software RNIC demo; broken chunks must carry the expert
info that names the error `rnic dissect` lists.  The fixture (tests/conftest.py)
skips without tshark, or fails under RNIC_REQUIRE_TSHARK=1.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from model.ddp.sctp_adaptation import DdpSegmentChunkData, EnhancedData, FunctionCode, SessionControl
from model.ddp.segment import TaggedHeader, UntaggedHeader
from model.net.frames import build_frame
from model.net.pcap import write_pcap
from model.rdmap.messages import Opcode, ReadRequest, Terminate, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import DataChunk, SctpPacket
from sim.commands.dissect import dissect_capture
from sim.samples import SAMPLE_CAPTURE

LUA = Path(__file__).resolve().parents[2] / "scripts" / "wireshark" / "rnic_ddp_sctp.lua"
BYTES_FIELDS = {"rnic_ddp.session.private_data"}
NOT_IN_JSON = {"rnic_ddp.payload"}  # the payload's bytes: `rnic dissect` gives only its length


def run_lua(tshark, capture: Path) -> list[list[ElementTree.Element]]:
    """The rnic_ddp protocol elements of each frame, in chunk order; asserts that no Lua error occurred."""
    # Wireshark's SCTP TSN analysis hands on no user data of a retransmitted TSN, which a lossy link
    # duplicates; without it every copy is dissected, as rnic dissect does.
    command = [tshark.executable, "-n", "-r", str(capture), *tshark.OPTIONS, "-o", "sctp.tsn_analysis:FALSE",
               "-X", f"lua_script:{LUA}", "-T", "pdml"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    complaints = [line for line in result.stderr.splitlines() if "Running as user" not in line]
    assert complaints == [], "tshark wrote to stderr (a Lua error?): " + "\n".join(complaints)
    assert "Lua Error" not in result.stdout and "_ws.lua.error" not in result.stdout
    packets = ElementTree.fromstring(result.stdout).findall("packet")
    return [[proto for proto in packet.iter("proto") if proto.get("name") == "rnic_ddp"] for packet in packets]


def _own_fields(element: ElementTree.Element):
    """The fields under a protocol element, not descending into other protocols."""
    for child in element:
        if child.tag == "field":
            yield child
            yield from _own_fields(child)


def lua_view(proto: ElementTree.Element) -> dict[str, int | str]:
    view: dict[str, int | str] = {}
    for field in _own_fields(proto):
        name = field.get("name", "")
        if not name.startswith("rnic_ddp.") or name.startswith("rnic_ddp.expert") or name in NOT_IN_JSON:
            continue
        assert name not in view, f"{name} twice in one chunk"
        view[name] = field.get("value", "") if name in BYTES_FIELDS else int(field.get("show"), 0)
    return view


def lua_experts(proto: ElementTree.Element) -> set[str]:
    return {field.get("name") for field in _own_fields(proto) if field.get("name", "").startswith("rnic_ddp.expert.")}


def json_view(chunk: dict) -> dict[str, int | str]:
    """The same chunk as `rnic dissect --json` gives it, under the Lua dissector's field names."""
    view: dict[str, int | str] = {"rnic_ddp.ssn": chunk["ddp_ssn"]}
    if "session_control" in chunk:
        session = chunk["session_control"]
        view["rnic_ddp.session.function"] = FunctionCode[session["function"]].value
        for key, value in session.get("enhanced", {}).items():
            view[f"rnic_ddp.session.{key}"] = int(value)
        if session["private_data"]:
            view["rnic_ddp.session.private_data"] = session["private_data"]
        return view
    ddp = chunk["ddp"]
    for key in ("tagged", "last", "rsvd", "dv", "stag", "to", "qn", "msn", "mo", "payload_length"):
        if key in ddp:
            view[f"rnic_ddp.{key}"] = int(ddp[key])
    rdmap = chunk.get("rdmap")
    if rdmap is None:
        return view
    opcode = rdmap["opcode"]
    view["rnic_ddp.rdmap.rv"] = rdmap["rv"]
    view["rnic_ddp.rdmap.rsvd"] = rdmap["rsvd"]
    view["rnic_ddp.rdmap.opcode"] = Opcode[opcode].value if isinstance(opcode, str) else opcode
    if "invalidate_stag" in rdmap:
        view["rnic_ddp.rdmap.invalidate_stag"] = rdmap["invalidate_stag"]
    for key, value in rdmap.get("read_request", {}).items():
        view[f"rnic_ddp.rdmap.{key}"] = value
    term = rdmap.get("terminate")
    if term is not None:
        prefix = "rnic_ddp.rdmap.term."
        for key in ("layer", "etype", "code", "reserved"):
            view[prefix + key] = term[key]
        view[prefix + "m"] = int(term["segment_length"] is not None)
        view[prefix + "d"] = int(term["ddp_header"] is not None)
        view[prefix + "r"] = int(term["rdma_header"] is not None)
        if term["segment_length"] is not None:
            view[prefix + "segment_length"] = term["segment_length"]
        if term["ddp_header"] is not None:
            header = dict(term["ddp_header"])
            header["tagged"] = int("stag" in header)
            for key, value in header.items():
                view[f"{prefix}ddp.{key}"] = int(value)
        for key, value in (term["rdma_header"] or {}).items():
            view[f"{prefix}rr.{key}"] = value
    return view


def ddp_chunks(frame: dict) -> list[dict]:
    return [chunk for chunk in frame.get("sctp", {}).get("chunks", []) if chunk.get("ppid") in (16, 17)]


def assert_lua_equals_rnic_dissect(tshark, capture: Path) -> int:
    """Every DDP chunk of every frame `rnic dissect` finds clean: the Lua fields equal the JSON's."""
    ours = list(dissect_capture(capture.read_bytes()))
    theirs = run_lua(tshark, capture)
    assert len(ours) == len(theirs)
    compared = 0
    for frame, protos in zip(ours, theirs):
        chunks = ddp_chunks(frame)
        if frame["errors"]:
            continue  # a corrupted frame: only "no Lua error" (checked in run_lua)
        assert len(protos) == len(chunks), f"frame {frame['index']}"
        for chunk, proto in zip(chunks, protos):
            assert lua_view(proto) == json_view(chunk), f"frame {frame['index']} TSN {chunk['tsn']}"
            assert lua_experts(proto) == set(), f"frame {frame['index']} TSN {chunk['tsn']}"
            compared += 1
    return compared


def test_lua_fields_equal_rnic_dissect_on_the_sample(tshark):
    compared = assert_lua_equals_rnic_dissect(tshark, SAMPLE_CAPTURE)
    assert compared == sum(len(ddp_chunks(f)) for f in dissect_capture(SAMPLE_CAPTURE.read_bytes())) > 20


@pytest.mark.parametrize("udp, loss", [(False, 0.0), (True, 0.02)], ids=["sctp", "udp-lossy"])
def test_lua_fields_equal_rnic_dissect_on_a_demo_capture(tshark, tmp_path, udp, loss):
    """Two software RNICs run every RDMAP operation (RFC 6581 setup, Read, Terminate at teardown)."""
    from sim.commands.demo import run_demo

    result = run_demo(loss=loss, seed=3, udp=udp, size=4096, record=True)
    assert result.passed
    capture = tmp_path / "demo.pcap"
    capture.write_bytes(result.testbed.pcap())
    assert assert_lua_equals_rnic_dissect(tshark, capture) > 40


# -- broken chunks: the same error, as rnic dissect's `errors` and as Lua expert info ----------

MAC_A, MAC_B = b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02"
WRITE = TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), 0x142, 0x8000)


def segment(data: bytes, **flags) -> tuple[int, bytes, dict]:
    return 16, DdpSegmentChunkData(9, data).encode(), flags


def session(data: bytes) -> tuple[int, bytes, dict]:
    return 17, data, {}


def terminate_bytes(**fields) -> bytes:
    return UntaggedHeader(True, untagged_rsvd_ulp(Opcode.TERMINATE), 2, 1, 0).encode() + Terminate(**fields).encode()


BROKEN = {
    # name: (chunk, rnic dissect error (layer, words), Lua expert)
    "U=0": (segment(WRITE.encode(), unordered=False), ("ddp-sctp", "U=0"), "unordered"),
    "DV 2": (segment(TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), 1, 0, dv=2).encode()),
             ("ddp", "DDP version 2"), "dv"),
    "RV 2": (segment(UntaggedHeader(True, (0x80 | 3) << 32, 0, 1, 0).encode()), ("rdmap", "RDMAP version 2"), "rv"),
    "opcode 9": (segment(UntaggedHeader(True, (0x40 | 9) << 32, 0, 1, 0).encode()),
                 ("rdmap", "undefined RDMAP opcode 9"), "opcode"),
    "Send on QN 1": (segment(UntaggedHeader(True, untagged_rsvd_ulp(Opcode.SEND), 1, 1, 0).encode()),
                     ("rdmap", "on QN 1"), "opcode"),
    "tagged Send": (segment(TaggedHeader(True, 0x40 | Opcode.SEND, 1, 0).encode()),
                    ("rdmap", "untagged buffer model"), "opcode"),
    "short DDP header": (segment(b"\x41\x40\x00"), ("ddp", "needs 18 bytes"), "length"),
    "no DDP-SSN": (session(b"\x00"), ("ddp-sctp", "needs 4 bytes"), "length"),
    "short Read Request": (segment(UntaggedHeader(True, untagged_rsvd_ulp(Opcode.RDMA_READ_REQUEST), 1, 1, 0)
                                   .encode() + bytes(20)), ("rdmap", "needs 28 bytes"), "length"),
    "long Read Request": (segment(UntaggedHeader(True, untagged_rsvd_ulp(Opcode.RDMA_READ_REQUEST), 1, 1, 0)
                                  .encode() + ReadRequest(1, 2, 3, 4, 5).encode() + b"xx"),
                          ("rdmap", "30 bytes, expected 28"), "length"),
    "Terminate with trailing bytes": (segment(terminate_bytes(layer=1, etype=1, code=0) + b"junk"),
                                      ("rdmap", "4 bytes after the Terminate header"), "length"),
    "Terminate cut in its DDP header": (segment(terminate_bytes(layer=1, etype=1, code=0, segment_length=20,
                                                                ddp_header=WRITE)[:-3]),
                                        ("rdmap", "terminated DDP header"), "length"),
    "unknown function": (session(b"\x00\x01\x00\x09"), ("ddp-sctp", "unknown function code 0x009"), "session"),
    "Terminate with private data": (session(b"\x00\x01\x00\x04pd"), ("ddp-sctp", "MUST NOT be included"), "session"),
    "enhanced without its data": (session(b"\x00\x01\x00\x05ab"), ("ddp-sctp", "enhanced message without"),
                                  "session"),
    "private data over 512": (session(b"\x00\x01\x00\x01" + bytes(513)), ("ddp-sctp", "exceed 512"), "session"),
}


def test_lua_expert_info_marks_the_errors_rnic_dissect_lists(tshark, tmp_path):
    frames = []
    for tsn, (ppid, data, flags) in enumerate(chunk for chunk, _, _ in BROKEN.values()):
        chunk = DataChunk(100 + tsn, 0, 0, ppid, data, **{"unordered": True, **flags})
        packet = SctpPacket(5001, 5002, 0x11223344, [chunk]).encode()
        frames.append((float(tsn), build_frame(packet, MAC_A, MAC_B, "10.0.0.1", "10.0.0.2")))
    capture = tmp_path / "broken.pcap"
    capture.write_bytes(write_pcap(frames))
    ours = list(dissect_capture(capture.read_bytes()))
    theirs = run_lua(tshark, capture)
    for (name, (_, (layer, words), expert)), frame, protos in zip(BROKEN.items(), ours, theirs, strict=True):
        assert [(e["layer"], words in e["error"]) for e in frame["errors"]] == [(layer, True)], (name, frame["errors"])
        assert len(protos) == 1, name
        assert lua_experts(protos[0]) == {f"rnic_ddp.expert.{expert}"}, name


def test_lua_marks_a_fragmented_ddp_message_rfc5043_9(tshark, tmp_path):
    """Wireshark reassembles SCTP fragments and hands on the whole message: flagged as fragmented."""
    data = DdpSegmentChunkData(1, WRITE.encode() + b"abcdefgh").encode()
    chunks = [DataChunk(10, 0, 0, 16, data[:10], unordered=True, ending=False),
              DataChunk(11, 0, 0, 16, data[10:], unordered=True, beginning=False)]
    frames = [(0.0, build_frame(SctpPacket(5001, 5002, 1, [c]).encode(), MAC_A, MAC_B, "10.0.0.1", "10.0.0.2"))
              for c in chunks]
    capture = tmp_path / "fragments.pcap"
    capture.write_bytes(write_pcap(frames))
    assert all(any("fragmented DDP chunk" in e["error"] for e in f["errors"]) for f in dissect_capture(capture.read_bytes()))
    first, second = run_lua(tshark, capture)
    assert first == [] and lua_experts(second[0]) == {"rnic_ddp.expert.fragmented"}
    assert lua_view(second[0])["rnic_ddp.payload_length"] == 8


def test_lua_session_fields_with_a_to_zero_ignore_the_rtr_bits_rfc6581_9(tshark, tmp_path):
    """A=0 with B, C, D set on the wire: the receiver ignores them (reported False) on both sides."""
    raw = SessionControl(3, FunctionCode.ENHANCED_INITIATE, b"\x40\x05\xc0\x06" + b"pd").encode()
    packet = SctpPacket(5001, 5002, 1, [DataChunk(1, 0, 0, 17, raw, unordered=True)]).encode()
    capture = tmp_path / "rtr.pcap"
    capture.write_bytes(write_pcap([(0.0, build_frame(packet, MAC_A, MAC_B, "10.0.0.1", "10.0.0.2"))]))
    assert EnhancedData.decode(raw[4:8]) == EnhancedData(ird=5, ord=6)
    assert assert_lua_equals_rnic_dissect(tshark, capture) == 1


def test_lua_survives_cut_and_mutated_frames(tshark, tmp_path):
    """Sample frames cut by snap lengths and with random bytes changed: no Lua error, whatever the bytes."""
    import random
    import struct

    from model.net.pcap import read_capture

    whole = [record.data for record in read_capture(SAMPLE_CAPTURE.read_bytes())]
    rng = random.Random(9)
    records = []
    for data in whole:
        for snaplen in (50, 64, 66, 70, 80, 96, 128):
            records.append((data[:snaplen], len(data)))
    for _ in range(400):
        data = bytearray(rng.choice([frame for frame in whole if len(frame) > 70]))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(62, len(data))] = rng.randrange(256)  # past the SCTP common header
        records.append((bytes(data), len(data)))
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    out += [struct.pack("<IIII", 0, 0, len(data), original) + data for data, original in records]
    capture = tmp_path / "rough.pcap"
    capture.write_bytes(b"".join(out))
    assert len(run_lua(tshark, capture)) == len(records)
