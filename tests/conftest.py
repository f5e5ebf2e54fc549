"""Shared test fixtures: the independent decoders (tshark, scapy) every interop check uses, and the
system headers Verilator's FST writer needs.

tshark is installed by .ci/run (Debian's package); elsewhere a test that needs
it is skipped, unless RNIC_REQUIRE_TSHARK=1, which turns a missing tshark into
a failure. scapy is a test dependency (the ``test`` extra), imported directly.
Likewise the LZ4 and zlib headers of Verilator's FST writer (Debian's
liblz4-dev, zlib1g-dev): .ci/run installs them; elsewhere an FST test is
skipped with the install line, unless RNIC_REQUIRE_FST_WRITER=1.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest


class Tshark:
    """tshark run over a capture file, with the SCTP CRC32c and IPv4/UDP checksums verified."""

    OPTIONS = ("-o", "sctp.checksum:CRC-32C", "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE")

    def __init__(self, executable: str) -> None:
        self.executable = executable

    def fields(self, capture: Path, *fields: str) -> list[list[str]]:
        """One row per frame, one string per field (``-T fields``); a repeated field is comma-separated."""
        command = [self.executable, "-n", "-r", str(capture), *self.OPTIONS, "-T", "fields"]
        for name in fields:
            command += ["-e", name]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        return [line.split("\t") for line in result.stdout.splitlines()]


@pytest.fixture(scope="session")
def tshark() -> Tshark:
    executable = shutil.which("tshark")
    if executable is None:
        if os.environ.get("RNIC_REQUIRE_TSHARK") == "1":
            pytest.fail("tshark is required (RNIC_REQUIRE_TSHARK=1) but not installed")
        pytest.skip("tshark not installed (apt-get install tshark)")
    return Tshark(executable)


@pytest.fixture(scope="session")
def fst_writer() -> None:
    """Skip (or, with RNIC_REQUIRE_FST_WRITER=1, fail) a test of FST waveforms where Verilator's FST
    writer cannot be compiled: the system lacks the LZ4 or zlib headers."""
    from sim.toolchain import FST_WRITER_PACKAGES, fst_writer_available

    if not fst_writer_available():
        reason = f"Verilator's FST writer needs LZ4 and zlib headers (apt-get install {' '.join(FST_WRITER_PACKAGES)})"
        if os.environ.get("RNIC_REQUIRE_FST_WRITER") == "1":
            pytest.fail(f"{reason}: required (RNIC_REQUIRE_FST_WRITER=1) but missing")
        pytest.skip(reason)


# -- the slow set ------------------------------------------------------------------------------
# A cocotb run builds one Verilator model per design and width (a minute or more each
# on 2 cores), and Amaranth's simulator is slower the wider the datapath. The default
# suite (`make test`) simulates every design at W = 8; the other widths (of cocotb runs
# and of the gateware's tests in Amaranth's simulator, tests/hdl/), and tests marked
# `slow` by hand (long end-to-end runs), form the slow set that `make test-slow` runs
# and CI runs after the default suite.
DEFAULT_WIDTH = 8
GATEWARE_TESTS = Path(__file__).parent / "hdl"


def pytest_collection_modifyitems(config, items):
    for item in items:
        gateware = item.get_closest_marker("cocotb") is not None or GATEWARE_TESTS in Path(item.path).parents
        if not gateware or not hasattr(item, "callspec"):
            continue
        width = item.callspec.params.get("width_bytes", item.callspec.params.get("width"))
        if width is not None and width != DEFAULT_WIDTH:
            item.add_marker(pytest.mark.slow)


# -- waveforms ---------------------------------------------------------------------------------
# WAVES=fst or vcd makes every cocotb run write its waveform (sim/runner.py). A value that is no
# waveform setting stops the session before any test; the summary lists the waveform files the
# session wrote (from every xdist worker), one "waves: PATH" line each.
_SESSION_START = pytest.StashKey[float]()


def pytest_configure(config):
    config.stash[_SESSION_START] = time.time()
    if os.environ.get("WAVES") is not None:
        from sim.runner import WavesSettingError, waves_format

        try:
            waves_format()
        except WavesSettingError as error:
            raise pytest.UsageError(str(error)) from None


def pytest_terminal_summary(terminalreporter, config):
    from sim.runner import default_waves_dir

    waves_dir = default_waves_dir()
    if not waves_dir.is_dir():
        return
    started = config.stash[_SESSION_START]
    for path in sorted(path for path in waves_dir.iterdir() if path.stat().st_mtime >= started):
        terminalreporter.write_line(f"waves: {path}")


# -- usrsctp -----------------------------------------------------------------------------------
# usrsctp (Debian's libusrsctp-dev, bound by sim/usrsctp.py) is the SCTP stack nobody here wrote that the
# model's association talks to in tests/interop/test_usrsctp.py. .ci/run installs it; elsewhere those tests
# are skipped with the install line, unless RNIC_REQUIRE_USRSCTP=1, which turns a missing library into a
# failure.
@pytest.fixture(scope="session")
def usrsctp():
    """The process's usrsctp stack (`sim.usrsctp.Stack`), stopped at the end of the session."""
    from sim.usrsctp import Stack, UsrsctpUnavailable

    try:
        stack = Stack.instance()
    except UsrsctpUnavailable as error:
        if os.environ.get("RNIC_REQUIRE_USRSCTP") == "1":
            pytest.fail(f"usrsctp is required (RNIC_REQUIRE_USRSCTP=1): {error}")
        pytest.skip(str(error))
    yield stack
    stack.finish()


@pytest.fixture
def usrsctp_library():
    """usrsctp's library loads (for tests whose peer process runs usrsctp): skipped without it, failed instead
    under RNIC_REQUIRE_USRSCTP=1."""
    from sim.usrsctp import UsrsctpUnavailable, library

    try:
        library()
    except UsrsctpUnavailable as error:
        if os.environ.get("RNIC_REQUIRE_USRSCTP") == "1":
            pytest.fail(f"usrsctp is required (RNIC_REQUIRE_USRSCTP=1): {error}")
        pytest.skip(str(error))
