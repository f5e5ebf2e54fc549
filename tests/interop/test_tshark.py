"""tshark, a decoder nobody here wrote, reads the model's captures.

.ci/run installs Debian's tshark; elsewhere the test is skipped unless
RNIC_REQUIRE_TSHARK=1, which turns a missing tshark into a failure.
"""

from sim.samples import SAMPLE_CAPTURE
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sim.commands.dissect import dissect_capture
from model.sctp.packet import ChunkType

SAMPLE = SAMPLE_CAPTURE


def tshark_fields(capture: Path, *fields: str) -> list[list[str]]:
    tshark = shutil.which("tshark")
    if tshark is None:
        if os.environ.get("RNIC_REQUIRE_TSHARK") == "1":
            pytest.fail("tshark is required (RNIC_REQUIRE_TSHARK=1) but not installed")
        pytest.skip("tshark not installed (apt-get install tshark)")
    command = [tshark, "-n", "-r", str(capture), "-o", "sctp.checksum:CRC-32C", "-T", "fields"]
    for name in fields:
        command += ["-e", name]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return [line.split("\t") for line in result.stdout.splitlines()]


def check_capture_agrees(capture: Path) -> int:
    rows = tshark_fields(capture, "sctp.checksum.status", "sctp.chunk_type", "sctp.data_payload_proto_id",
                         "sctp.verification_tag", "ip.checksum.status")
    ours = list(dissect_capture(capture.read_bytes()))
    assert len(rows) == len(ours)
    for (status, types, ppids, tag, _ip), frame in zip(rows, ours):
        chunks = frame["sctp"]["chunks"]
        assert status == "1", f"tshark finds a bad SCTP checksum in frame {frame['index']}"
        assert [int(t) for t in types.split(",")] == [int(ChunkType[c["type"]]) for c in chunks]
        assert [int(p) for p in ppids.split(",") if p] == [c["ppid"] for c in chunks if c["type"] == "DATA"]
        assert int(tag, 16) == frame["sctp"]["verification_tag"]
    return len(rows)


def test_tshark_agrees_on_the_sample_capture():
    assert check_capture_agrees(SAMPLE) > 30
