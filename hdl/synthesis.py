"""What the gateware tells synthesis beyond Amaranth's semantics.

A block RAM read port that is not transparent returns the old data when the
same address is written on the same edge. The ECP5's DP16KD does not promise
that across its two ports, so Yosys builds it in logic: the read address is
compared with the write address of every block RAM and the written data kept
a cycle, for every bit of the memory. A memory whose design never uses the
data of such a read (its reads and writes fall in different cycles, or the
result of a colliding read is dropped) says so with :data:`NO_RW_CHECK` (the
attribute Yosys's own Verilog front end reads, ``(* no_rw_check *)``), and
the flows run :data:`COLLISION_PASSES` before synthesis: the read ports of
those memories then leave collisions undefined, as the hardware does. The
memory must have one read port and one write port. Amaranth's simulator
keeps returning the old data, which the design never looks at, so the
simulations still say what the hardware does.
"""

__all__ = ["NO_RW_CHECK", "COLLISION_PASSES"]

NO_RW_CHECK = {"no_rw_check": 1}
"""`amaranth.lib.memory.Memory(attrs=NO_RW_CHECK)`: no read of the memory uses data written on the same edge."""

COLLISION_PASSES = "proc; opt_clean; memory_collect; setparam -set RD_COLLISION_X_MASK 1'1 t:$mem_v2 a:no_rw_check %i"
"""Yosys passes, run after the design is read: a one-read, one-write-port memory with `NO_RW_CHECK` gets an
undefined read-during-write (`$mem_v2`'s RD_COLLISION_X_MASK)."""
