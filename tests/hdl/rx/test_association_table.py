"""hdl.rx.association_table.AssociationTable in Amaranth's simulator: the row a packet's verification tag names
(its low ASSOCIATION_BITS bits, abi.rx.association_row), compared by transport addresses (RFC 4960 1.4, 8.5)."""

from amaranth.sim import Simulator

from abi.rx import ASSOCIATION_BITS
from hdl.rx.association_table import AssociationTable


def test_the_row_the_tag_names_writes_removal_and_range():
    dut = AssociationTable(4)
    results = []

    async def bench(ctx):
        async def write(index, valid, local_port, peer_port, peer_ip, tag, ddp=0):
            ctx.set(dut.write.valid, 1)
            ctx.set(dut.write.payload, {"index": index, "valid": valid, "ddp": ddp, "local_port": local_port,
                                        "peer_port": peer_port, "peer_ip": peer_ip, "tag": tag})
            await ctx.tick()
            ctx.set(dut.write.valid, 0)

        async def lookup(tag, local_port, peer_port, peer_ip):
            ctx.set(dut.verification_tag, tag)
            ctx.set(dut.local_port, local_port)
            ctx.set(dut.peer_port, peer_port)
            ctx.set(dut.peer_ip, peer_ip)
            await ctx.tick().repeat(2)  # latency 2
            hit = ctx.get(dut.hit)
            results.append((hit, ctx.get(dut.index), ctx.get(dut.ddp), ctx.get(dut.tag)) if hit else (0,))

        assert ctx.get(dut.write.ready)
        await lookup(0xAAA2, 1, 2, 3)                   # empty table
        await write(2, 1, 1, 2, 3, 0xAAA2, ddp=1)
        await lookup(0xAAA2, 1, 2, 3)                   # row 2: hit
        await lookup(0x5552, 1, 2, 3)                   # row 2, another tag: hit (the tag compare is the caller's)
        await lookup(0xAAA2, 1, 2, 4)                   # peer address differs
        await lookup(0xAAA2, 2, 1, 3)                   # ports swapped
        await lookup(0xAAA1, 1, 2, 3)                   # the tag names row 1: empty
        await write(1, 1, 1, 2, 3, 0xBBB1)              # the same transport addresses in row 1
        await lookup(0xBBB1, 1, 2, 3)                   # row 1
        await lookup(0xAAA2, 1, 2, 3)                   # row 2 still
        await write(1, 0, 1, 2, 3, 0xBBB1)
        await lookup(0xBBB1, 1, 2, 3)                   # removed
        await write(9, 1, 7, 7, 7, 0xCCC9)              # out of range: ignored
        await lookup(0xCCC9, 7, 7, 7)
        await lookup(0xCCC5, 7, 7, 7)                   # a row past the table's 4
        await lookup(0xAAA2 | 1 << ASSOCIATION_BITS + 3, 1, 2, 3)   # only the low bits name the row

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(bench)
    simulator.run()
    assert results == [(0,), (1, 2, 1, 0xAAA2), (1, 2, 1, 0xAAA2), (0,), (0,), (0,), (1, 1, 0, 0xBBB1),
                       (1, 2, 1, 0xAAA2), (0,), (0,), (0,), (1, 2, 1, 0xAAA2)]
