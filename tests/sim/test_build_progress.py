"""What sim/runner.py says on stderr while a Verilator build runs, without running Verilator: the progress
lines around a stand-in build of known length, and the note of a process that waits for another's build."""

import fcntl
import io
import re
import threading
import time
from pathlib import Path

import pytest

from sim.runner import BuildProgress, _locked


def _seconds(line: str) -> int:
    return int(re.search(r"(\d+) s$", line).group(1))


def test_a_build_says_when_it_starts_while_it_runs_and_when_it_ends():
    stream = io.StringIO()
    started = time.monotonic()
    with BuildProgress("rx_engine_w8", Path("/builds/build.log"), stream, interval=0.05):
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    lines = stream.getvalue().splitlines()
    assert lines[0] == "verilator: building rx_engine_w8 (log: /builds/build.log)"
    ticks = lines[1:-1]
    assert 1 <= len(ticks) <= elapsed / 0.05  # one per interval at most, however the threads were scheduled
    assert all(re.fullmatch(r"verilator: still building rx_engine_w8, \d+ s", line) for line in ticks)
    assert re.fullmatch(r"verilator: built rx_engine_w8 in \d+ s", lines[-1])


def test_the_elapsed_seconds_are_wall_clock_seconds():
    stream = io.StringIO()
    started = time.monotonic()
    with BuildProgress("top", Path("build.log"), stream, interval=60):
        time.sleep(1.05)
    assert abs(_seconds(stream.getvalue().splitlines()[-1]) - (time.monotonic() - started)) <= 0.5


def test_a_failed_build_says_so_and_the_error_goes_on():
    stream = io.StringIO()
    with pytest.raises(SystemExit), BuildProgress("top", Path("build.log"), stream, interval=60):
        raise SystemExit(2)  # what cocotb-test raises when make fails
    assert re.fullmatch(r"verilator: build of top failed after \d+ s", stream.getvalue().splitlines()[-1])


def test_waiting_for_another_process_build_is_said_once_before_the_wait(tmp_path):
    """flock(2) locks of two open file descriptions conflict, as those of two processes do."""
    lock_path = tmp_path / "top.lock"
    holder = open(lock_path, "w")
    fcntl.flock(holder, fcntl.LOCK_EX)
    waits = []
    threading.Timer(0.1, holder.close).start()  # the other "process" finishes its build
    with _locked(lock_path, on_wait=lambda: waits.append(time.monotonic())):
        acquired = time.monotonic()
    assert len(waits) == 1 and acquired - waits[0] >= 0.05
    waits.clear()
    with _locked(lock_path, on_wait=lambda: waits.append(1)):
        pass
    assert waits == []  # a free lock: nothing to say
