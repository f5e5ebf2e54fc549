"""hdl.rx.association_table.AssociationTable in Amaranth's simulator."""

from amaranth.sim import Simulator

from hdl.rx.association_table import AssociationTable


def test_lookup_writes_removal_and_priority():
    dut = AssociationTable(4)
    results = []

    async def bench(ctx):
        async def write(index, valid, local_port, peer_port, peer_ip, tag, ddp=0):
            ctx.set(dut.write.valid, 1)
            ctx.set(dut.write.payload, {"index": index, "valid": valid, "ddp": ddp, "local_port": local_port,
                                        "peer_port": peer_port, "peer_ip": peer_ip, "tag": tag})
            await ctx.tick()
            ctx.set(dut.write.valid, 0)

        async def lookup(local_port, peer_port, peer_ip):
            ctx.set(dut.local_port, local_port)
            ctx.set(dut.peer_port, peer_port)
            ctx.set(dut.peer_ip, peer_ip)
            await ctx.tick().repeat(2)  # latency 2
            results.append((ctx.get(dut.hit), ctx.get(dut.index), ctx.get(dut.ddp), ctx.get(dut.tag)))

        assert ctx.get(dut.write.ready)
        await lookup(1, 2, 3)                           # empty table
        await write(2, 1, 1, 2, 3, 0xAAAA, ddp=1)
        await lookup(1, 2, 3)                           # hit entry 2
        await lookup(1, 2, 4)                           # peer address differs
        await lookup(2, 1, 3)                           # ports swapped
        await write(1, 1, 1, 2, 3, 0xBBBB)
        await lookup(1, 2, 3)                           # lowest index wins
        await write(1, 0, 1, 2, 3, 0xBBBB)
        await lookup(1, 2, 3)                           # removed: entry 2 again
        await write(9, 1, 7, 7, 7, 0xCCCC)              # out of range: ignored
        await lookup(7, 7, 7)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(bench)
    simulator.run()
    assert results == [(0, 0, 0, 0), (1, 2, 1, 0xAAAA), (0, 0, 0, 0), (0, 0, 0, 0), (1, 1, 0, 0xBBBB),
                       (1, 2, 1, 0xAAAA), (0, 0, 0, 0)]
