"""Waveforms of the cocotb runs (sim/runner.py), read back by readers nobody here wrote: pyvcd for VCD, pywellen
(the waveform library of the Surfer viewer) for FST. The bench is the smallest one, the CRC32c block at W = 8
running the RFC 3720 B.4 vectors, so the trace must show the four RFC checksums leaving on `crc`."""

import bisect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hdl.stream.crc32c import Crc32c
from sim.runner import (SimulationResult, WavesSettingError, WavesUnavailable, default_waves_dir, run_cocotb,
                        waves_format)
from sim.toolchain import fst_writer_available
from sim.tb.crc32c import RFC3720_VECTORS

REPO = Path(__file__).resolve().parents[2]
WIDTH = 8
TOPLEVEL = f"crc32c_w{WIDTH}"
TESTCASE = "rfc3720_vectors"
CLOCK_PERIOD_PS = 10_000  # the testbench's Clock(dut.clk, 10, unit="ns"), in the runner's 1 ps precision
#: Signals the checks read, named as the trace names them: <toplevel>.<port>.
CLOCK, VALID, READY, PAYLOAD = (f"{TOPLEVEL}.{port}" for port in ("clk", "crc__valid", "crc__ready", "crc__payload"))

Changes = dict[str, list[tuple[int, int | None]]]  # signal -> (time in ps, value; None with x or z bits)


def _known(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _run_rfc_vectors(**waves) -> SimulationResult:
    dut = Crc32c(WIDTH)
    return run_cocotb(dut, test_module="sim.tb.crc32c", toplevel=TOPLEVEL, testcase=TESTCASE,
                      parameters={"width_bytes": WIDTH, "latency": dut.latency, "seed": 1}, **waves)


def _printed_waves(stderr: str) -> Path:
    paths = re.findall(r"^waves: (.+)$", stderr, re.MULTILINE)
    assert len(paths) == 1, stderr
    return Path(paths[0])


def _transfers(changes: Changes) -> list[int]:
    """`crc` payloads that moved (valid and ready) on a rising clock edge, each read from the values the
    signals held just before the edge."""
    def before(name: str, time: int) -> int | None:
        index = bisect.bisect_left([t for t, _ in changes[name]], time)
        return changes[name][index - 1][1] if index else None

    clock = changes[CLOCK]
    rising = [time for (time, value), (_, previous) in zip(clock[1:], clock) if value and not previous]
    assert {later - earlier for earlier, later in zip(rising, rising[1:])} == {CLOCK_PERIOD_PS}
    return [before(PAYLOAD, edge) for edge in rising if before(VALID, edge) and before(READY, edge)]


def _vcd_changes(path: Path) -> Changes:
    """Every change of the checked signals, tokenizing the whole file with pyvcd."""
    from vcd.reader import TokenKind, tokenize

    scopes, names, changes, time = [], {}, {name: [] for name in (CLOCK, VALID, READY, PAYLOAD)}, 0
    with open(path, "rb") as stream:
        for token in tokenize(stream):
            if token.kind is TokenKind.SCOPE:
                scopes.append(token.scope.ident)
            elif token.kind is TokenKind.UPSCOPE:
                scopes.pop()
            elif token.kind is TokenKind.VAR:
                name = ".".join([*scopes, token.var.reference])
                if name in changes:
                    names[token.var.id_code] = name
            elif token.kind is TokenKind.CHANGE_TIME:
                time = token.time_change
            elif token.kind in (TokenKind.CHANGE_SCALAR, TokenKind.CHANGE_VECTOR) and token.data.id_code in names:
                value = token.data.value  # "0", "1", "x"... for a scalar; int, or str with x/z bits, for a vector
                changes[names[token.data.id_code]].append((time, int(value) if value in ("0", "1") else _known(value)))
    return changes


def _fst_changes(path: Path) -> Changes:
    import pywellen

    variables = {variable.full_name: variable for variable in pywellen.Waveform(str(path)).all_vars()}
    changes = {}
    for name in (CLOCK, VALID, READY, PAYLOAD):
        signal = variables[name].signal
        changes[name] = [(time, _known(value)) for time, value in (signal[index] for index in range(len(signal)))]
    return changes


@pytest.mark.cocotb
def test_vcd_waves_go_to_the_printed_path_and_pyvcd_reads_the_rfc_checksums(monkeypatch, capfd):
    monkeypatch.setenv("WAVES", "vcd")
    result = _run_rfc_vectors()
    path = _printed_waves(capfd.readouterr().err)
    assert path == default_waves_dir() / f"{TOPLEVEL}-crc32c-{TESTCASE}.vcd" == result.waves_file
    assert _transfers(_vcd_changes(path)) == [checksum for _, checksum in RFC3720_VECTORS]


@pytest.mark.cocotb
def test_fst_waves_are_the_default_format_and_pywellen_reads_the_rfc_checksums(monkeypatch, capfd, fst_writer):
    monkeypatch.setenv("WAVES", "1")
    _run_rfc_vectors()
    path = _printed_waves(capfd.readouterr().err)
    assert path == default_waves_dir() / f"{TOPLEVEL}-crc32c-{TESTCASE}.fst"
    assert _transfers(_fst_changes(path)) == [checksum for _, checksum in RFC3720_VECTORS]


@pytest.mark.cocotb
def test_turning_fst_waves_on_and_off_reuses_the_build(monkeypatch, capfd, fst_writer):
    monkeypatch.delenv("WAVES", raising=False)
    without = _run_rfc_vectors()  # builds, unless an earlier run did
    capfd.readouterr()
    with_fst = _run_rfc_vectors(waves="fst")
    again = _run_rfc_vectors(waves=False)
    assert with_fst.build_dir == without.build_dir == again.build_dir
    assert not with_fst.rebuilt and not again.rebuilt
    assert "verilator: building" not in capfd.readouterr().err
    assert without.waves_file is None and again.waves_file is None and with_fst.waves_file.is_file()


@pytest.mark.parametrize("setting, expected", [
    (None, None), ("", None), ("0", None), ("off", None), ("no", None), ("false", None),
    ("1", "fst"), ("on", "fst"), ("yes", "fst"), ("true", "fst"), ("fst", "fst"), ("FST", "fst"), (" vcd ", "vcd"),
])
def test_waves_settings(monkeypatch, setting, expected):
    if setting is None:
        monkeypatch.delenv("WAVES", raising=False)
    else:
        monkeypatch.setenv("WAVES", setting)
    assert waves_format() == expected


@pytest.fixture
def headers_hidden(monkeypatch, tmp_path):
    """A C++ compiler that sees no system headers, as on a machine without liblz4-dev and zlib1g-dev."""
    compiler = tmp_path / "g++-without-system-headers"
    compiler.write_text('#!/bin/sh\nexec g++ -nostdinc "$@"\n')
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    fst_writer_available.cache_clear()
    yield
    fst_writer_available.cache_clear()


def test_without_the_fst_writer_headers_fst_waves_are_refused_with_the_install_line(monkeypatch, headers_hidden):
    assert not fst_writer_available()
    monkeypatch.setenv("WAVES", "1")
    with pytest.raises(WavesUnavailable, match=r"apt-get install liblz4-dev zlib1g-dev .*or WAVES=vcd"):
        _run_rfc_vectors()


def test_without_the_fst_writer_headers_the_fst_tests_skip_with_the_install_line(headers_hidden, tmp_path):
    """`make test` as the README writes it passes on a machine without the headers: the FST tests skip, saying
    what to install; RNIC_REQUIRE_FST_WRITER=1 (as .ci/run sets) turns the skip into a failure."""
    environment = {key: value for key, value in os.environ.items() if key != "RNIC_REQUIRE_FST_WRITER"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs",
               f"{__file__}::test_fst_waves_are_the_default_format_and_pywellen_reads_the_rfc_checksums"]
    skipped = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=environment)
    assert skipped.returncode == 0, skipped.stdout
    assert "1 skipped" in skipped.stdout
    assert "apt-get install liblz4-dev zlib1g-dev" in skipped.stdout
    required = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                              env={**environment, "RNIC_REQUIRE_FST_WRITER": "1"})
    assert required.returncode == 1 and "RNIC_REQUIRE_FST_WRITER=1" in required.stdout, required.stdout


@pytest.mark.parametrize("setting", ["2", "fsdb", "vcd,fst", "lxt2"])
def test_an_unknown_waves_setting_is_refused_before_any_build(monkeypatch, tmp_path, setting):
    monkeypatch.setenv("WAVES", setting)
    refusal = rf"^WAVES='{re.escape(setting)}' is not a waveform setting: fst or vcd "
    with pytest.raises(WavesSettingError, match=refusal):
        run_cocotb(None, test_module="sim.tb.crc32c", toplevel=TOPLEVEL, build_root=tmp_path)  # no design needed
    assert list(tmp_path.iterdir()) == []


def test_pytest_refuses_an_unknown_waves_setting_before_any_test():
    """tests/conftest.py: one line from pytest, its usage-error status (4), no test run."""
    test = "tests/sim/test_build_progress.py::test_a_failed_build_says_so_and_the_error_goes_on"
    session = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", test], cwd=REPO,
                             env={**os.environ, "WAVES": "fsdb"}, capture_output=True, text=True)
    assert session.returncode == pytest.ExitCode.USAGE_ERROR
    assert session.stderr.strip().splitlines() == [
        "ERROR: WAVES='fsdb' is not a waveform setting: fst or vcd (1 or on: fst; 0, off or unset: none)"]
    assert "passed" not in session.stdout
