"""tshark, a decoder nobody here wrote, reads the model's captures (the fixture is in tests/conftest.py)."""

from model.sctp.packet import ChunkType
from sim.commands.dissect import dissect_capture
from sim.samples import SAMPLE_CAPTURE


def test_tshark_agrees_on_the_sample_capture(tshark):
    """Every frame: valid CRC32c (RFC 4960 6.8), the same chunk types, PPIDs and verification tag."""
    rows = tshark.fields(SAMPLE_CAPTURE, "sctp.checksum.status", "sctp.chunk_type", "sctp.data_payload_proto_id",
                         "sctp.verification_tag", "ip.checksum.status")
    ours = list(dissect_capture(SAMPLE_CAPTURE.read_bytes()))
    assert len(rows) == len(ours) > 30
    for (status, types, ppids, tag, ip_status), frame in zip(rows, ours):
        chunks = frame["sctp"]["chunks"]
        assert (status, ip_status) == ("1", "1"), f"tshark finds a bad checksum in frame {frame['index']}"
        assert [int(t) for t in types.split(",")] == [int(ChunkType[c["type"]]) for c in chunks]
        assert [int(p) for p in ppids.split(",") if p] == [c["ppid"] for c in chunks if c["type"] == "DATA"]
        assert int(tag, 16) == frame["sctp"]["verification_tag"]
