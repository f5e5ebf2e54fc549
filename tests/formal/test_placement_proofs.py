"""The placement-safety harness can fail: a region table whose end check is one byte short, and one that
compares 8 bits of a 12-bit STag key.

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
from amaranth.hdl import Assume, Cat, Signal

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


WIDE_KEY_BITS = 12


class EightKeyBitsRegionTable(placement._ObservedRegionTable):
    """At 12-bit keys, compares only the key's low 8 bits: the lookup's key bits 8..11 are replaced by the
    row's (read asynchronously at the lookup; no row is written while a lookup is in flight)."""

    def elaborate(self, platform):
        driven = self.lookup
        self.lookup = Signal(region_lookup_layout())
        m = super().elaborate(platform)
        row = m.submodules.table.read_port(domain="comb")
        m.d.comb += [row.addr.eq(driven.stag[WIDE_KEY_BITS:]), self.lookup.eq(driven),
                     self.lookup.stag.eq(Cat(driven.stag[:8], row.data.key[8:], driven.stag[WIDE_KEY_BITS:]))]
        return m


@pytest.mark.slow  # a solver run of two or three minutes
def test_a_key_compared_on_8_of_its_12_bits_fails_the_bounded_proof(tmp_path):
    """At key_bits=12 the harness checks the whole key (RFC 5041 7.1 tagged item 1): a table that compares 8 bits
    places a segment whose STag's key differs from the row's in bits 8..11, and the key assert fails."""
    harness = TaggedOnlyHarness(stalls=False, region_table=EightKeyBitsRegionTable, key_bits=WIDE_KEY_BITS)
    checked = FIRST_ENTERED + 1
    passed, _, directory = run_proof(Proof("mutant", "bmc", checked + 1, None, "mutant", skip=checked),
                                     workdir=tmp_path, harness=harness)
    log = (tmp_path / "mutant.out").read_text()
    assert not passed, log[-2000:]
    assert f"placement.py:{_line_of('Assert(region.key == segment.stag[:key_bits])')}" in log, log[-2000:]
