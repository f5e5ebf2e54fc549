"""AXI4-Lite manager transactions for Amaranth's simulator: one whole-word write or read at a time."""

from __future__ import annotations


async def axil_write(ctx, bus, address: int, value: int) -> None:
    """Write ``value`` to ``address`` (AW and W together, as ``hdl.bus.register_file`` takes them); return
    once B is answered."""
    ctx.set(bus.awaddr, address)
    ctx.set(bus.wdata, value)
    ctx.set(bus.wstrb, 0xF)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    ctx.set(bus.bready, 1)
    await ctx.tick().until(bus.awready)
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    await ctx.tick().until(bus.bvalid)
    ctx.set(bus.bready, 0)


async def axil_read(ctx, bus, address: int) -> int:
    """The word at ``address``."""
    ctx.set(bus.araddr, address)
    ctx.set(bus.arvalid, 1)
    ctx.set(bus.rready, 1)
    await ctx.tick().until(bus.arready)
    ctx.set(bus.arvalid, 0)
    (value,) = await ctx.tick().sample(bus.rdata).until(bus.rvalid)
    ctx.set(bus.rready, 0)
    await ctx.tick()
    return value
