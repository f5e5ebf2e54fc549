"""`rnic replay`: the sample capture through the RTL receive engine and through the model."""

from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG
import json
from pathlib import Path

import pytest

from sim.cli import main

CAPTURE, CONFIG = str(SAMPLE_CAPTURE), str(SAMPLE_CONFIG)


def replay(capsys, *extra):
    assert main(["replay", CAPTURE, "--config", CONFIG, *extra]) == 0
    return capsys.readouterr().out


def test_model_replay_prints_per_frame_and_a_digest(capsys):
    out = replay(capsys, "--model")
    assert "#8 1090B\n    segment assoc=0 sid=0 tsn=1003 ssn=1 RDMA_WRITE 1010B: ACCEPTED placed at 0x40010" in out
    assert "RDMA_WRITE L 128B: ERROR DDP type 1 code 0x00" in out  # the unregistered STag, RFC 5041 7.2
    assert "to host: frame INIT" in out and "to host: chunk SESSION_CONTROL" in out
    assert "host memory: 2772 bytes written in 6 runs, sha256 " in out


def test_json_lines(capsys):
    lines = [json.loads(line) for line in replay(capsys, "--model", "--json").splitlines()]
    assert [line["index"] for line in lines[:-1]] == list(range(36))
    assert lines[-1]["counters"]["segments_accepted"] == 8 and len(lines[-1]["memory_digest"]) == 64


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
