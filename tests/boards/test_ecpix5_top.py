"""The whole ECPIX-5 top level (boards/ecpix5_top.py) elaborates for ECPIX585Platform, without yosys or nextpnr.

The CI-cheap check of the board build: the design becomes RTLIL and an LPF
with the ECP5 primitives and constraints the bitstream needs (the PLL, the
RGMII DDR registers, every clock constrained, the UART and PHY-reset pins).
The PLL's settings are checked against ``yowasp-ecppll``, Trellis' own
calculator; ``make bitstream`` builds the real thing.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth_boards.ecpix5 import ECPIX585Platform

from boards.build import BOARD_PLACER_OPTIONS, nextpnr_arguments, summarize
from boards.ecpix5_top import CORE_CLOCK_HZ, PLL_SETTINGS, Ecpix5Top


@pytest.fixture(scope="module")
def plan():
    return ECPIX585Platform().prepare(Ecpix5Top(), name="top")


def _pin(lpf: str, port_pattern: str) -> str:
    match = re.search(rf'LOCATE COMP "{port_pattern}" SITE "(\w+)"', lpf)
    assert match, port_pattern
    return match.group(1)


def test_board_top_elaborates_with_its_primitives_and_constraints(plan):
    rtlil, lpf = plan.files["top.il"], plan.files["top.lpf"]
    cells = re.findall(r"^\s*cell \\(\w+) ", rtlil, re.MULTILINE)
    assert cells.count("EHXPLLL") == 1
    # The core's reset (tens of thousands of flip-flops) leaves its synchronizer through a global buffer.
    dcca = rtlil[rtlil.index("cell \\DCCA"):]
    assert cells.count("DCCA") == 1 and dcca[:dcca.index("\n  end")].endswith("connect \\CLKO \\rst")
    # RGMII: four data wires and the control wire each way, and the forwarded TX clock.
    assert (cells.count("IDDRX1F"), cells.count("ODDRX1F"), cells.count("DELAYG")) == (5, 6, 1)
    pll = rtlil[rtlil.index("cell \\EHXPLLL"):]
    pll = pll[:pll.index("\n  end")]
    for name, value in PLL_SETTINGS.items():
        assert re.search(rf"parameter \\{name} {value}\b", pll), name
    # Every clock constrained: the oscillator, the PLL's 125 MHz and 62.5 MHz (nextpnr derives them
    # from the PLL's FREQUENCY_PIN attributes), the PHY's receive clock.
    assert re.search(r'FREQUENCY PORT "clk100_0__io" 100000000\.0 HZ', lpf)
    attributes = rtlil[:rtlil.index("cell \\EHXPLLL")].rsplit("\n\n", 1)[-1]
    assert re.search(r'attribute \\FREQUENCY_PIN_CLKOP "125"\n', attributes)
    assert re.search(r'attribute \\FREQUENCY_PIN_CLKOS "62.5"\n', attributes)
    assert re.search(r'FREQUENCY PORT "eth_rgmii_0__rx_clk__io" 125000000\.0 HZ', lpf)
    # The FT2232H's UART (FPGA receives on R26, sends on R24) and the KSZ9031's reset (C13).
    assert _pin(lpf, r"uart_0__rx__io") == "R26"
    assert _pin(lpf, r"uart_0__tx__io") == "R24"
    assert _pin(lpf, r"eth_rgmii_0__rst__io") == "C13"


def test_pll_settings_are_ecppll_s(tmp_path):
    tool = shutil.which("yowasp-ecppll") or shutil.which("yowasp-ecppll", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip("yowasp-ecppll (the synth extra) is not installed")
    subprocess.run([tool, "-i", "100", "-o", "125", "--clkout1", "62.5", "-f", "pll.v"],
                   cwd=tmp_path, check=True, capture_output=True)
    verilog = (tmp_path / "pll.v").read_text()
    found = {name: int(value) for name, value in re.findall(r"\.(CLK\w+DIV|CLKO[PS]_[CF]PHASE)\((\d+)\)", verilog)}
    assert found == PLL_SETTINGS
    vco = 100e6 / found["CLKI_DIV"] * found["CLKFB_DIV"] * found["CLKOP_DIV"]
    assert (vco / found["CLKOP_DIV"], vco / found["CLKOS_DIV"]) == (125e6, CORE_CLOCK_HZ)


def test_build_summary_fails_a_clock_below_its_constraint():
    """The bitstream build's verdict, on a report in nextpnr's ``--report`` format."""
    report = {
        "utilization": {"TRELLIS_COMB": {"used": 30000, "available": 83640},
                        "TRELLIS_FF": {"used": 20000, "available": 83640},
                        "DP16KD": {"used": 80, "available": 208}},
        "fmax": {"clk100_0__io": {"achieved": 104.2, "constraint": 100.0},
                 "pll_clock": {"achieved": 121.0, "constraint": 125.0}},
    }
    summary = summarize(json.loads(json.dumps(report)))
    assert (summary.lut4, summary.ff, summary.bram) == ((30000, 83640), (20000, 83640), (80, 208))
    assert [clock.met for clock in summary.clocks] == [True, False]
    assert not summary.met
    report["fmax"]["pll_clock"]["achieved"] = 130.0
    assert summarize(report).met
    assert "FAILED" not in summarize(report).table()


@pytest.mark.parametrize("extra", [("--placer-heap-timingweight=3",), ("--placer-heap-timingweight 3",)])
def test_an_extra_nextpnr_option_replaces_the_board_s_own(extra):
    """nextpnr stops on an option given twice (exit 125), so `--nextpnr-option` replaces the board's placer weight."""
    assert BOARD_PLACER_OPTIONS[0] == "--placer-heap-timingweight" and BOARD_PLACER_OPTIONS[1] != "3"
    arguments = " ".join(nextpnr_arguments(2, "router2", extra)).split()
    assert [argument for argument in arguments if argument.startswith("--placer-heap-timingweight")] == \
        [extra[0].split()[0]]
    assert BOARD_PLACER_OPTIONS[1] not in arguments and arguments[-1].endswith("3")
    assert " ".join(nextpnr_arguments(1, "router2")).endswith(" ".join(BOARD_PLACER_OPTIONS))
