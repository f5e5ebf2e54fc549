"""`rnic demo`: the command runs, reports, writes a readable capture, and fails honestly (`rnic bench e2e`'s
tests are in test_bench_e2e.py)."""

from __future__ import annotations

import io
import re
import tracemalloc
import subprocess
import sys
from pathlib import Path

import pytest

import sim.commands.demo
from model.rnic.link import LinkConfig, Side
from model.rnic.events import Closed, Failed
from model.sctp.events import RetransmissionLimit
from model.sctp.state import AssociationState
from model.net.frames import Frame
from model.net.pcap import read_capture
from model.sctp.packet import PPID_DDP_SESSION_CONTROL, SctpPacket, ShutdownCompleteChunk
from sim.cli import main
from tests.mulpdu import mulpdu
from model.rnic.pair import HostPair, host_config
from sim.commands.demo import LARGEST_SIZE, MIB, WRITE_SINK, MemoryMap, ProgressBar, ProgressLines, demo_command, print_summary, run_demo

SUMMARY_FIELDS = (
    "peer adaptation code point 1 (DDP on)",
    "session 0 A (initiator): IRD 4 ORD 4, peer-to-peer, RTR sent: zero-length RDMA Write",
    "session 0 B (responder): IRD 4 ORD 4, peer-to-peer, RTR received: zero-length RDMA Write",
    "RDMA Write", "RDMA Read", "Send with Invalidate", "Send with SE", "Send with SE and Invalidate",
    "retransmissions A: timeout", "retransmissions B: timeout", "fast",
    "teardown A: Closed (SHUTDOWN COMPLETE, RFC 4960 9.2)", "teardown B: Closed (SHUTDOWN COMPLETE, RFC 4960 9.2)",
    "link frames: sent", "lost", "duplicated", "corrupted",
    "time: simulated", "wall", "model goodput:", "checks:", "result: PASS",
)


def test_demo_command_exits_0_and_prints_the_summary(tmp_path: Path) -> None:
    """The installed entry point end to end: exit status, summary on stdout, no bar when stderr is no tty."""
    capture = tmp_path / "demo.pcap"
    result = subprocess.run(
        [sys.executable, "-m", "sim.cli", "demo", "--size", "3000", "--loss", "0.02", "--seed", "4",
         "--pcap", str(capture)],
        capture_output=True, text=True, cwd=Path(__file__).parents[2], timeout=120,
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
    """RFC 6951 encapsulation and zero-length messages (RFC 5041 5.2: one segment each); the MULPDU printed
    is the demo hosts' path MTU less IPv4, UDP, SCTP, DATA and DDP-SSN overheads (RFC 5043 5.2, 9)."""
    assert main(["demo", "--udp", "--size", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    expected = mulpdu(host_config(Side.A, udp=True).path_mtu, udp=True)
    assert "SCTP over UDP 9899" in out and f"MULPDU {expected}" in out and "result: PASS" in out


def test_a_failed_verification_exits_1() -> None:
    """A byte changed in B's RDMA Write sink after placement (the test-only `tamper` hook) fails the
    byte check, and the demo says which check failed and exits non-zero."""

    def flip_a_placed_byte(bed: HostPair) -> None:
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


def test_progress_bar_cut_short_ends_its_line_on_close() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream)
    bar(0.25)
    bar.close()
    assert stream.getvalue().endswith(" 25%\n")
    bar.close()  # a closed bar writes nothing more
    assert stream.getvalue().count("\n") == 1


def test_progress_lines_for_a_log_say_how_far_now_and_then() -> None:
    """Without a terminal: plain lines (no carriage return), at most one per interval, none at 100%."""
    stream = io.StringIO()
    lines = ProgressLines(stream, size=1000, interval=0.0)
    lines(0.5)
    lines(1.0)
    assert stream.getvalue() == "rnic demo: 50% of 12,000 bytes placed after 0 s\n"
    quiet = io.StringIO()
    ProgressLines(quiet, size=1000, interval=3600.0)(0.5)
    assert quiet.getvalue() == ""


def test_a_lost_final_shutdown_complete_is_answered_out_of_the_blue_and_both_close() -> None:
    """A's SHUTDOWN COMPLETE is lost (the stall once reported for `--loss 0.05 --seed 3`); A, closed and
    without a Listener, answers B's retransmitted SHUTDOWN ACK out of the blue (RFC 4960 8.4 rule 5), so
    both end Closed and the run passes."""
    dropped: list[bytes] = []

    def lose_the_first_shutdown_complete(bed: HostPair) -> None:
        def tap(side: Side, frame: bytes) -> bool:
            chunks = SctpPacket.decode(Frame.decode(frame).sctp).chunks
            if side is Side.A and not dropped and any(isinstance(c, ShutdownCompleteChunk) for c in chunks):
                dropped.append(frame)
                return False
            return True
        bed.tap = tap

    result = run_demo(size=3000, tamper=lose_the_first_shutdown_complete, record=True)
    out = io.StringIO()
    print_summary(result, 0.0, 1, False, 3000, out)
    text = out.getvalue()
    assert dropped, "no SHUTDOWN COMPLETE was sent"
    assert "teardown A: Closed" in text and "teardown B: Closed" in text and "result: PASS" in text, text
    arrived = []  # every SHUTDOWN COMPLETE that reached B: (source, T bit)
    for _, frame in result.testbed.link.recording:
        decoded = Frame.decode(frame)
        chunks = SctpPacket.decode(decoded.sctp).chunks
        arrived += [(str(decoded.ip.src), c.tag_reflected) for c in chunks if isinstance(c, ShutdownCompleteChunk)]
    assert arrived == [("10.0.0.1", True)]  # the first was lost; the OOTB answer (T=1) closed B


@pytest.mark.parametrize("seed", range(1, 13))
def test_demo_at_5pct_loss_passes_and_closes_for_seeds_1_to_12(seed: int) -> None:
    """`rnic demo --loss 0.05` for seeds 1..12 at 64 KiB per operation (the 1 MiB default, ~3 s a seed,
    is run by hand): every check passes and both associations end Closed."""
    result = run_demo(loss=0.05, seed=seed, size=65536)
    assert result.passed, [check.name for check in result.checks if not check.passed]
    assert all(isinstance(event, Closed) for event in result.teardown.values()), result.teardown


def test_a_teardown_that_never_ends_is_bounded_and_exits_1(monkeypatch) -> None:
    """After the data checks the link goes dead: the close phase stops at CLOSE_TIME_LIMIT of simulated time
    (lowered here) instead of looping, the summary names both hosts as not closed, and the exit status is 1."""
    monkeypatch.setattr(sim.commands.demo, "CLOSE_TIME_LIMIT", 20.0)

    def cut_the_link(bed: HostPair) -> None:
        bed.link.config = LinkConfig(loss=1.0)

    out = io.StringIO()
    status = demo_command(0.0, 1, False, 1000, None, False, out=out, tamper=cut_the_link)
    text = out.getvalue()
    assert status == 1, text
    assert "FAILED: teardown: both hosts' associations ended" in text
    assert "host A and B did not close within" in text and "limit 20 s" in text
    assert "teardown A: did not close" in text and "teardown B: did not close" in text
    assert "RDMA Write A->B: every byte placed" not in text  # the data checks passed
    assert "result: FAIL" in text


def test_an_aborted_teardown_is_reported_not_failed() -> None:
    """B never answers A's session Terminate: A's close() deadline ABORTs (RFC 4960 9.1), B is Aborted.  Both
    hosts are finished, the data was verified before, so the run passes and the summary says how each ended."""

    def deaf_to_terminate(bed: HostPair) -> None:
        sessions = bed.b._sessions
        receive = sessions.receive
        sessions.receive = lambda message: (
            None if message.ppid == PPID_DDP_SESSION_CONTROL else receive(message))

    out = io.StringIO()
    status = demo_command(0.0, 1, False, 1000, None, False, out=out, tamper=deaf_to_terminate)
    text = out.getvalue()
    assert status == 0, text
    assert "teardown A: aborted by close(): close(): DDP streams [0] not released" in text
    assert "teardown B: Aborted by the peer (RFC 4960 9.1): USER_INITIATED_ABORT" in text
    assert "result: PASS" in text


def test_two_hosts_close_returns_instead_of_raising_when_nothing_is_left() -> None:
    """`HostPair.close` never raises Stalled: with no timer running and nothing in flight (here: hosts that
    never connected) it returns at once, reporting that neither host finished."""
    bed = HostPair.create(LinkConfig())
    assert bed.close(limit=60.0) == {Side.A: None, Side.B: None}
    assert bed.now == 0.0


FAILURE_LINE = re.compile(r"^association ([AB]): Failed in (\S+): (.*)$", re.MULTILINE)


@pytest.mark.parametrize("seed", (1, 2, 3, 10))
def test_demo_at_50pct_loss_completes_or_reports_the_sctp_limit_that_ended_it(seed: int, capsys) -> None:
    """`rnic demo --loss 0.5` once stopped within a second with "stalled: nothing in flight" and nothing else.
    Now a run passes, or it exits 1 having said which phase stopped, which host's association failed, in
    which state, after which retransmission limit (Max.Init.Retransmits only while opening, RFC 4960 5.1 C;
    Association.Max.Retrans once up, 8.1), and the usual summary with the link's statistics."""
    status = main(["demo", "--loss", "0.5", "--seed", str(seed), "--size", "2000", "--no-progress"])
    out = capsys.readouterr().out
    if status == 0:
        assert "result: PASS" in out
        return
    assert status == 1 and "result: FAIL" in out
    assert re.search(r"^stopped during (association set-up|DDP session set-up|data transfer) ", out, re.MULTILINE)
    failures = FAILURE_LINE.findall(out)
    assert failures, out
    for _, state, reason in failures:
        limits = re.findall(r"after (\d+) retransmissions(?: or unanswered HEARTBEATs in a row)?: "
                            r"(Max\.Init\.Retransmits|Association\.Max\.Retrans) exceeded", reason)
        if not limits:
            continue  # a peer's failure of another kind, reported as such
        [(count, limit)] = limits
        opening = state in ("COOKIE-WAIT", "COOKIE-ECHOED")
        assert (limit, int(count)) == (("Max.Init.Retransmits", 8) if opening else ("Association.Max.Retrans", 10))
    assert any("exceeded" in reason for _, _, reason in failures)
    assert re.search(r"^link frames: sent \d+, lost \d+, duplicated \d+, reordered \d+, corrupted \d+$", out,
                     re.MULTILINE)
    assert re.search(r"^retransmissions A: timeout \d+", out, re.MULTILINE)
    assert "time: simulated" in out and "FAILED: " in out


def test_a_failure_in_the_data_phase_keeps_the_operations_and_both_ends_in_the_summary() -> None:
    """Seed 10 at 50% loss gets past set-up and fails during the transfer: the summary still lists the
    operations, and each host's ending is a typed event (the failed one with its limit and state)."""
    result = run_demo(loss=0.5, seed=10, size=2000)
    assert result.stopped is not None and result.stopped.startswith("data transfer")
    assert len(result.operations) == 12 and not result.passed
    ends = [event for event in result.teardown.values() if event is not None]
    assert any(isinstance(e, Failed) and e.limit is RetransmissionLimit.ASSOCIATION_MAX_RETRANS
               and e.limit_value == 10 and e.state is AssociationState.ESTABLISHED for e in ends), ends
    out = io.StringIO()
    print_summary(result, 0.5, 10, False, 2000, out)
    assert "RDMA Write" in out.getvalue() and "link frames: sent" in out.getvalue()
    assert "goodput" not in out.getvalue()  # nothing like the operations' bytes moved


def test_the_demo_holds_a_window_of_data_not_its_operations() -> None:
    """Peak traced memory during a run hardly moves from 64 KiB to 512 KiB per operation (12 operations,
    6 MiB moved): the sender reads its source a segment at a time within the send buffer and the peer's
    window, and the hosts' pattern memories keep no sink bytes."""
    peaks = {}
    for size in (64 << 10, 512 << 10):
        tracemalloc.start()
        try:
            result = run_demo(size=size)
            peaks[size] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.passed
    assert peaks[512 << 10] < peaks[64 << 10] + (256 << 10), peaks
    assert peaks[512 << 10] < 2 << 20, peaks


@pytest.mark.parametrize("size", (0, 1, 15 * MIB, 16 * MIB, 100_000_000, LARGEST_SIZE))
def test_the_memory_map_never_overlaps_at_any_size(size: int) -> None:
    """Every region of `size` bytes (four receive buffers back to back) ends at least 1 MiB before the next
    one starts, and the last inside 64-bit addresses even at the largest `--size`; up to 15 MiB the map is
    the fixed one at 16 MiB spacing."""
    layout = MemoryMap.for_size(size)
    regions = ([(layout.source, size), (layout.write_sink, size), (layout.read_sink, size),
                (layout.receive_buffer(0), 4 * max(size, 1))]
               + [(layout.invalidate_target(i), 4096) for i in range(2)])
    for (start, length), (following, _) in zip(regions[:4], regions[1:5]):
        assert start + length + MIB <= following
    assert layout.invalidate_target(1) + 4096 <= 1 << 64
    if size <= 15 * MIB:
        assert (layout.source, layout.write_sink, layout.read_sink, layout.receive_buffer(0),
                layout.invalidate_target(0)) == (0x0100_0000, 0x0200_0000, 0x0300_0000, 0x0400_0000, 0x0800_0000)


def test_the_size_above_the_old_16_mib_spacing_is_accepted_up_to_the_largest_ddp_message() -> None:
    """The cap of 16 MiB followed the old fixed map; the map now grows with `--size`, so the bound is the
    DDP message length (RFC 5041 5.2: below 2**32)."""
    from sim.cli import build_parser

    for text in ("20000000", str(100 << 20), str(LARGEST_SIZE)):
        assert build_parser().parse_args(["demo", "--size", text]).size == int(text)
    assert LARGEST_SIZE == 2**32 - 1


def _line_labels(summary: str) -> list[str]:
    """What each summary line reports, without its values: the text before the first ':' (or the first word
    of a table row), the goodput line's label being the one that says what was measured."""
    labels = []
    for line in summary.splitlines():
        label = line.split(":")[0] if ":" in line else line.split("  ")[0]
        labels.append("goodput" if label.endswith("goodput") else re.sub(r"\d", "#", label))
    return labels


def _sim_demo(arguments: list[str], tmp_path: Path, capsys) -> tuple[int, str]:
    capture = tmp_path / "sim.pcap"
    status = main(["demo", "--backend", "sim", *arguments, "--pcap", str(capture)])
    out = capsys.readouterr().out
    frames = len(list(read_capture(capture.read_bytes())))
    assert frames and f"capture: {capture} ({frames} frames)" in out
    return status, out


@pytest.mark.slow   # kept out of the default suite, to hold it under 8 minutes
@pytest.mark.cocotb
def test_demo_on_the_rtl_prints_the_soft_demos_summary(tmp_path: Path, capsys) -> None:
    """`--backend sim`: the demo through the driver on the RNIC top (host A's receive and transmit) passes, and
    its summary reports the same things, line for line, as the software demo's for the same arguments."""
    arguments = ["--size", "3000", "--loss", "0.02", "--seed", "4"]
    status, sim_out = _sim_demo(arguments, tmp_path, capsys)
    assert status == 0, sim_out
    for text in SUMMARY_FIELDS[:-3]:
        assert text in sim_out, text
    assert "RTL simulation (W = 8, host A) goodput:" in sim_out and "0 failed" in sim_out and "result: PASS" in sim_out
    assert main(["demo", *arguments, "--no-progress", "--pcap", str(tmp_path / "soft.pcap")]) == 0
    soft_out = capsys.readouterr().out
    assert _line_labels(sim_out) == _line_labels(soft_out)


@pytest.mark.cocotb
@pytest.mark.slow
def test_demo_on_the_rtl_at_1pct_loss(tmp_path: Path, capsys) -> None:
    status, out = _sim_demo(["--loss", "0.01", "--size", "65536"], tmp_path, capsys)
    assert status == 0, out
    assert "lost 0," not in out and "0 failed" in out and "result: PASS" in out


@pytest.mark.cocotb
@pytest.mark.slow
def test_demo_between_two_gateware_hosts(tmp_path: Path, capsys) -> None:
    """`--peer gateware`: both hosts on RNIC tops in one simulation, through the impaired link."""
    status, out = _sim_demo(["--peer", "gateware", "--loss", "0.02", "--size", "2000", "--seed", "2"], tmp_path,
                            capsys)
    assert status == 0, out
    assert "RTL simulation (W = 8, both hosts) goodput:" in out and "0 failed" in out and "result: PASS" in out


def test_demo_backend_sim_refuses_udp_and_sizes_beyond_its_ram(capsys) -> None:
    for arguments in (["--udp"], ["--size", str(16 * MIB + 1)]):
        with pytest.raises(SystemExit) as exit:
            main(["demo", "--backend", "sim", *arguments])
        assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "not with --backend sim" in err and "above the maximum of 16777216 with --backend sim" in err
    with pytest.raises(SystemExit) as exit:
        main(["demo", "--peer", "gateware"])
    assert exit.value.code == 2 and "only with --backend sim" in capsys.readouterr().err
