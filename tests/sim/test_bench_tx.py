"""`rnic bench tx`: the rows it measures are the engine's real frames, counted against the model."""

import pytest

from model.ddp.source import DdpSource
from model.rdmap.messages import Opcode, tagged_rsvd_ulp
from sim.cli import main
from sim.commands.bench_tx import MULPDU, run_row


def model_frame_bytes(payload: int) -> int:
    """The largest frame of a tagged message: Ethernet 14, IPv4 20, SCTP 12, DATA 16, DDP-SSN 2, segment
    (RFC 5043 5.2.1), the chunk padded to 4 bytes (RFC 4960 3.2)."""
    largest = max(len(s.encode()) for s in DdpSource(MULPDU).tagged_message(bytes(payload), 1, 0,
                                                                            tagged_rsvd_ulp(Opcode.RDMA_WRITE)))
    return 14 + 20 + 12 + 16 + -(-(2 + largest) // 4) * 4


def test_a_write_row_counts_the_frames_the_model_segments():
    row = run_row(8, 3000, "write")
    per_message = -(-3000 // (MULPDU - 14))     # RFC 5041 5.2: the tagged header is 14 bytes of each segment
    assert row["frames"] == row["messages"] * per_message
    assert row["frame_bytes"] == model_frame_bytes(3000)
    assert 0 < row["fraction"] <= row["beats_per_cycle"] <= 1
    assert row["latency"] > 0 and row["stalls"] >= 0


def test_a_read_response_row_answers_every_request():
    row = run_row(16, 64, "read-response")
    assert row["frames"] == row["messages"] and row["frame_bytes"] == model_frame_bytes(64)
    assert 0 < row["fraction"] <= 1


def test_the_command_prints_a_row_per_load_width_and_size(capsys):
    assert main(["bench", "tx", "--widths", "8", "--payloads", "0", "64", "--loads", "write"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines if line.startswith("write ")]
    assert [(row[1], row[2]) for row in rows] == [("8", "0"), ("8", "64")]


def test_a_payload_beyond_the_bench_memory_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["bench", "tx", "--payloads", "40000"])
    assert exit.value.code == 2
    assert "above the bench's maximum" in capsys.readouterr().err
