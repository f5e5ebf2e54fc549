"""The delivery proofs can fail: untagged buffers that ignore or misjudge their message completions.

`make formal` runs the proofs themselves; these are the checks that they are not vacuous.
The main mutant is the buffers before issue 28 item 1 was fixed: the placement check's
completion reports (``complete_en``) never reach the block, so every slot's completion
state stays NONE and a buffer counts as consumed only when ``retire`` comes. It fails the
`delivery` proof (k-induction), and bounded model checking from reset, with retirement
never coming, finds for each property alone a trace that breaks it: a segment of a
delivered message accepted and written ((a), RFC 5041 7.1 untagged item 5), and a second
L = 1 segment of a message accepted ((b), RFC 5041 5.3). Two subtler mutants each break
one property, and the `delivery` proof fails on that property's own assert.
"""

import inspect

import pytest
from amaranth.hdl import Signal

from formal import delivery
from formal.run import PROOFS, Proof, run_proof
from hdl.rx.untagged_buffers import untagged_lookup_layout

DEPTH = 19  # the second segment's verdict leaves on step 18 at the earliest (stream write, post, two segments)
SKIP = 18   # no shorter trace exists (the `delivery_cover` run, without skip, found none below step 18)
WRITTEN = "Assert(~(for_watched & accepted & decided_delivered))"   # (a)
ONCE = "Assert(~(last_accepted & completed))"                        # (b)


class CompletionBlindBuffers(delivery._DeliveryBuffers):
    """Untagged buffers whose completion reports go nowhere: lookups ignore the message's completion."""

    def elaborate(self, platform):
        self.complete_en = Signal()  # the placement check drives the port's original signal
        return super().elaborate(platform)


class OffByOneDeliveryBuffers(delivery._DeliveryBuffers):
    """Judge delivery against ``base - 1``: a message delivered by the segment just before still
    finds its buffer."""

    def elaborate(self, platform):
        driven = self.base
        self.base = Signal.like(driven)
        m = super().elaborate(platform)
        m.d.comb += self.base.eq(driven - 1)
        return m


class NoSecondLastBuffers(delivery._DeliveryBuffers):
    """Lookups see L = 0 always: a second L = 1 segment of a pending message is not refused."""

    def elaborate(self, platform):
        driven = self.lookup
        self.lookup = Signal(untagged_lookup_layout(self._streams, self._queues))
        m = super().elaborate(platform)
        m.d.comb += [self.lookup.eq(driven), self.lookup.last.eq(0)]
        return m


def _line_of(text: str) -> int:
    lines, first = inspect.getsourcelines(delivery.DeliveryHarness.elaborate)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _delivery_proof(tmp_path, buffers):
    proof, = (p for p in PROOFS if p.name == "delivery")
    passed, _, _ = run_proof(proof, workdir=tmp_path, harness=delivery.DeliveryHarness(buffers=buffers))
    return passed, (tmp_path / "delivery.out").read_text()


@pytest.mark.slow  # a solver run of a minute or less
def test_completion_blind_buffers_fail_the_delivery_proof(tmp_path):
    passed, log = _delivery_proof(tmp_path, CompletionBlindBuffers)
    assert not passed, log[-2000:]


@pytest.mark.slow  # a solver run of a minute or two
@pytest.mark.parametrize("prop, assert_text", [("written", WRITTEN), ("once", ONCE)],
                         ids=["delivered-buffer-written", "message-completes-twice"])
def test_completion_blind_buffers_break_each_property_from_reset(tmp_path, prop, assert_text):
    harness = delivery.DeliveryHarness(buffers=CompletionBlindBuffers, strengthen=False, narrow=True,
                                       properties=(prop,))
    passed, _, _ = run_proof(Proof("mutant", "bmc", DEPTH, None, "mutant", skip=SKIP), workdir=tmp_path,
                             harness=harness)
    log = (tmp_path / "mutant.out").read_text()
    assert not passed, log[-2000:]
    assert f"delivery.py:{_line_of(assert_text)}" in log, log[-2000:]


@pytest.mark.slow  # a solver run of half a minute
@pytest.mark.parametrize("buffers, assert_text", [(OffByOneDeliveryBuffers, WRITTEN), (NoSecondLastBuffers, ONCE)],
                         ids=["off-by-one-delivery", "no-second-last-check"])
def test_a_mutant_fails_the_delivery_proof_on_the_property_it_breaks(tmp_path, buffers, assert_text):
    passed, log = _delivery_proof(tmp_path, buffers)
    assert not passed, log[-2000:]
    assert f"delivery.py:{_line_of(assert_text)}" in log, log[-2000:]
