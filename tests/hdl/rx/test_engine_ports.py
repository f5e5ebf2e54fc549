"""The receive engine's Verilog ports carry AXI names (``s_axis_tdata``, ``m_axi_awaddr``...).

FPGA tools and cocotbext-axi (``from_prefix(dut, "s_axis")``) bind to
``<port>_<signal>``; the test converts the engine to Verilog and reads the
module header.
"""

import re

import pytest

from hdl.bus.ports import convert
from hdl.rx.engine import RxEngine

AXIS = ("tdata", "tkeep", "tlast", "tvalid", "tready")
AXI_WRITE = ("awid", "awaddr", "awlen", "awsize", "awburst", "awlock", "awcache", "awprot", "awvalid", "awready",
             "wdata", "wstrb", "wlast", "wvalid", "wready", "bid", "bresp", "bvalid", "bready")
AXI_READ = ("arid", "araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot", "arvalid", "arready",
            "rid", "rdata", "rresp", "rlast", "rvalid", "rready")
AXI_LITE = ("awaddr", "awprot", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp", "bvalid",
            "bready", "araddr", "arprot", "arvalid", "arready", "rdata", "rresp", "rvalid", "rready")
OUTPUTS = {"s_axis": {"tready"}, "m_axis_exc": set(AXIS) - {"tready"} | {"tuser"},
           "m_axis_report": set(AXIS) - {"tready"}, "m_axis_ack": set(AXIS) - {"tready"},
           "m_axis_sack": set(AXIS) - {"tready"},
           "s_axil": {"awready", "wready", "bresp", "bvalid", "arready", "rdata", "rresp", "rvalid"}}


def module_ports(verilog_text: str, name: str) -> dict[str, tuple[str, int]]:
    """``{port: (direction, width)}`` from the module's header and its port declarations."""
    header = re.search(rf"module {name}\((.*?)\);", verilog_text, re.S)
    assert header, f"no module {name}"
    names = [port.strip() for port in header.group(1).replace("\n", " ").split(",")]
    ports = {}
    body = verilog_text[header.end():verilog_text.index("endmodule", header.end())]   # the module's own text
    for match in re.finditer(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):0\]\s+)?(\w+)\s*;", body, re.M):
        direction, msb, port = match.groups()
        if port in names:
            ports[port] = (direction, int(msb) + 1 if msb else 1)
    assert sorted(ports) == sorted(names)
    return ports


@pytest.mark.parametrize("width", [8, 64])
def test_engine_ports_follow_the_axi_convention(width):
    ports = module_ports(convert(RxEngine(width), name="rx_engine"), "rx_engine")
    expected = {"clk", "rst"}
    expected |= {f"s_axis_{signal}" for signal in AXIS}
    expected |= {f"m_axis_exc_{signal}" for signal in AXIS + ("tuser",)}
    expected |= {f"m_axis_report_{signal}" for signal in AXIS}
    expected |= {f"m_axis_ack_{signal}" for signal in AXIS}
    expected |= {f"m_axis_sack_{signal}" for signal in AXIS}   # the SACKs, for the transmit engine
    expected |= {f"m_axi_{signal}" for signal in AXI_WRITE + AXI_READ}
    expected |= {f"s_axil_{signal}" for signal in AXI_LITE}
    expected |= {"local_mac", "local_ip", "udp_port", "tick"}   # the addresses and the timer, for the transmit engine
    assert set(ports) == expected
    assert not [port for port in ports if "__" in port]
    # Directions: a manager drives AW/W/AR and the B/R readies; the subordinate ports the rest.
    for signal in AXI_WRITE + AXI_READ:
        driven = (signal.startswith(("aw", "w", "ar")) and signal not in ("awready", "wready", "arready")
                  or signal in ("bready", "rready"))
        assert ports[f"m_axi_{signal}"][0] == ("output" if driven else "input"), signal
    for bus, outputs in OUTPUTS.items():
        signals = AXI_LITE if bus == "s_axil" else AXIS + (("tuser",) if bus == "m_axis_exc" else ())
        for signal in signals:
            assert ports[f"{bus}_{signal}"][0] == ("output" if signal in outputs else "input"), (bus, signal)
    assert ports["s_axis_tdata"][1] == ports["m_axi_wdata"][1] == ports["m_axi_rdata"][1] == 8 * width
    assert ports["m_axi_wstrb"][1] == ports["s_axis_tkeep"][1] == width
    assert {name: ports[name] for name in ("local_mac", "local_ip", "udp_port")} == {
        "local_mac": ("output", 48), "local_ip": ("output", 32), "udp_port": ("output", 16)}
    assert ports["m_axi_awaddr"][1] == ports["m_axi_araddr"][1] == 64
