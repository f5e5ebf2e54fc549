"""The retransmission ring's proofs can fail: rings that complete on a RESEND, resend at or below the
cumulative ack, or retire past the last TSN sent.

`make formal` runs the proofs (`ring`, and `ring_cover`, which reaches every statement: a completion, a
RESEND of its acknowledged TSN refused, a retransmission, an ACK beyond the last TSN) and fails unless they
pass; CI runs it after the slow set, so they are not run twice here. Each mutant,
built on :class:`~hdl.tx.ring.RetransmitRing` by overriding one of its registers or outputs, fails the
`ring` proof (k-induction) and, from reset without the strengthening invariants, fails on the assert of
the property it breaks:

* a ring whose retransmission gives the record's completion as an ACK would (RFC 4960 6.3.3: a
  retransmitted chunk is not acknowledged; RFC 5041 5.4): property 1;
* a ring that takes a RESEND's TSN at or below the cumulative ack as in the ring (the retired bound
  ignored): it retransmits an acknowledged TSN, property 2;
* a ring whose ACK walks to the ACK's TSN even past the last TSN recorded when it was taken (RFC 4960
  6.2.1 D): property 3; the first the outputs show of it is a completion of a record the ACK did not
  cover (recorded after it was taken), which property 1's bound (``acked``, the ACK's TSN capped at
  the last TSN recorded) refuses, seven steps from reset; in the same step the ring, idle again, has
  retired past the shadow's ack point, which property 3 refuses. Both asserts fail in that step, and
  which one the solver names depends on its model, so either counts.
"""

import inspect

import pytest

from formal import ring
from formal.run import PROOFS, Proof, run_proof
from hdl.tx.ring import RetransmitRing

DEPTH = 16  # each mutant's trace from reset is shorter (ack-past-last: 7 steps, a record, an ACK, a walk of two)
COMPLETED = "Assert(busy & is_ack & (completion.association == pending.association))"  # property 1
RESENT = "m.d.comb += Assert(busy & is_resend & in_window"                                # property 2
COVERED = "Assert(_wrap(completion_tsn - acked_from - 1) < _wrap(acked_q - acked_from))"  # property 1 (and 3)
IDLE = "Assert((retired[row] == acked[row]) & (outstanding[row] =="                        # property 3


class CompletesOnResendRing(RetransmitRing):
    """A retransmitted record gives its completion (``completes`` or not) as it leaves."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        state = ring.ring_registers(self)["state"]
        with m.If(state["REPLAY"] & self.sent.valid & self.sent.ready):
            m.d.comb += m.submodules.completions.sink.valid.eq(1)
        return m


class ResendBelowAckRing(RetransmitRing):
    """A RESEND's TSN at or below ``retired`` (its offset negative) counts as in the ring."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        registers = ring.ring_registers(self)
        offset, count = registers["offset"], registers["count"]
        with m.If(registers["state"]["COMPARE"]):
            m.d.sync += registers["in_ring"].eq((offset < count) | offset[31])
        return m


class AckPastLastRing(RetransmitRing):
    """An ACK walks to its TSN, not stopping at the last one recorded."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        registers = ring.ring_registers(self)
        with m.If(registers["state"]["DECIDE"]):
            m.d.sync += registers["walk_left"].eq(registers["offset"] + 1)
        return m


MUTANTS = [(CompletesOnResendRing, (COMPLETED,)), (ResendBelowAckRing, (RESENT,)), (AckPastLastRing, (COVERED, IDLE))]
MUTANT_IDS = ["completes-on-resend", "resend-below-ack", "ack-past-last"]


def _line_of(text: str) -> int:
    lines, first = inspect.getsourcelines(ring.RingHarness.elaborate)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.slow  # a solver run of a minute or less
@pytest.mark.parametrize("mutant", [mutant for mutant, _ in MUTANTS], ids=MUTANT_IDS)
def test_a_mutant_fails_the_ring_proof(tmp_path, mutant):
    proof, = (p for p in PROOFS if p.name == "ring")
    passed, _, _ = run_proof(proof, workdir=tmp_path, harness=ring.RingHarness(ring=mutant))
    assert not passed, (tmp_path / "ring.out").read_text()[-2000:]


@pytest.mark.slow  # a solver run of a minute or less
@pytest.mark.parametrize("mutant, assert_texts", MUTANTS, ids=MUTANT_IDS)
def test_a_mutant_breaks_its_property_from_reset(tmp_path, mutant, assert_texts):
    harness = ring.RingHarness(strengthen=False, ring=mutant)
    passed, _, _ = run_proof(Proof("mutant", "bmc", DEPTH, None, "mutant"), workdir=tmp_path, harness=harness)
    log = (tmp_path / "mutant.out").read_text()
    assert not passed, log[-2000:]
    assert any(f"ring.py:{_line_of(text)}:" in log or f"ring.py:{_line_of(text)} " in log for text in assert_texts), \
        log[-2000:]
