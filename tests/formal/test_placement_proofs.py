"""The placement-safety harness can fail: a region table whose end check is one byte short.

`make formal` runs the proofs themselves (minutes); this is the quick check that the
harness is not vacuous: with the mutant, bounded model checking from reset finds a
command that ends one byte past its region (RFC 5041 7.1 tagged item 4), and the
failing assert is that bound, in both places the k-induction proofs check commands.
"""

import inspect

import pytest
from amaranth.hdl import Signal

from formal import placement
from formal.run import Proof, run_proof
from hdl.rx.region_table import region_lookup_layout

DEPTH = 9  # the first command can leave the block on step 7


class OneByteShortRegionTable(placement._ObservedRegionTable):
    """Checks ``TO + length - 1`` against the region's end instead of ``TO + length``."""

    def elaborate(self, platform):
        driven = self.lookup
        self.lookup = Signal(region_lookup_layout())
        m = super().elaborate(platform)
        m.d.comb += [self.lookup.eq(driven), self.lookup.length.eq(driven.length - 1)]
        return m


def _line_of(text: str) -> int:
    lines, first = inspect.getsourcelines(placement.PlacementHarness._check)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.slow  # a solver run of a minute or more
@pytest.mark.parametrize("environment", [
    {"stalls": False},                     # checked at the outputs (the `induction` proof's harness)
    {"stalls": True, "at_queues": True},   # checked at the output queues (`backpressure`)
], ids=["outputs", "queues"])
def test_mutant_region_end_fails_the_bounded_proof(tmp_path, environment):
    harness = placement.PlacementHarness(**environment, region_table=OneByteShortRegionTable)
    passed, _, directory = run_proof(Proof("mutant", "bmc", DEPTH, None, "mutant"), workdir=tmp_path,
                                     harness=harness)
    log = (tmp_path / "mutant.out").read_text()
    assert not passed, log[-2000:]
    assert f"placement.py:{_line_of('to_end <= region.base_to + region.length')}" in log, log[-2000:]
