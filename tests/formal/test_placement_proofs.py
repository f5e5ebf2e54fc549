"""The placement-safety harness can fail: a region table whose end check is one byte short.

`make formal` runs the proofs themselves (minutes); this is the quick check that the
harness is not vacuous: with the mutant, bounded model checking from reset finds a
command that ends one byte past its region (RFC 5041 7.1 tagged item 4), and the
failing assert is that bound, in both places the k-induction proofs check commands.

A command needs a stream row written first, and that write sweeps the stream's buffer
slots (``forget``), so the first command enters its output queue on step 12 and leaves
on step 13: each run checks only the step where its check first applies, in an
environment narrowed to what the trace needs (tagged segments; no posts, faults or
retirements), which keeps it to two or three minutes.
"""

import inspect

import pytest
from amaranth.hdl import Assume, Signal

from formal import placement
from formal.run import Proof, run_proof
from hdl.rx.region_table import region_lookup_layout

FIRST_ENTERED = 12  # the first command enters the commands queue on step 12 and leaves on step 13


class OneByteShortRegionTable(placement._ObservedRegionTable):
    """Checks ``TO + length - 1`` against the region's end instead of ``TO + length``."""

    def elaborate(self, platform):
        driven = self.lookup
        self.lookup = Signal(region_lookup_layout())
        m = super().elaborate(platform)
        m.d.comb += [self.lookup.eq(driven), self.lookup.length.eq(driven.length - 1)]
        return m


class TaggedOnlyHarness(placement.PlacementHarness):
    """The harness with tagged segments only, and no posts, faults or retirements."""

    def _payload_contract(self, m, dut):
        super()._payload_contract(m, dut)
        m.d.comb += [Assume(dut.segment.payload.tagged), Assume(~dut.post.valid), Assume(~dut.fault.valid),
                     Assume(~dut.retire.valid)]


def _line_of(text: str) -> int:
    lines, first = inspect.getsourcelines(placement.PlacementHarness._check)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.slow  # a solver run of two or three minutes
@pytest.mark.parametrize("environment, checked", [
    ({"stalls": False}, FIRST_ENTERED + 1),                     # at the outputs (the `induction` proof's harness)
    ({"stalls": True, "at_queues": True}, FIRST_ENTERED),      # at the output queues (`backpressure`)
], ids=["outputs", "queues"])
def test_mutant_region_end_fails_the_bounded_proof(tmp_path, environment, checked):
    harness = TaggedOnlyHarness(**environment, region_table=OneByteShortRegionTable)
    passed, _, directory = run_proof(Proof("mutant", "bmc", checked + 1, None, "mutant", skip=checked),
                                     workdir=tmp_path, harness=harness)
    log = (tmp_path / "mutant.out").read_text()
    assert not passed, log[-2000:]
    assert f"placement.py:{_line_of('to_end <= region.base_to + region.length')}" in log, log[-2000:]
