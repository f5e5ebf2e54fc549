"""`rnic replay`: the sample capture through the RTL receive engine and through the model.

The expected placements are derived here from the capture and its
configuration, not copied from a run: every frame is decoded with the
model's codecs (Ethernet, IPv4, UDP, SCTP, the RFC 5043 DDP Segment Chunk,
the RFC 5041 DDP headers) and each DDP segment is placed by the RFC 5041
rules alone (tagged: the region of its STag at TO - base TO, 4.2 and 8.3.1;
untagged: the buffer its QN and MSN name, at MO, 4.3; the first error stops
the stream, 7.1), without the receive engine's scoreboard.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from model.ddp.memory import Access
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment
from model.engine.config import ReceiveConfig
from model.net.frames import Frame
from model.net.pcap import read_capture
from model.rdmap.messages import Opcode, rdmap_control_of
from model.sctp.packet import PPID_DDP_SEGMENT, DataChunk, SctpPacket
from sim.cli import main
from sim.commands.replay import memory_digest
from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG

CAPTURE, CONFIG = str(SAMPLE_CAPTURE), str(SAMPLE_CONFIG)


@dataclass(frozen=True)
class Placement:
    frame: int
    frame_length: int
    tsn: int
    ddp_ssn: int
    opcode: Opcode
    last: bool
    address: int
    payload: bytes


def expected_placements(capture: bytes, config: ReceiveConfig) -> tuple[list[Placement], int]:
    """The segments the capture places under `config`, and how many segments it has in error."""
    associations = {(a.local_port, a.peer_port, a.peer_ip, a.tag): a.index for a in config.associations if a.ddp}
    regions = {r.stag: r for r in config.regions}
    buffers: dict[tuple, list] = {}
    for buffer in config.buffers:  # MSNs from 1 in file order (RFC 5041 4.3)
        buffers.setdefault((buffer.association, buffer.stream_id, buffer.qn), []).append(buffer)
    streams = {(s.association, s.stream_id) for s in config.streams}
    failed: set[tuple[int, int]] = set()
    placements, errors = [], 0
    for record in read_capture(capture):
        frame = Frame.decode(record.data)
        if frame.eth.dst != config.local_mac or str(frame.ip.dst) != config.local_ip:
            continue
        packet = SctpPacket.decode(frame.sctp)
        association = associations.get((packet.dst_port, packet.src_port, str(frame.ip.src),
                                        packet.verification_tag))
        if association is None:
            continue
        for chunk in packet.chunks:
            if not (isinstance(chunk, DataChunk) and chunk.ppid == PPID_DDP_SEGMENT):
                continue
            stream = (association, chunk.stream_id)
            if stream not in streams or stream in failed:
                continue
            user_data = DdpSegmentChunkData.decode(chunk.user_data)
            segment = DdpSegment.decode(user_data.segment)
            header = segment.header
            if header.tagged:
                region = regions.get(header.stag)
                ok = (region is not None and Access.REMOTE_WRITE in region.access
                      and region.base_to <= header.to
                      and header.to + len(segment.payload) <= region.base_to + region.length)
                address = region.host_address + header.to - region.base_to if ok else None
            else:
                queue = buffers.get((*stream, header.qn), [])
                buffer = queue[header.msn - 1] if 1 <= header.msn <= len(queue) else None
                ok = buffer is not None and header.mo + len(segment.payload) <= buffer.length
                address = buffer.host_address + header.mo if ok else None
            if not ok:
                failed.add(stream)
                errors += 1
                continue
            placements.append(Placement(record.index, len(record.data), chunk.tsn, user_data.ddp_ssn,
                                        Opcode(rdmap_control_of(header).opcode), header.last, address,
                                        segment.payload))
    return placements, errors


def written_runs(placements: list[Placement]) -> dict[int, bytes]:
    """Contiguous writes merged into runs: start address -> bytes."""
    runs: dict[int, bytearray] = {}
    for placement in sorted(placements, key=lambda p: p.address):
        if not placement.payload:
            continue
        previous = max(runs, default=None)
        if previous is not None and previous + len(runs[previous]) == placement.address:
            runs[previous] += placement.payload
        else:
            runs[placement.address] = bytearray(placement.payload)
    return {address: bytes(data) for address, data in runs.items()}


PLACEMENTS, ERRORS = expected_placements(SAMPLE_CAPTURE.read_bytes(), ReceiveConfig.from_json(SAMPLE_CONFIG.read_text()))
RUNS = written_runs(PLACEMENTS)


def replay(capsys, *extra):
    assert main(["replay", CAPTURE, "--config", CONFIG, *extra]) == 0
    return capsys.readouterr().out


def test_the_scenario_places_what_the_sample_was_made_for():
    """The derivation sees the sample's traffic: a multi-segment RDMA Write, a Read Request, the four
    Sends, and the Write to an unregistered STag."""
    opcodes = [p.opcode for p in PLACEMENTS]
    assert opcodes.count(Opcode.RDMA_WRITE) > 1 and Opcode.RDMA_READ_REQUEST in opcodes
    assert {o for o in opcodes if o.is_send} == {o for o in Opcode if o.is_send}
    assert ERRORS == 1


def test_model_replay_prints_per_frame_and_a_digest(capsys):
    out = replay(capsys, "--model")
    first = PLACEMENTS[0]
    assert (f"#{first.frame} {first.frame_length}B\n    segment assoc=0 sid=0 tsn={first.tsn} ssn={first.ddp_ssn} "
            f"{first.opcode.name}{' L' if first.last else ''} {len(first.payload)}B: ACCEPTED "
            f"placed at 0x{first.address:x}") in out
    assert "RDMA_WRITE L 128B: ERROR DDP type 1 code 0x00" in out  # the unregistered STag, RFC 5041 7.2
    assert "to host: frame INIT" in out and "to host: chunk SESSION_CONTROL" in out
    placed = sum(len(data) for data in RUNS.values())
    assert f"host memory: {placed} bytes written in {len(RUNS)} runs, sha256 {memory_digest(RUNS)}" in out


def test_json_lines(capsys):
    lines = [json.loads(line) for line in replay(capsys, "--model", "--json").splitlines()]
    assert [line["index"] for line in lines[:-1]] == list(range(len(list(read_capture(SAMPLE_CAPTURE.read_bytes())))))
    summary = lines[-1]
    assert summary["counters"]["segments_accepted"] == len(PLACEMENTS)
    assert summary["counters"]["segments_error"] == ERRORS
    assert summary["memory_digest"] == memory_digest(RUNS)
    assert summary["written"] == {f"0x{address:x}": len(data) for address, data in sorted(RUNS.items())}


@pytest.mark.cocotb
@pytest.mark.parametrize("width", [8, 64])
def test_rtl_replay_equals_model_replay(capsys, width):
    model = replay(capsys, "--model", "--json")
    rtl = replay(capsys, "--width", str(width), "--json")
    assert rtl == model


def test_config_the_engine_cannot_hold(tmp_path, capsys):
    config = json.loads(Path(CONFIG).read_text())
    config["regions"][0]["stag"] = "0xb200"  # index 0xb2: past the 16-row region table
    path = tmp_path / "big.json"
    path.write_text(json.dumps(config))
    assert main(["replay", CAPTURE, "--config", str(path)]) == 1
    assert "cannot hold this configuration" in capsys.readouterr().err


def test_missing_files_and_bad_config(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "none.pcap"), "--config", CONFIG, "--model"]) == 1
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"local_ip": "10.0.0.2"}')
    assert main(["replay", CAPTURE, "--config", str(bad), "--model"]) == 1
    assert "missing 'local_mac'" in capsys.readouterr().err


def test_rtl_replay_without_the_sim_extra_names_the_extra(monkeypatch, capsys):
    """Without cocotb and friends, the RTL replay says which extra to install instead of an ImportError."""
    from sim import toolchain

    monkeypatch.setitem(toolchain.EXTRAS, "sim", ("cocotb", "rnic_no_such_package.axi"))
    assert main(["replay", CAPTURE, "--config", CONFIG]) == 1
    err = capsys.readouterr().err
    assert "needs the 'sim' extra" in err and "rnic_no_such_package.axi" in err and "rnic-sctp[sim]" in err
    assert main(["replay", CAPTURE, "--config", CONFIG, "--model"]) == 0  # the model needs no extra
