"""`rnic replay`: captures through the RTL receive engine and through the model.

The expected placements of the sample capture are derived here from the
capture and its configuration, not copied from a run: every frame is decoded
with the model's codecs (Ethernet, IPv4, UDP, SCTP, the RFC 5043 DDP Segment
Chunk, the RFC 5041 DDP headers) and each DDP segment is placed by the
RFC 5041 rules alone (tagged: the region of its STag at TO - base TO, 4.2 and
8.3.1; untagged: the buffer its QN and MSN name, at MO, 4.3; the first error
stops the stream, 7.1), without the receive engine's scoreboard.

The captures built here (with `sim.traffic.rx` and the model's codecs) each
come with what must be listed under every frame, from how the frame was
built and the RFC rule it meets: a refused segment long enough to keep the
engine discarding for hundreds of cycles, chunk walks that break (RFC 4960
3.2), and a frame retransmitted with the same TSN. The RTL backend must list
the same as the model backend.
"""

import json
import re
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from model.ddp.memory import Access
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment
from model.engine.config import ReceiveConfig
from model.net.frames import Frame, build_frame
from model.net.pcap import read_capture, write_pcap
from model.rdmap.messages import Opcode, rdmap_control_of
from model.sctp.packet import COMMON_HEADER_LENGTH, PPID_DDP_SEGMENT, DataChunk, SctpPacket, walk_chunks
from sim.cli import main
from sim.commands.replay import (FrameOutputs, Record, ReplayFailed, attribute_in_order, memory_digest, replay_model,
                                 replay_rtl)
from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG
from sim.traffic.rx import FLAG_B, FLAG_E, FLAG_U, PEER_MAC, Catalogue, EngineShape, catalogue_config

REPLAY_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli" / "replay.md"

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


def record_line(placement: Placement) -> str:
    """The segment's line of the replay's text (a frame's first item follows its frame's line)."""
    return (f"    segment assoc=0 sid=0 tsn={placement.tsn} ssn={placement.ddp_ssn} {placement.opcode.name}"
            f"{' L' if placement.last else ''} {len(placement.payload)}B: ACCEPTED placed at 0x{placement.address:x}")


def test_model_replay_prints_per_frame_and_a_digest(capsys):
    """Reports per message (the engine's reset value): a message's last segment has a record, a middle one
    (the multi-segment Write's first) none (abi.rx.report_withheld)."""
    out = replay(capsys, "--model")
    middle, last = PLACEMENTS[0], next(p for p in PLACEMENTS if p.last)
    assert not middle.last and record_line(middle) not in out
    assert f"#{last.frame} {last.frame_length}B\n{record_line(last)}" in out
    assert "RDMA_WRITE L 128B: ERROR DDP type 1 code 0x00" in out  # the unregistered STag, RFC 5041 7.2
    assert "to host: frame INIT" in out and "to host: chunk SESSION_CONTROL" in out
    placed = sum(len(data) for data in RUNS.values())
    assert f"host memory: {placed} bytes written in {len(RUNS)} runs, sha256 {memory_digest(RUNS)}" in out


def test_segment_reports_in_the_configuration_print_every_segment(capsys, tmp_path):
    """``segment_reports`` in the configuration: a record for every segment, the middle ones too."""
    config = tmp_path / "segment_reports.json"
    config.write_text(json.dumps(replace(ReceiveConfig.from_json(SAMPLE_CONFIG.read_text()),
                                         segment_reports=True).to_dict()))
    assert main(["replay", CAPTURE, "--config", str(config), "--model"]) == 0
    out = capsys.readouterr().out
    assert all(record_line(placement) in out for placement in PLACEMENTS)


def test_json_lines(capsys):
    lines = [json.loads(line) for line in replay(capsys, "--model", "--json").splitlines()]
    assert [line["index"] for line in lines[:-1]] == list(range(len(list(read_capture(SAMPLE_CAPTURE.read_bytes())))))
    summary = lines[-1]
    assert summary["counters"]["segments_accepted"] == len(PLACEMENTS)
    assert summary["counters"]["segments_error"] == ERRORS
    assert summary["memory_digest"] == memory_digest(RUNS)
    assert summary["written"] == {f"0x{address:x}": len(data) for address, data in sorted(RUNS.items())}
    assert "memory" not in summary


def test_json_bytes_give_the_placed_bytes(capsys):
    """--bytes adds every written run's contents: the payloads the RFC 5041 placement puts there."""
    summary = json.loads(replay(capsys, "--model", "--json", "--bytes").splitlines()[-1])
    assert summary["memory"] == {f"0x{address:x}": data.hex() for address, data in sorted(RUNS.items())}
    first = min(RUNS)
    text = replay(capsys, "--model", "--bytes")
    assert f"    0x{first:x}: {RUNS[first][:32].hex()}" in text.splitlines()


def test_json_keys_are_documented_on_the_replay_page(capsys):
    """Every key `--json --bytes` prints, at every level, is named on the command's page (docs/cli/replay.md)."""
    section = REPLAY_PAGE.read_text().split("\n## Options")[0]
    documented = set(re.findall(r"`([a-z_]+)`", section))
    lines = [json.loads(line) for line in replay(capsys, "--model", "--json", "--bytes").splitlines()]
    keys = set()
    for line in lines[:-1]:
        keys |= set(line)
        for item in line["host"] + line["records"] + line["acks"]:
            keys |= set(item)
    keys |= set(lines[-1]) | set(lines[-1]["counters"])
    assert keys - documented == set()


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
    err = capsys.readouterr().err
    assert "does not fit the RTL engine" in err and "index 178" in err


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


# -- captures built for the replay's own failure modes -------------------------------------------

SHAPE = EngineShape()


@dataclass(frozen=True)
class Case:
    """A capture and its configuration on disk, with what must be listed under each frame."""

    capture: Path
    config: Path
    frames: list[bytes]
    expected: list[list[tuple]]  # per frame: ("segment", tsn, status), ("chunk_error", tsn, kind), (source, reason)


def write_case(tmp_path: Path, config: ReceiveConfig, frames: list[tuple[bytes, list[tuple]]]) -> Case:
    capture, path = tmp_path / "case.pcap", tmp_path / "case.json"
    capture.write_bytes(write_pcap((i * 1e-3, frame) for i, (frame, _) in enumerate(frames)))
    path.write_text(json.dumps(config.to_dict()))
    return Case(capture, path, [frame for frame, _ in frames], [sorted(expected) for _, expected in frames])


def data_tsns(frame: bytes) -> list[int]:
    """The TSNs of the DATA chunks a frame carries, up to where its chunk walk breaks (RFC 4960 3.2)."""
    sctp = Frame.decode(frame, verify=False).sctp
    return [c.data_tsn for c in walk_chunks(sctp[COMMON_HEADER_LENGTH:]) if getattr(c, "data_tsn", None) is not None]


def listing(lines: list[dict]) -> list[list[tuple]]:
    """What the JSON output lists under each captured frame, in the expectation's terms."""
    def entry(item: dict) -> tuple:
        if "source" in item:
            return item["source"], item["reason"]
        if item["kind"] == "chunk_error":
            return "chunk_error", item["tsn"], item["chunk_error"]
        return "segment", item["tsn"], item["status"]
    assert all(line["index"] is not None for line in lines[:-1]), "an output was matched to no frame"
    return [sorted(entry(item) for item in line["host"] + line["records"]) for line in lines[:-1]]


def run_case(capsys, case: Case, *extra: str) -> tuple[list[dict], str]:
    assert main(["replay", str(case.capture), "--config", str(case.config), "--json", *extra]) == 0
    captured = capsys.readouterr()
    return [json.loads(line) for line in captured.out.splitlines()], captured.err


def broadcast_frame() -> bytes:
    """Not for our MAC: the whole frame goes to the host (NOT_LOCAL_MAC)."""
    return build_frame(b"\0" * 16, PEER_MAC, bytes.fromhex("ffffffffffff"), "10.0.0.1", "10.0.0.255")


def long_refused_segment_case(tmp_path: Path, width: int) -> Case:
    """An RDMA Write to an unregistered STag with 250 beats of payload: refused (RFC 5041 7.1 tagged
    item 1, DDP error type 1 code 0x00, 7.2), and the engine discards its payload a beat per cycle
    for longer than the 200 quiet cycles the old testbench took for the end; then frames of every
    kind, on other streams, which the error must not touch."""
    config = catalogue_config(SHAPE)
    c = Catalogue(config, SHAPE)
    refused = c.segment_frame(0, 0, c.write(stag=c.stag_unregistered, length=250 * width))
    probes = [c.probe(0, 1), c.probe(1, 0), c.probe(0, 2)]
    ordered = c.frame(1, [c.sender.segment(1, 1, c.write(), flags=FLAG_B | FLAG_E)])  # U=0, RFC 5043 10
    last = c.probe(0, 3)
    return write_case(tmp_path, config, [
        (refused, [("segment", data_tsns(refused)[0], "ERROR")]),
        *[(probe, [("segment", data_tsns(probe)[0], "ACCEPTED")]) for probe in probes],
        (ordered, [("chunk_error", data_tsns(ordered)[0], "ORDERED")]),
        (broadcast_frame(), [("frame", "NOT_LOCAL_MAC")]),
        (last, [("segment", data_tsns(last)[0], "ACCEPTED")]),
    ])


def broken_walks_case(tmp_path: Path) -> Case:
    """Chunk walks that break (RFC 4960 3.2: a Length below 4, a Length past the packet) and DATA
    chunks in error, each reported with the TSN it holds or 0 (RFC 5043 9, 10, 5.2.2), between
    frames whose segments are placed."""
    config = catalogue_config(SHAPE)
    c = Catalogue(config, SHAPE)
    s = c.sender
    first = s.segment(0, 0, c.write())
    zero_length = c.frame(0, [first, struct.pack("!BBH", 0, FLAG_U | FLAG_B | FLAG_E, 0) + bytes(12)])
    past_end = bytearray(s.segment(0, 1, c.write(), lost=True))
    struct.pack_into("!H", past_end, 2, len(past_end) + 64)
    past_end_frame = c.frame(0, [bytes(past_end)])
    no_tsn = c.frame(0, [struct.pack("!BBH", 0, FLAG_U | FLAG_B | FLAG_E, 6) + bytes(4)])  # DATA of 6 bytes
    ordered = c.frame(0, [s.segment(0, 2, c.write(), flags=FLAG_B | FLAG_E, lost=True)])
    fragmented = s.segment(1, 0, c.write(), flags=FLAG_U | FLAG_B, lost=True)
    placed = s.segment(1, 0, c.write())
    bundle = c.frame(1, [fragmented, placed])
    probe = c.probe(0, 3)
    return write_case(tmp_path, config, [
        (zero_length, [("segment", data_tsns(zero_length)[0], "ACCEPTED"), ("chunk_error", 0, "TOO_SHORT")]),
        (past_end_frame, [("chunk_error", 0, "PAST_END")]),
        (no_tsn, [("chunk_error", 0, "TOO_SHORT")]),
        (ordered, [("chunk_error", data_tsns(ordered)[0], "ORDERED")]),
        (bundle, [("chunk_error", data_tsns(bundle)[0], "FRAGMENTED"),
                  ("segment", data_tsns(bundle)[1], "ACCEPTED")]),
        (probe, [("segment", data_tsns(probe)[0], "ACCEPTED")]),
    ])


def retransmission_case(tmp_path: Path) -> Case:
    """A segment first sent with a CRC32c that fails (discarded, RFC 4960 6.8), then retransmitted
    with the same TSN (RFC 4960 6.3.3), then the retransmission again byte for byte: the first copy
    is placed, the second is a DUPLICATE by its DDP-SSN (RFC 5043 10), each listed under itself."""
    config = catalogue_config(SHAPE)
    c = Catalogue(config, SHAPE)
    chunk = c.sender.segment(0, 0, c.write())
    lost = c.frame(0, [chunk], bad_crc=True)
    retransmitted = c.frame(0, [chunk])
    later = c.probe(0, 0)
    tsn = data_tsns(retransmitted)[0]
    return write_case(tmp_path, config, [
        (lost, []),
        (retransmitted, [("segment", tsn, "ACCEPTED")]),
        (retransmitted, [("segment", tsn, "DUPLICATE")]),
        (later, [("segment", data_tsns(later)[0], "ACCEPTED")]),
    ])


def completed_msn_again_case(tmp_path: Path) -> Case:
    """A Send of 50 bytes with MSN 1 completes; the next frame, back to back, is another Send naming MSN 1
    (16 bytes): the message was delivered, so its MSN lies behind the available buffers (RFC 5041 7.1
    untagged item 5: DDP 0x2/0x03, 7.2) and is never delivered twice (5.3); the stream's next Send is
    dropped (7.1: every later segment of the stream), another stream's Send is placed."""
    config = catalogue_config(SHAPE)
    c = Catalogue(config, SHAPE)
    frames = [c.segment_frame(0, 0, c.send(0, 0, msn=1, length=50)),
              c.segment_frame(0, 0, c.send(0, 0, msn=1, length=16)),
              c.segment_frame(0, 0, c.send(0, 0, msn=2, length=16)),
              c.segment_frame(0, 1, c.send(0, 1, msn=1, length=16))]
    statuses = ["ACCEPTED", "ERROR", "DROPPED", "ACCEPTED"]
    return write_case(tmp_path, config, [(frame, [("segment", data_tsns(frame)[0], status)])
                                         for frame, status in zip(frames, statuses)])


@pytest.mark.parametrize("build", [broken_walks_case, retransmission_case, completed_msn_again_case])
def test_model_lists_every_output_under_its_own_frame(tmp_path, capsys, build):
    case = build(tmp_path)
    lines, _ = run_case(capsys, case, "--model")
    assert listing(lines) == case.expected


def test_model_lists_the_frames_after_a_long_refused_segment(tmp_path, capsys):
    case = long_refused_segment_case(tmp_path, 8)
    lines, _ = run_case(capsys, case, "--model")
    assert listing(lines) == case.expected
    assert lines[0]["records"][0]["error"] == [1, 1, 0]  # DDP, tagged buffer error, invalid STag (RFC 5041 7.2)


def model_frames(case: Case) -> list[FrameOutputs]:
    return replay_model(case.capture.read_bytes(), ReceiveConfig.from_json(case.config.read_text())).frames


def test_an_engine_output_the_model_lacks_is_listed_apart_and_the_rest_keep_their_frames(tmp_path):
    reference = model_frames(broken_walks_case(tmp_path))
    items = [item for frame in reference for item in frame.host + frame.records + frame.acks]
    stray = Record("chunk_error", 0, 0xDEAD, chunk_error="ORDERED")
    frames = attribute_in_order(items[:2] + [stray] + items[2:], reference)
    assert frames[:-1] == reference
    assert frames[-1] == FrameOutputs(None, [], [stray])


def test_an_output_the_engine_lacks_leaves_the_later_ones_on_their_frames(tmp_path):
    case = broken_walks_case(tmp_path)
    reference = model_frames(case)
    ordered = next(r for r in reference[3].records if r.chunk_error == "ORDERED")
    items = [item for frame in reference for item in frame.host + frame.records + frame.acks if item is not ordered]
    frames = attribute_in_order(items, reference)
    assert frames[3].records == [] and len(frames) == len(case.frames)
    assert [f.records for i, f in enumerate(frames) if i != 3] == [f.records for i, f in enumerate(reference) if i != 3]


@pytest.mark.cocotb
@pytest.mark.parametrize("width", [8, 32])
def test_rtl_processes_every_frame_after_a_long_refused_segment(tmp_path, capsys, width):
    case = long_refused_segment_case(tmp_path, width)
    model, _ = run_case(capsys, case, "--model")
    rtl, err = run_case(capsys, case, "--width", str(width))
    assert listing(rtl) == case.expected
    assert rtl == model
    assert f"consumed {len(case.frames)} frames and drained" in err


@pytest.mark.cocotb
@pytest.mark.parametrize("build", [broken_walks_case, retransmission_case])
def test_rtl_lists_every_output_under_its_own_frame(tmp_path, capsys, build):
    case = build(tmp_path)
    model, _ = run_case(capsys, case, "--model")
    rtl, _ = run_case(capsys, case)
    assert listing(rtl) == case.expected
    assert rtl == model


def test_model_refuses_a_completed_msn_with_the_rfc_error(tmp_path, capsys):
    lines, _ = run_case(capsys, completed_msn_again_case(tmp_path), "--model")
    (refused,) = lines[1]["records"]
    assert refused["error"] == [1, 2, 3]  # layer DDP, Untagged Buffer Error, MSN range (RFC 5041 7.2)
    assert [record["message_length"] for line in lines[:-1] for record in line["records"]] == [50, None, None, 16]
    assert lines[-1]["written"] == {"0x30000": 50, "0x30600": 16}  # no byte of the refused Send


@pytest.mark.cocotb
def test_rtl_refuses_a_completed_msn_back_to_back(tmp_path, capsys):
    """The frames back to back (gap 0) at W = 8: the RTL lists what the model lists."""
    case = completed_msn_again_case(tmp_path)
    model, _ = run_case(capsys, case, "--model")
    rtl, _ = run_case(capsys, case, "--gap", "0")
    assert listing(rtl) == case.expected
    assert rtl == model


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("gap", [0, 10, 40])
def test_rtl_refuses_a_completed_msn_at_every_gap_on_a_wide_datapath(tmp_path, capsys, gap):
    case = completed_msn_again_case(tmp_path)
    model, _ = run_case(capsys, case, "--model")
    rtl, _ = run_case(capsys, case, "--width", "32", "--gap", str(gap))
    assert rtl == model


def sample_beats(width: int) -> list[int]:
    return [-(-len(record.data) // width) for record in read_capture(SAMPLE_CAPTURE.read_bytes())]


def drained_cycles(err: str) -> int:
    return int(re.search(r"drained in (\d+) cycles", err).group(1))


@pytest.mark.slow   # kept out of the default suite, to hold it under 8 minutes
@pytest.mark.cocotb
def test_rtl_gaps_between_frames_change_the_timing_not_the_output(capsys):
    gap = 13
    model = replay(capsys, "--model", "--json")
    assert main(["replay", CAPTURE, "--config", CONFIG, "--json", "--gap", str(gap)]) == 0
    captured = capsys.readouterr()
    assert captured.out == model
    beats = sample_beats(8)
    # The last frame cannot start before every earlier frame went in, each after its gap.
    assert drained_cycles(captured.err) > sum(beats[:-1]) + gap * (len(beats) - 1)


@pytest.mark.slow   # kept out of the default suite, to hold it under 8 minutes
@pytest.mark.cocotb
def test_rtl_memory_back_pressure_changes_the_timing_not_the_output(capsys):
    model = replay(capsys, "--model", "--json")
    assert main(["replay", CAPTURE, "--config", CONFIG, "--json"]) == 0
    free = capsys.readouterr()
    assert main(["replay", CAPTURE, "--config", CONFIG, "--json", "--memory-stall", "0.6"]) == 0
    stalled = capsys.readouterr()
    assert stalled.out == free.out == model
    assert drained_cycles(stalled.err) > drained_cycles(free.err)


def test_model_says_the_rtl_options_do_not_apply(capsys):
    plain = replay(capsys, "--model")
    assert main(["replay", CAPTURE, "--config", CONFIG, "--model", "--gap", "5", "--memory-stall", "0.5"]) == 0
    captured = capsys.readouterr()
    assert captured.out == plain and "do not apply" not in captured.out
    assert "--gap, --memory-stall and --waves apply to the RTL engine" in captured.err


@pytest.mark.slow   # kept out of the default suite, to hold it under 8 minutes
@pytest.mark.cocotb
def test_rtl_replay_that_cannot_drain_in_its_budget_says_how_far_it_got(tmp_path):
    """The first frame alone is 250 beats: after 100 cycles the engine has consumed none of them."""
    case = long_refused_segment_case(tmp_path, 8)
    with pytest.raises(ReplayFailed, match=rf"did not drain within 100 cycles: it consumed 0 of the "
                                           rf"{len(case.frames)} frames sent"):
        replay_rtl(case.capture, case.config, 8, budget_cycles=100)


def test_rtl_replay_refuses_an_empty_frame(tmp_path, capsys):
    """A capture record of no bytes has no AXI4-Stream transfer to carry it: one line, exit 1, no simulation."""
    frames = [record.data for record in read_capture(SAMPLE_CAPTURE.read_bytes())]
    capture = tmp_path / "empty.pcap"
    capture.write_bytes(write_pcap([(0.0, frames[0]), (0.1, b""), (0.2, frames[1])]))
    assert main(["replay", str(capture), "--config", CONFIG]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "frame #1 is empty" in err[0]
