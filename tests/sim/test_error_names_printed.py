"""Error numbers carry their RFC names wherever the tools print them: dissect, replay (both output forms) and the
demo. The names expected here are RFC 5041 7.2's, for errors each test provokes on purpose."""

import io
import json

from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment, TaggedHeader
from model.net.frames import build_frame
from model.net.pcap import write_pcap
from model.rdmap.messages import Opcode, tagged_rsvd_ulp
from model.sctp.packet import PPID_DDP_SEGMENT, DataChunk, SctpPacket
from sim.cli import main
from sim.commands.demo import SOURCE, STREAM, demo_command
from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG

BASE_OR_BOUNDS = "DDP type 1 code 0x01 (Tagged Buffer Error: Base or bounds violation)"


def test_dissect_names_the_terminate_error(capsys):
    """The sample's Terminate reports DDP type 1 code 0x00 (RFC 5041 7.2: Tagged Buffer Error, Invalid STag)."""
    assert main(["dissect", str(SAMPLE_CAPTURE)]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "RDMAP TERMINATE" in line]
    assert line.endswith("layer=1 etype=1 code=0x00 (Tagged Buffer Error: Invalid STag)")
    assert main(["dissect", str(SAMPLE_CAPTURE), "--json"]) == 0
    terminates = [chunk["rdmap"]["terminate"] for frame in map(json.loads, capsys.readouterr().out.splitlines())
                  for chunk in (frame.get("sctp") or {}).get("chunks", []) if "terminate" in chunk.get("rdmap", {})]
    assert [t["error_name"] for t in terminates] == ["Tagged Buffer Error: Invalid STag"]


def _write_past_the_region(tmp_path):
    """An RDMA Write ending 12 bytes past the sample config's region 0x0142 (base TO 0x8000, 8192 bytes):
    a base or bounds violation (RFC 5041 7.1, 7.2: type 1, code 0x01)."""
    config = json.loads(SAMPLE_CONFIG.read_text())
    association = config["associations"][0]
    header = TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), 0x0142, 0x8000 + 8192 - 4)
    segment = DdpSegment(header, bytes(16)).encode()
    # DDP-SSN 1: the stream's first DDP segment, after the session's Initiate or Accept (RFC 5043 6.1).
    chunk = DataChunk(1, 0, 0, PPID_DDP_SEGMENT, DdpSegmentChunkData(1, segment).encode(), unordered=True)
    packet = SctpPacket(association["peer_port"], association["local_port"], int(association["tag"], 16),
                        [chunk]).encode()
    frame = build_frame(packet, bytes.fromhex("020000000001"), bytes.fromhex(config["local_mac"].replace(":", "")),
                        association["peer_ip"], config["local_ip"])
    capture = tmp_path / "bounds.pcap"
    capture.write_bytes(write_pcap([(0.0, frame)]))
    return capture


def test_replay_names_the_error_of_a_segment(tmp_path, capsys):
    capture = _write_past_the_region(tmp_path)
    assert main(["replay", str(capture), "--config", str(SAMPLE_CONFIG), "--model"]) == 0
    assert f"ERROR {BASE_OR_BOUNDS}" in capsys.readouterr().out
    assert main(["replay", str(capture), "--config", str(SAMPLE_CONFIG), "--model", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out.splitlines()[0])["records"]
    assert record["error"] == [1, 1, 1] and record["error_name"] == "Tagged Buffer Error: Base or bounds violation"


def test_the_demo_names_the_error_of_a_terminate():
    """An RDMA Write to an STag B never registered: B's DDP sink finds an invalid STag (RFC 5041 7.1) and
    sends a Terminate (RFC 5040 5.4), which the summary prints with its name."""

    def write_to_an_unregistered_stag(bed) -> None:
        bed.a.post_write(STREAM, 0x00DEAD00, 0, SOURCE, 16)

    out = io.StringIO()
    demo_command(0.0, 1, False, 1000, None, False, out=out, tamper=write_to_an_unregistered_stag)
    assert "terminate B: sent on stream 0, DDP type 1 code 0x00 (Tagged Buffer Error: Invalid STag)" in out.getvalue()
