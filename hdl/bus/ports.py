"""Top-level port names as FPGA tools expect them: ``<port>_<signal>`` for AXI buses.

Amaranth's Verilog export joins a port's path with ``__`` (``s_axis__tdata``).
Vivado's interface inference and cocotbext-axi's ``from_prefix(dut, "s_axis")``
look for the AXI convention, one underscore: ``s_axis_tdata``,
``m_axi_awaddr``, ``s_axil_arvalid``. :func:`verilog_ports` names every
member of an AXI4, AXI4-Lite or AXI4-Stream port (:mod:`hdl.bus.axi`,
:mod:`hdl.bus.axis`) that way and leaves every other port with Amaranth's
``__`` path; :func:`convert` is ``amaranth.back.verilog.convert`` with those
names.
"""

from amaranth.back import verilog
from amaranth.hdl import ValueCastable
from amaranth.hdl._ir import PortDirection
from amaranth.lib import wiring

from hdl.bus.axi import _AxiSignature
from hdl.bus.axis import AxiStreamSignature

__all__ = ["verilog_ports", "convert"]


def _is_bus(signature) -> bool:
    if isinstance(signature, wiring.FlippedSignature):
        signature = signature.flip()
    return isinstance(signature, (_AxiSignature, AxiStreamSignature))


def verilog_ports(component: wiring.Component) -> dict:
    """``{name: (value, direction)}`` for ``verilog.convert(..., ports=)``: AXI members as ``<port>_<signal>``."""
    ports = {}
    for name, member in component.signature.members.items():
        interface = getattr(component, name)
        if member.is_signature and _is_bus(member.signature):
            for path, inner, value in member.signature.flatten(interface):
                ports["_".join([name, *map(str, path)])] = (value, inner.flow)
        elif member.is_signature:
            for path, inner, value in member.signature.flatten(interface):
                ports["__".join([name, *map(str, path)])] = (value, inner.flow)
        else:
            ports[name] = (interface, member.flow)
    named = {}
    for name, (value, flow) in ports.items():
        if isinstance(value, ValueCastable):
            value = value.as_value()
        direction = PortDirection.Input if flow == wiring.In else PortDirection.Output
        if name in named:
            raise ValueError(f"two ports of {type(component).__name__} are both named {name}")
        named[name] = (value, direction)
    return named


def convert(component: wiring.Component, name: str = "top", **kwargs) -> str:
    """Verilog of ``component`` with the port names of :func:`verilog_ports`."""
    return verilog.convert(component, name=name, ports=verilog_ports(component), **kwargs)
