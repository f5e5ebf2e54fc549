"""The `rnic` command line: dissect, sample-capture, bench."""

from sim.samples import SAMPLE_CAPTURE
import json
import subprocess
import sys

from model.net.frames import build_frame
from model.net.pcap import write_pcap
from model.sctp.packet import DataChunk, SctpPacket
from sim.cli import main

SAMPLE = SAMPLE_CAPTURE


def test_dissect_sample_text(capsys):
    assert main(["dissect", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "RDMAP RDMA_READ_REQUEST" in out and "SESSION ENHANCED_ACCEPT" in out


def test_dissect_json_is_one_object_per_frame(capsys):
    assert main(["dissect", str(SAMPLE), "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    frames = [json.loads(line) for line in lines]
    assert [f["index"] for f in frames] == list(range(len(frames)))
    assert all({"index", "time", "length", "errors", "sctp"} <= f.keys() for f in frames)


def test_dissect_flags_bad_checksum_and_exits_1(tmp_path, capsys):
    packet = bytearray(SctpPacket(1, 2, 3, [DataChunk(1, 0, 0, 0, b"x")]).encode())
    packet[8] ^= 1
    frame = build_frame(bytes(packet), b"\x02" * 6, b"\x04" * 6, "10.0.0.1", "10.0.0.2")
    path = tmp_path / "bad.pcap"
    path.write_bytes(write_pcap([(0.0, frame)]))
    assert main(["dissect", str(path)]) == 1
    assert "CRC BAD" in capsys.readouterr().out


def test_dissect_garbage_file_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "garbage.pcap"
    path.write_bytes(b"not a capture at all")
    assert main(["dissect", str(path)]) == 1
    err = capsys.readouterr().err
    assert "unknown capture magic" in err and "Traceback" not in err


def test_dissect_missing_file(tmp_path, capsys):
    assert main(["dissect", str(tmp_path / "absent.pcap")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_sample_capture_command_writes_the_shipped_sample(tmp_path):
    out = tmp_path / "s.pcap"
    assert main(["sample-capture", str(out)]) == 0
    assert out.read_bytes() == SAMPLE.read_bytes()


def test_bench_model_prints_a_table(capsys):
    assert main(["bench", "model", "--seconds", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "decode+validate" in out
    rows = [line for line in out.splitlines() if line.strip().endswith(")") and "B |" in line]
    assert len(rows) == 3


def test_console_script_runs():
    result = subprocess.run([sys.executable, "-m", "sim.cli", "dissect", str(SAMPLE), "--json"],
                            capture_output=True, text=True, check=True)
    assert result.stdout.count("\n") > 10


def test_dissect_exits_0_on_a_capture_with_other_traffic(tmp_path, capsys):
    """ARP, TCP, ICMP, IPv6 and DNS beside clean DDP traffic: listed as not dissected, exit status 0."""
    from tests.sim.test_dissect import other_traffic, rdma_write_frame

    path = tmp_path / "mixed.pcap"
    path.write_bytes(write_pcap([(0.0, rdma_write_frame())] + [(0.0, data) for data in other_traffic()]))
    assert main(["dissect", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("not dissected") == len(other_traffic()) and "RDMA_WRITE" in out and "!" not in out


def test_dissect_udp_port_option(tmp_path, capsys):
    packet = SctpPacket(1, 2, 3, [DataChunk(1, 0, 0, 99, b"x")]).encode()
    frame = build_frame(packet, b"\x02" * 6, b"\x04" * 6, "10.0.0.1", "10.0.0.2", udp=True,
                        src_port=4001, dst_port=4000)
    path = tmp_path / "udp.pcap"
    path.write_bytes(write_pcap([(0.0, frame)]))
    assert main(["dissect", str(path), "--json"]) == 0
    assert "sctp" not in json.loads(capsys.readouterr().out)
    assert main(["dissect", str(path), "--json", "--udp-port", "4000"]) == 0
    assert json.loads(capsys.readouterr().out)["sctp"]["chunks"][0]["ppid"] == 99
    try:
        main(["dissect", str(path), "--udp-port", "70000"])
    except SystemExit as exit:
        assert exit.code == 2
    else:
        raise AssertionError("a port above 65535 is bad usage")
