"""What the gateware tells synthesis beyond Amaranth's semantics.

Collisions. A block RAM read port that is not transparent returns the old
data when the same address is written on the same edge. The ECP5's DP16KD
does not promise that across its two ports, so Yosys builds it in logic: the
read address is compared with the write address of every block RAM and the
written data kept a cycle, for every bit of the memory. A memory whose
design never uses the data of such a read (its reads and writes fall in
different cycles, or the result of a colliding read is dropped) says so with
:data:`NO_RW_CHECK` (the attribute Yosys's own Verilog front end reads,
``(* no_rw_check *)``): the read ports of those memories then leave
collisions undefined, as the hardware does. The memory must have one read
port and one write port. Amaranth's simulator keeps returning the old data,
which the design never looks at, so the simulations still say what the
hardware does.

Replicas. A flip-flop whose loads lie in two places far apart (a choice
that steers a wide mux in one block and a late ready in another) is built
twice, with the same next value, so the placer puts each copy beside its own
loads. Yosys merges flip-flops with identical inputs, so each copy's signal
carries :data:`REPLICA` (``keep``), and the passes mark the flip-flop that
drives a kept signal as kept too: a kept cell is not merged. Every copy
must be marked, or the unmarked one is merged into the marked one.

Both flows (``make synth``, ``make bitstream``) run :data:`SYNTHESIS_PASSES`
after the design is read and before ``synth_ecp5``.
"""

__all__ = ["NO_RW_CHECK", "REPLICA", "SYNTHESIS_PASSES"]

NO_RW_CHECK = {"no_rw_check": 1}
"""`amaranth.lib.memory.Memory(attrs=NO_RW_CHECK)`: no read of the memory uses data written on the same edge."""

REPLICA = {"keep": 1}
"""`Signal(attrs=REPLICA)`: a flip-flop built as its own cell, never merged with one of the same next value."""

SYNTHESIS_PASSES = ("proc; opt_clean; memory_collect; setparam -set RD_COLLISION_X_MASK 1'1 t:$mem_v2 a:no_rw_check %i; "
                    "setattr -set keep 1 a:keep %ci1 t:$dff %i")
"""Yosys passes, run after the design is read: a one-read, one-write-port memory with `NO_RW_CHECK` gets an
undefined read-during-write (`$mem_v2`'s RD_COLLISION_X_MASK); the flip-flop driving a `REPLICA` signal is kept."""
