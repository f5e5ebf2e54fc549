"""`rnic demo` and `rnic bench e2e`: the commands run, report, write a readable capture, and fail honestly."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from model.link import Side
from sim.cli import main
from sim.demo import WRITE_SINK, ProgressBar, TwoHosts, demo_command

SUMMARY_FIELDS = (
    "peer adaptation code point 1 (DDP on)",
    "session 0 A (initiator): IRD 4 ORD 4, peer-to-peer, RTR sent: zero-length RDMA Write",
    "session 0 B (responder): IRD 4 ORD 4, peer-to-peer, RTR received: zero-length RDMA Write",
    "RDMA Write", "RDMA Read", "Send with Invalidate", "Send with SE", "Send with SE and Invalidate",
    "retransmissions A: timeout", "retransmissions B: timeout", "fast",
    "link frames: sent", "lost", "duplicated", "corrupted",
    "time: simulated", "wall", "model goodput:", "checks:", "result: PASS",
)


def test_demo_command_exits_0_and_prints_the_summary(tmp_path: Path) -> None:
    """The installed entry point end to end: exit status, summary on stdout, no bar when stderr is no tty."""
    capture = tmp_path / "demo.pcap"
    result = subprocess.run(
        [sys.executable, "-m", "sim.cli", "demo", "--size", "3000", "--loss", "0.02", "--seed", "4",
         "--pcap", str(capture)],
        capture_output=True, text=True, cwd=Path(__file__).parent.parent, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for text in SUMMARY_FIELDS:
        assert text in result.stdout, text
    assert "3,000" in result.stdout and "36,000" in result.stdout  # bytes per operation and in total
    assert "0 failed" in result.stdout and "FAILED" not in result.stdout
    assert "\r" not in result.stderr
    assert capture.stat().st_size > 0 and f"capture: {capture}" in result.stdout


def test_demo_capture_is_read_by_rnic_dissect(tmp_path: Path, capsys) -> None:
    """A clean-link capture: `rnic dissect` reads every frame without an error (exit 0) down to RDMAP."""
    capture = tmp_path / "clean.pcap"
    assert main(["demo", "--size", "2000", "--pcap", str(capture), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["dissect", str(capture)]) == 0
    out = capsys.readouterr().out
    for text in ("ENHANCED_INITIATE", "ENHANCED_ACCEPT", "RDMA_WRITE", "RDMA_READ_REQUEST", "RDMA_READ_RESPONSE",
                 "SEND_WITH_SE_AND_INVALIDATE", "SHUTDOWN_COMPLETE"):
        assert text in out, text


def test_demo_over_udp_with_empty_messages(capsys) -> None:
    """RFC 6951 encapsulation and zero-length messages (RFC 5041 5.2: one segment each)."""
    assert main(["demo", "--udp", "--size", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "SCTP over UDP 9899" in out and "MULPDU 1426" in out and "result: PASS" in out


def test_a_failed_verification_exits_1() -> None:
    """A byte changed in B's RDMA Write sink after placement (the test-only `tamper` hook) fails the
    byte check, and the demo says which check failed and exits non-zero."""

    def flip_a_placed_byte(bed: TwoHosts) -> None:
        memory = bed.memory[Side.B]
        memory.write(WRITE_SINK + 100, bytes([memory.read(WRITE_SINK + 100, 1)[0] ^ 0xFF]))

    out = io.StringIO()
    status = demo_command(0.0, 1, False, 1000, None, False, out=out, tamper=flip_a_placed_byte)
    text = out.getvalue()
    assert status == 1
    assert "FAILED: RDMA Write A->B: every byte placed" in text
    assert "FAILED: host B: nothing written outside" not in text  # the sink is a registered region
    assert "result: FAIL" in text


def test_progress_bar_redraws_in_place_and_ends_the_line() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream)
    bar(0.5)
    bar(1.0)
    text = stream.getvalue()
    assert text.startswith("\r[" + "#" * 20 + " " * 20 + "]") and " 50%" in text
    assert text.endswith("100%\n")


def test_bench_e2e_prints_a_table(capsys) -> None:
    assert main(["bench", "e2e", "--total", "65536"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.strip().endswith(tuple("0123456789")) and "|" in line]
    assert [row.split("|")[0].strip() for row in rows] == ["4096B", "4096B", "1048576B", "1048576B"]
    assert [row.split("|")[1].strip() for row in rows] == ["0%", "1%", "0%", "1%"]
    assert "MB/s wall" in lines[1] and "MB/s sim" in lines[1]
