"""Run a cocotb test module against an Amaranth design under Verilator, through cocotb-test.

:func:`run_cocotb` converts the design to Verilog, builds it with Verilator
into ``sim_build/<toplevel>-<hash>/`` (the hash covers the Verilog, the build
options, the Verilator version and the cocotb and cocotb-test versions, so a
build is reused until the design changes; a file lock makes concurrent
pytest-xdist workers safe), runs the test module in a run directory of its own
(removed after the run; kept, and named, when a test fails) and raises
:class:`SimulationFailed` unless the results file lists at least one test and
no failure. A build says so on stderr (:class:`BuildProgress`): when
it starts, every 30 seconds, and when it ends, with the seconds elapsed; a
process that waits for another's build of the same design says that too.

Both steps go through ``cocotb_test.simulator.Verilator`` (the simulator
class behind ``cocotb_test.simulator.run``, as in the taxi and Corundum
testbenches), which sets up cocotb 2.x's environment (``GPI_USERS``,
``COCOTB_TEST_MODULES``, ``PYTHONPATH`` from ``sys.path``...) and runs the
commands. It rebuilds on every ``run()``; :class:`_CachedVerilator` keeps
its build command for the locked build step only, so the test step runs the
cached binary.

Test parameters reach the cocotb module as JSON in the environment; the
testbench reads them with :func:`test_parameters`. The simulator's log goes to
stdout, or to ``log_file`` when given.

Waveforms: ``WAVES=fst`` (or ``1``, ``on``: FST, the default format) or
``WAVES=vcd`` in the environment, or ``waves="fst"``/``"vcd"``; ``WAVES`` unset,
empty or ``0``/``off`` writes none, any other value raises
:class:`WavesSettingError`. The trace goes to
``sim_build/waves/<toplevel>-<test module>[-<testcase>].<fst|vcd>``
(:func:`default_waves_dir`; ``waves_name`` replaces the stem), replacing the
file of the previous run of the same bench, and ``waves: PATH`` is printed on
stderr when the simulation ends, passed or failed. Verilator compiles one trace format into a model, never two
(``--trace-fst`` and ``--trace-vcd`` exclude each other; cocotb's ``verilator.cpp``
opens the trace only when given ``--trace`` at run time): every build has FST
tracing compiled in and the trace stays closed unless asked for, so turning FST
waves on or off reuses the build; VCD needs a build of its own, cached beside it.
Verilator's FST writer compiles against LZ4 and zlib
(:func:`sim.toolchain.fst_writer_available`): without their headers, FST raises
:class:`WavesUnavailable` and the builds carry VCD tracing instead, shared by
no-waves and VCD runs.
Traces leave out Verilator's ``$rootio`` copy of the top-level ports
(``--no-trace-top``) and the nets Amaranth leaves unnamed (``$1``,
``$auto$...``: a Verilator control file turns their tracing off), names that VCD
readers such as pyvcd reject.
"""

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TextIO
from xml.etree import ElementTree

from amaranth.back import verilog
from amaranth.hdl import Elaboratable
from amaranth.lib import wiring

from hdl.bus.ports import verilog_ports
from sim.toolchain import (FST_WRITER_PACKAGES, WAVE_FORMATS, fst_writer_available, require_extra,
                           setup_verilator, verilator_make_flags)

__all__ = ["SimulationResult", "SimulationFailed", "WavesSettingError", "WavesUnavailable", "BuildProgress",
           "run_cocotb", "test_parameters", "default_build_root", "default_waves_dir", "waves_format",
           "require_waves", "WAVE_FORMATS"]

PARAMETERS_VARIABLE = "RNIC_TB_PARAMETERS"

# Amaranth's Verilog is lint-clean enough; style warnings must not stop a build.
_VERILATOR_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "0", "--x-initial", "0")

_WAVES_ON = ("1", "on", "yes", "true")
_WAVES_OFF = ("", "0", "off", "no", "false")

# Verilator control file: no trace of the nets Amaranth leaves unnamed (Yosys's private names, written
# `\$1`, `\$auto$...` by write_verilog -norename); a trace name starting with `$` reads as a VCD keyword.
_TRACE_CONTROL = '`verilator_config\ntracing_off -scope "*.$*"\n'


@dataclass(frozen=True)
class SimulationResult:
    tests: int
    failures: int
    build_dir: Path
    rebuilt: bool
    build_seconds: float
    test_seconds: float
    waves_file: Path | None  # the FST or VCD trace when waves were on


class SimulationFailed(AssertionError):
    """A cocotb test failed, or the simulation ended without a results file."""


class WavesSettingError(ValueError):
    """``WAVES`` (or ``waves=``) names no waveform setting."""


class WavesUnavailable(RuntimeError):
    """The waveform format asked for cannot be written on this machine."""


def default_build_root() -> Path:
    """``$RNIC_SIM_BUILD`` or ``sim_build/`` at the repository root."""
    configured = os.environ.get("RNIC_SIM_BUILD")
    if configured:
        return Path(configured).resolve()
    return Path(__file__).resolve().parent.parent / "sim_build"


def test_parameters() -> dict:
    """Inside a cocotb test: the ``parameters`` given to :func:`run_cocotb`."""
    return json.loads(os.environ.get(PARAMETERS_VARIABLE, "{}"))


test_parameters.__test__ = False  # not a pytest test, despite the name


def default_waves_dir() -> Path:
    """Where the waveforms go: ``waves/`` in :func:`default_build_root`."""
    return default_build_root() / "waves"


def waves_format(setting: str | None = None) -> str | None:
    """The waveform format ``setting`` (by default ``$WAVES``) asks for: ``"fst"`` (also ``1``, ``on``),
    ``"vcd"``, or None (unset, empty, ``0``, ``off``). Raises :class:`WavesSettingError` for anything else."""
    text = os.environ.get("WAVES", "") if setting is None else setting
    value = text.strip().lower()
    if value in _WAVES_OFF:
        return None
    if value in _WAVES_ON:
        return WAVE_FORMATS[0]
    if value in WAVE_FORMATS:
        return value
    raise WavesSettingError(f"WAVES={text!r} is not a waveform setting: fst or vcd (1 or on: fst; 0, off or "
                            "unset: none)")


def require_waves(waves: str | None) -> None:
    """Raise :class:`WavesUnavailable` when ``waves`` is FST and Verilator's FST writer cannot be compiled here."""
    if waves == "fst" and not fst_writer_available():
        raise WavesUnavailable("FST waveforms need Verilator's FST writer, which compiles against LZ4 and zlib: "
                               f"apt-get install {' '.join(FST_WRITER_PACKAGES)} (Debian), or WAVES=vcd")


def _requested_format(waves: str | bool | None) -> str | None:
    if waves is None:
        return waves_format()
    if isinstance(waves, bool):
        return WAVE_FORMATS[0] if waves else None
    return waves_format(waves)


def _waves_stem(toplevel: str, test_module: str, testcase: str | Sequence[str] | None) -> str:
    """``<toplevel>-<test module>[-<testcase>...]``: one waveform file per bench, overwritten by its next run."""
    names = [toplevel, test_module.rsplit(".", 1)[-1]]
    if testcase is not None:
        names += [name.strip() for name in testcase.split(",")] if isinstance(testcase, str) else list(testcase)
    return "-".join(name for name in names if name)


def _keep_waves(trace: Path, destination: Path) -> Path | None:
    """Move the run's trace to ``destination`` (a rename, atomic on one file system: a concurrent run of the
    same bench leaves one whole file); None when the simulation wrote none."""
    if not trace.is_file():
        return None
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(trace, destination)
    return destination


def _verilator_version(executable: Path) -> str:
    return subprocess.run([str(executable), "--version"], capture_output=True, text=True, check=True).stdout


def _read_results(results_file: Path) -> tuple[int, list[str]]:
    tests, failed = 0, []
    root = ElementTree.parse(results_file).getroot()
    for case in root.iter("testcase"):
        tests += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(case.get("name", "?"))
    return tests, failed


@contextmanager
def _locked(path: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``path``; ``on_wait`` is called first when another process holds it."""
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class BuildProgress:
    """Lines on ``stream`` while a Verilator build runs (minutes, and silent otherwise): one when it starts,
    one every ``interval`` seconds, and one when it ends, each with the seconds elapsed."""

    def __init__(self, what: str, log: Path, stream: TextIO | None = None, interval: float = 30.0) -> None:
        self.what, self.log, self.interval = what, log, interval
        self.stream = stream if stream is not None else sys.stderr
        self._done = threading.Event()
        self._started = 0.0

    def _say(self, text: str) -> None:
        print(f"verilator: {text}", file=self.stream, flush=True)

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self._started:.0f} s"

    def _tick(self) -> None:
        while not self._done.wait(self.interval):
            self._say(f"still building {self.what}, {self._elapsed()}")

    def __enter__(self) -> "BuildProgress":
        self._started = time.monotonic()
        self._say(f"building {self.what} (log: {self.log})")
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._done.set()
        self._ticker.join()
        if kind is None:
            self._say(f"built {self.what} in {self._elapsed()}")
        else:
            self._say(f"build of {self.what} failed after {self._elapsed()}")


# Verilator's runtime objects are the same for every design: compiling them takes
# ~10 s per build, so they are compiled once and copied into new builds (older
# mtimes than nothing they depend on, so make leaves them alone). Not shared:
# the design's own Vtop*.o and cocotb's main, verilator.o, which is compiled
# against the design's Vtop.h (its layout depends on the top-level ports; reused
# for another design it corrupts the heap).
_DESIGN_OBJECTS = ("verilator.o",)


def _runtime_objects(build_dir: Path) -> list[Path]:
    return [path for path in build_dir.glob("*.o")
            if not path.name.startswith("Vtop") and path.name not in _DESIGN_OBJECTS]


def _restore_runtime_objects(runtime: Path, build_dir: Path) -> None:
    with _locked(runtime.with_suffix(".lock")):
        if (runtime / ".complete").exists():
            for path in _runtime_objects(runtime):
                shutil.copy2(path, build_dir / path.name)


def _save_runtime_objects(build_dir: Path, runtime: Path) -> None:
    with _locked(runtime.with_suffix(".lock")):
        if not (runtime / ".complete").exists():
            runtime.mkdir(exist_ok=True)
            for path in _runtime_objects(build_dir):
                shutil.copy2(path, runtime / path.name)
            (runtime / ".complete").touch()


@contextmanager
def _environment(**variables: str) -> Iterator[None]:
    """Set environment variables for the duration (cocotb-test reads some from ``os.environ`` only)."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _simulator_log(log_file: Path | None) -> Iterator[None]:
    """cocotb-test logs the commands' output on the ``cocotb`` logger: to ``log_file`` only, when given."""
    if log_file is None:
        yield
        return
    logger = logging.getLogger("cocotb")
    handler = logging.FileHandler(log_file, mode="a")
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.propagate = propagate


def _testcase_filter(testcase: str | Sequence[str]) -> str:
    """``COCOTB_TEST_FILTER`` for exact test names (the regex cocotb's own runner builds)."""
    names = [name.strip() for name in testcase.split(",")] if isinstance(testcase, str) else list(testcase)
    return r"\.(" + "|".join(rf".*{re.escape(name)}" for name in names if name) + ")$"


def _cached_verilator():
    from cocotb_test.simulator import Verilator

    class _CachedVerilator(Verilator):
        """cocotb-test's Verilator whose ``run()`` only runs the binary unless ``build=True``."""

        def __init__(self, *, build: bool, **kwargs) -> None:
            self._build = build
            super().__init__(**kwargs)

        def build_command(self) -> list[list[str]]:
            commands = super().build_command()  # verilator, make, then the binary unless compile_only
            return commands if self._build else commands[-1:]

        def run(self) -> str:
            try:
                return super().run()
            finally:  # cocotb-test installs its own SIGINT/SIGTERM handlers for the run: put ours back
                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGINT, self.old_sigint_h)
                    signal.signal(signal.SIGTERM, self.old_sigterm_h)

    return _CachedVerilator


def run_cocotb(
    design: Elaboratable,
    *,
    test_module: str,
    toplevel: str = "top",
    ports: Sequence | None = None,
    parameters: Mapping[str, object] | None = None,
    testcase: str | Sequence[str] | None = None,
    seed: int | None = None,
    waves: str | bool | None = None,
    waves_name: str | None = None,
    build_root: Path | None = None,
    verilator_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    log_file: Path | None = None,
) -> SimulationResult:
    """Build ``design`` with Verilator (reused when unchanged) and run the cocotb ``test_module`` on it.

    ``ports`` is needed only for a plain Elaboratable: a ``wiring.Component``
    knows its own, named by :func:`hdl.bus.ports.verilog_ports` (AXI ports
    ``<port>_<signal>``, other ports Amaranth's ``<port>__<member>``). ``parameters`` must be JSON-serialisable.
    ``waves``: ``"fst"``, ``"vcd"``, True (FST), False (none), or None to follow ``$WAVES``; ``waves_name``
    replaces the stem of the waveform file's name. Raises :class:`SimulationFailed` when a test fails or no
    test ran, :class:`WavesSettingError` for an unknown waveform setting, :class:`WavesUnavailable` for FST
    where its writer cannot be compiled.
    """
    waves = _requested_format(waves)
    require_extra("sim", "running a cocotb testbench")
    require_waves(waves)
    simulator = _cached_verilator()
    executable = setup_verilator()
    if ports is None and isinstance(design, wiring.Component):
        ports = verilog_ports(design)  # AXI ports as <port>_<signal>, as cocotbext-axi's from_prefix expects
    source = verilog.convert(design, name=toplevel, ports=ports, emit_src=False)
    # No waves: the build of the default format (VCD where the FST writer cannot be compiled), its trace closed.
    trace_format = waves or (WAVE_FORMATS[0] if fst_writer_available() else "vcd")
    build_args = [*_VERILATOR_ARGS, f"--trace-{trace_format}", "--no-trace-top", *verilator_args]
    runtime_key = "\0".join([_verilator_version(executable), str(executable), f"trace={trace_format}",
                             f"cocotb {version('cocotb')}", f"cocotb-test {version('cocotb-test')}"])
    key_text = "\0".join([source, _TRACE_CONTROL, runtime_key, repr(build_args), verilator_make_flags()])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]

    build_root = (build_root or default_build_root()).resolve()
    build_root.mkdir(parents=True, exist_ok=True)
    build_dir = build_root / f"{toplevel}-{key}"
    built_marker = build_dir / ".built"
    common = dict(toplevel=toplevel, module=test_module, toplevel_lang="verilog", sim_build=str(build_dir))

    rebuilt = False
    started = time.monotonic()
    waiting = lambda: print(f"verilator: waiting for another process building {toplevel}",  # noqa: E731
                            file=sys.stderr, flush=True)
    with _locked(build_root / f"{toplevel}-{key}.lock", on_wait=waiting):
        if not built_marker.exists():
            shutil.rmtree(build_dir, ignore_errors=True)
            build_dir.mkdir(parents=True)
            source_file = build_dir / f"{toplevel}.v"
            source_file.write_text(source)
            control_file = build_dir / "trace.vlt"  # read before the Verilog, as a .vlt
            control_file.write_text(_TRACE_CONTROL)
            runtime = build_root / f"verilator-runtime-{hashlib.sha256(runtime_key.encode()).hexdigest()[:16]}"
            _restore_runtime_objects(runtime, build_dir)
            makeflags = " ".join(filter(None, [os.environ.get("MAKEFLAGS"), verilator_make_flags()]))
            what = f"{toplevel} with {trace_format.upper()} tracing"
            try:
                with BuildProgress(what, build_dir / "build.log"), \
                        _environment(MAKEFLAGS=makeflags, COCOTB_RESULTS_FILE=str(build_dir / "build-results.xml"),
                                     WAVES="0"), \
                        _simulator_log(build_dir / "build.log"):
                    simulator(build=True, compile_only=True, waves=False,
                              verilog_sources=[str(control_file), str(source_file)], work_dir=str(build_dir),
                              compile_args=build_args, timescale="1ns/1ps",
                              make_args=["-j", str(len(os.sched_getaffinity(0)))], **common).run()
            except SystemExit as error:
                raise SimulationFailed(f"Verilator build of {toplevel} failed ({error}): see "
                                       f"{build_dir / 'build.log'}") from None
            _save_runtime_objects(build_dir, runtime)
            built_marker.touch()
            rebuilt = True
    build_seconds = time.monotonic() - started

    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=build_dir))
    results_file = run_dir / "results.xml"
    trace = run_dir / f"dump.{waves}" if waves else None
    env = {PARAMETERS_VARIABLE: json.dumps(dict(parameters or {}))}
    env.update(extra_env or {})
    started = time.monotonic()
    try:
        # WAVES=0 for cocotb-test, which reads WAVES as a number; the trace is asked for with --trace.
        with _environment(COCOTB_RESULTS_FILE=str(results_file), WAVES="0"), _simulator_log(log_file):
            simulator(build=False, waves=False, work_dir=str(run_dir), extra_env=env, seed=seed,
                      testcase=_testcase_filter(testcase) if testcase is not None else None,
                      plus_args=["--trace", "--trace-file", str(trace)] if waves else [], **common).run()
    except SystemExit:
        pass  # cocotb-test exits on failures; the results file tells
    test_seconds = time.monotonic() - started

    waves_file = None
    if trace is not None:
        stem = waves_name or _waves_stem(toplevel, test_module, testcase)
        waves_file = _keep_waves(trace, default_waves_dir() / f"{stem}.{waves}")
        print(f"waves: {waves_file or f'none written (the simulation of {toplevel} ended before tracing)'}",
              file=sys.stderr, flush=True)
    if not results_file.is_file():
        raise SimulationFailed(f"simulation of {toplevel} ended without results (run dir {run_dir})")
    tests, failed = _read_results(results_file)
    if tests == 0 or failed:
        raise SimulationFailed(
            f"{len(failed)} of {tests} cocotb tests failed in {test_module}: {', '.join(failed) or 'none ran'} "
            f"(run dir {run_dir})")
    shutil.rmtree(run_dir, ignore_errors=True)
    return SimulationResult(
        tests=tests, failures=0, build_dir=build_dir, rebuilt=rebuilt, build_seconds=build_seconds,
        test_seconds=test_seconds, waves_file=waves_file)
