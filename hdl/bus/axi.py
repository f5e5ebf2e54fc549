"""AXI4 and AXI4-Lite interface signatures (AMBA AXI and ACE specification, ARM IHI 0022).

Each signature is *flat*: one member per AXI signal, named exactly as the
specification's signal in lower case (``awaddr``, ``wstrb``, ``bresp``...),
and seen from the **manager** (master): what the manager drives is ``Out``,
what the subordinate (slave) drives is ``In``. A manager port is
``Out(Axi4Signature(...))``, a subordinate port ``In(Axi4Signature(...))``.

Because the members are flat, the Verilog export of :mod:`hdl.bus.ports`
names the ``awaddr`` member of a port ``m_axi`` ``m_axi_awaddr`` (the AXI
convention), and cocotbext-axi binds to it with
``AxiBus.from_prefix(dut, "m_axi")``. The optional AXI4 signals ``AxQOS``, ``AxREGION`` and the
``*USER`` signals are not part of these signatures; tie them off (QOS and
REGION to 0) when connecting to an interconnect that has them.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "Burst", "Resp", "Axi4Signature", "Axi4WriteSignature", "Axi4ReadSignature", "Axi4LiteSignature",
]


class Burst:
    """``AxBURST`` encodings."""
    FIXED = 0b00
    INCR = 0b01
    WRAP = 0b10


class Resp:
    """``xRESP`` encodings."""
    OKAY = 0b00
    EXOKAY = 0b01
    SLVERR = 0b10
    DECERR = 0b11


def _check(addr_width: int, data_width: int, id_width: int | None = None, *, lite: bool = False) -> None:
    if not isinstance(addr_width, int) or addr_width < 1:
        raise ValueError(f"Address width must be a positive integer, not {addr_width!r}")
    if lite:
        if data_width not in (32, 64):
            raise ValueError(f"AXI4-Lite data width must be 32 or 64 bits, not {data_width!r}")
    elif (not isinstance(data_width, int) or data_width < 8 or data_width > 1024
          or data_width & (data_width - 1)):
        raise ValueError(f"AXI4 data width must be a power of two from 8 to 1024 bits, not {data_width!r}")
    if id_width is not None and (not isinstance(id_width, int) or id_width < 1):
        raise ValueError(f"ID width must be a positive integer, not {id_width!r}")


def _write_members(addr_width: int, data_width: int, id_width: int) -> dict:
    return {
        # write address channel
        "awid": Out(id_width),
        "awaddr": Out(addr_width),
        "awlen": Out(8),
        "awsize": Out(3),
        "awburst": Out(2),
        "awlock": Out(1),
        "awcache": Out(4),
        "awprot": Out(3),
        "awvalid": Out(1),
        "awready": In(1),
        # write data channel
        "wdata": Out(data_width),
        "wstrb": Out(data_width // 8),
        "wlast": Out(1),
        "wvalid": Out(1),
        "wready": In(1),
        # write response channel
        "bid": In(id_width),
        "bresp": In(2),
        "bvalid": In(1),
        "bready": Out(1),
    }


def _read_members(addr_width: int, data_width: int, id_width: int) -> dict:
    return {
        # read address channel
        "arid": Out(id_width),
        "araddr": Out(addr_width),
        "arlen": Out(8),
        "arsize": Out(3),
        "arburst": Out(2),
        "arlock": Out(1),
        "arcache": Out(4),
        "arprot": Out(3),
        "arvalid": Out(1),
        "arready": In(1),
        # read data channel
        "rid": In(id_width),
        "rdata": In(data_width),
        "rresp": In(2),
        "rlast": In(1),
        "rvalid": In(1),
        "rready": Out(1),
    }


class _AxiSignature(wiring.Signature):
    _kind = None

    def __init__(self, members: dict, **parameters):
        self._parameters = parameters
        super().__init__(members)

    @property
    def addr_width(self) -> int:
        return self._parameters["addr_width"]

    @property
    def data_width(self) -> int:
        return self._parameters["data_width"]

    def __eq__(self, other):
        other_unflipped = other.flip() if type(other) is wiring.FlippedSignature else other
        return type(self) is type(other_unflipped) and self._parameters == other_unflipped._parameters

    def __hash__(self):
        return hash((type(self), tuple(sorted(self._parameters.items()))))

    def __repr__(self):
        arguments = ", ".join(f"{name}={value}" for name, value in self._parameters.items())
        return f"{type(self).__name__}({arguments})"


class Axi4Signature(_AxiSignature):
    """Full AXI4 (AW, W, B, AR, R channels), manager's view.

    Parameters
    ----------
    addr_width : int
        ``AxADDR`` width in bits.
    data_width : int
        ``WDATA``/``RDATA`` width in bits, a power of two from 8 to 1024.
    id_width : int
        ``AxID``/``BID``/``RID`` width in bits.
    """

    def __init__(self, *, addr_width: int, data_width: int, id_width: int):
        _check(addr_width, data_width, id_width)
        super().__init__({**_write_members(addr_width, data_width, id_width),
                          **_read_members(addr_width, data_width, id_width)},
                         addr_width=addr_width, data_width=data_width, id_width=id_width)

    @property
    def id_width(self) -> int:
        return self._parameters["id_width"]


class Axi4WriteSignature(_AxiSignature):
    """Write half of AXI4 (AW, W, B channels), manager's view; parameters as :class:`Axi4Signature`."""

    def __init__(self, *, addr_width: int, data_width: int, id_width: int):
        _check(addr_width, data_width, id_width)
        super().__init__(_write_members(addr_width, data_width, id_width),
                         addr_width=addr_width, data_width=data_width, id_width=id_width)

    @property
    def id_width(self) -> int:
        return self._parameters["id_width"]


class Axi4ReadSignature(_AxiSignature):
    """Read half of AXI4 (AR, R channels), manager's view; parameters as :class:`Axi4Signature`."""

    def __init__(self, *, addr_width: int, data_width: int, id_width: int):
        _check(addr_width, data_width, id_width)
        super().__init__(_read_members(addr_width, data_width, id_width),
                         addr_width=addr_width, data_width=data_width, id_width=id_width)

    @property
    def id_width(self) -> int:
        return self._parameters["id_width"]


class Axi4LiteSignature(_AxiSignature):
    """AXI4-Lite, manager's view.

    Parameters
    ----------
    addr_width : int
        ``AWADDR``/``ARADDR`` width in bits.
    data_width : int
        32 or 64 bits.
    """

    def __init__(self, *, addr_width: int, data_width: int = 32):
        _check(addr_width, data_width, lite=True)
        super().__init__({
            "awaddr": Out(addr_width),
            "awprot": Out(3),
            "awvalid": Out(1),
            "awready": In(1),
            "wdata": Out(data_width),
            "wstrb": Out(data_width // 8),
            "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2),
            "bvalid": In(1),
            "bready": Out(1),
            "araddr": Out(addr_width),
            "arprot": Out(3),
            "arvalid": Out(1),
            "arready": In(1),
            "rdata": In(data_width),
            "rresp": In(2),
            "rvalid": In(1),
            "rready": Out(1),
        }, addr_width=addr_width, data_width=data_width)
