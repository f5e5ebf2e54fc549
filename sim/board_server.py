"""A simulated ECPIX-5 board that a host program reaches as it reaches the real one: ``boards.ecpix5_top.BoardCore``
under Verilator (cocotb, ``sim/tb/board_server.py``), its control link on a pseudo-terminal, its Ethernet on a
TCP socket.

::

    with simulated_board(Path("/tmp/board")) as board:
        link = open_serial_link(board.serial, baud=400, latency=2.0)   # driver.link, through pyserial
        ethernet = socket.create_connection(board.ethernet)

* The UART: ``board.serial`` is the slave end of a pty; the bytes written to
  it reach ``uart_rx`` as 8N1 bits, :data:`BIT_CLOCKS` core clocks a bit (25 Mbaud
  of simulated time), and the bytes of ``uart_tx`` come back on it. A pty has no
  baud rate: the host's ``baud`` only sizes its link's waits, and the simulation
  runs far slower than real time: some 60 us of simulated time a second, a
  REG_READ in about 0.3 s, a 1 KiB MEM_WRITE in 8 s (``tests/boards/test_board_server.py``).
* The Ethernet: ``board.ethernet`` is ``(host, port)`` of a TCP server with
  room for one client. Each frame, both ways, is a 4-byte big-endian length
  then the frame without preamble and FCS, destination MAC first. The frames
  from the client go on GMII with preamble, SFD, padding to 60 bytes and FCS;
  the frames of GMII come to the client without preamble and FCS, their padding
  kept, once their FCS (``zlib.crc32``) checks (the others are logged and dropped).

The simulation runs in a thread (a cocotb run blocks) and ends when the TCP
client, having connected, disconnects: leaving the ``with`` waits for that and
raises what failed in the simulation. No client within ``connect_seconds``, or a
run longer than ``wall_seconds``, fails it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal
from amaranth.hdl._ir import PortDirection

from boards.ecpix5_top import BoardCore
from hdl.bus.ports import verilog_ports
from sim.runner import default_build_root, run_cocotb

__all__ = ["BIT_CLOCKS", "ClockedCore", "board_model", "run_board", "SimulatedBoard", "BoardSimulationError",
           "simulated_board"]

#: UART clocks per bit in the simulation (15.6 Mbaud at 62.5 MHz, the receiver's least): the link's logic
#: does not depend on the rate, and bits are what the simulation spends its time on.
BIT_CLOCKS = 4
TOPLEVEL = "board_core"
#: The ready file (the pty's path and the socket's address, as JSON), the stop file, the failure's reason.
FILES = ("board.json", "board.stop", "board.failure")


class ClockedCore(Elaboratable):
    """``BoardCore`` with its three clock domains defined here, their clocks and resets ports
    (``clk``/``rst``, ``gmii_rx_clk``/``_rst``, ``gmii_tx_clk``/``_rst``): left undefined, Amaranth
    orders the domains' ports differently from one Python process to the next, and every run
    would rebuild the Verilator model."""

    def __init__(self, core: BoardCore):
        self.core = core
        self.clocks = {name: (Signal(name=f"{prefix}clk"), Signal(name=f"{prefix}rst"))
                       for name, prefix in (("sync", ""), ("gmii_rx", "gmii_rx_"), ("gmii_tx", "gmii_tx_"))}

    def ports(self) -> dict:
        ports = {signal.name: (signal, PortDirection.Input) for pair in self.clocks.values() for signal in pair}
        return {**ports, **verilog_ports(self.core)}

    def elaborate(self, platform):
        m = Module()
        for name, (clk, rst) in self.clocks.items():
            domain = ClockDomain(name)
            m.domains += domain
            m.d.comb += [domain.clk.eq(clk), domain.rst.eq(rst)]
        m.submodules.core = self.core
        return m


def board_model() -> ClockedCore:
    """The board as the simulations build it: one Verilator model, shared by every board test."""
    return ClockedCore(BoardCore(divisor=BIT_CLOCKS))


def run_board(test_module: str, parameters: dict, **options):
    """``run_cocotb`` of a board test module on :func:`board_model`, built under ``sim_build/board/``."""
    top = board_model()
    return run_cocotb(top, ports=top.ports(), test_module=test_module, toplevel=TOPLEVEL,
                      build_root=default_build_root() / "board", parameters=parameters, **options)


@dataclass(frozen=True)
class SimulatedBoard:
    serial: str                   # the pty's slave end, for pyserial
    ethernet: tuple[str, int]     # the frame socket's address


class BoardSimulationError(RuntimeError):
    """The simulated board did not start, or its simulation failed."""


class _Simulation(threading.Thread):
    """The cocotb run of ``sim.tb.board_server``, its files in ``workdir``; what it raised in :attr:`error`."""

    def __init__(self, workdir: Path, seed: int, **limits: float):
        super().__init__(name="simulated-board", daemon=True)
        workdir.mkdir(parents=True, exist_ok=True)
        self.ready_file, self.stop_file, self.failure_file = (workdir / name for name in FILES)
        self.log_file = workdir / "simulation.log"
        for path in (self.ready_file, self.stop_file, self.failure_file):
            path.unlink(missing_ok=True)
        self.parameters = {"bit_clocks": BIT_CLOCKS, "ready_file": str(self.ready_file),
                           "stop_file": str(self.stop_file), "failure_file": str(self.failure_file), **limits}
        self.seed = seed
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            run_board("sim.tb.board_server", self.parameters, seed=self.seed, log_file=self.log_file)
        except Exception as error:
            self.error = error

    def stop(self) -> None:
        self.stop_file.touch()
        self.join()

    def failure(self, what: str) -> BoardSimulationError:
        """``what`` went wrong, with the reason the simulation gave, if any, and where its log is."""
        reason = self.failure_file.read_text() if self.failure_file.exists() else self.error
        error = BoardSimulationError(f"{what}{f': {reason}' if reason else ''} (the simulator's log: {self.log_file})")
        error.__cause__ = self.error
        return error

    def wait_ready(self, timeout: float) -> SimulatedBoard:
        deadline = time.monotonic() + timeout
        while not self.ready_file.exists():
            if not self.is_alive():
                raise self.failure("the simulated board ended before it served")
            if time.monotonic() > deadline:
                raise self.failure(f"the simulated board was not ready after {timeout:.0f} s")
            time.sleep(0.1)
        ready = json.loads(self.ready_file.read_text())
        return SimulatedBoard(ready["serial"], tuple(ready["ethernet"]))

    def finish(self, timeout: float) -> None:
        """Wait ``timeout`` seconds for the simulation to see its client leave; then stop it."""
        self.join(timeout)
        if self.is_alive():
            self.stop()
            raise self.failure(f"the simulated board still had its Ethernet client {timeout:.0f} s after the "
                               "host was done, and was stopped")
        if self.error is not None:
            raise self.failure("the simulated board failed")


@contextmanager
def simulated_board(workdir: Path, *, seed: int = 1, ready_seconds: float = 1800.0, end_seconds: float = 60.0,
                    connect_seconds: float = 600.0, wall_seconds: float = 3600.0) -> Iterator[SimulatedBoard]:
    """The board simulated while in the ``with`` (see the module docs); its files in ``workdir``.

    ``ready_seconds``: the wait for the model to be built (minutes, the first time) and served;
    ``end_seconds``: the wait, on leaving, for the simulation to end, after which it is stopped (and
    fails); ``connect_seconds``: the wait for the Ethernet client, which a host opens only after
    resetting the board's tables over the slow control link (120 s was too short on a loaded
    machine). Raises :class:`BoardSimulationError`.
    """
    simulation = _Simulation(workdir, seed, connect_seconds=connect_seconds, wall_seconds=wall_seconds)
    simulation.start()
    try:
        board = simulation.wait_ready(ready_seconds)
    except BaseException:
        simulation.stop_file.touch()
        raise
    try:
        yield board
    except BaseException:
        simulation.stop()
        raise
    simulation.finish(end_seconds)
