"""hdl.rx.untagged_buffers.UntaggedBuffers in Amaranth's simulator: MSN assignment, full queues, retirement,
revocation."""

from amaranth.sim import Simulator

from hdl.rx.untagged_buffers import UntaggedBuffers, UntaggedFault


def simulate(dut, script):
    """``script(ctx, post, lookup, retire, revoke)`` drives the block with the helpers below."""

    async def post(ctx, stream, qn, address, length, *, limit=20):
        """Post a buffer; returns the cycles it waited, or None if never accepted within ``limit``."""
        ctx.set(dut.post.payload, {"stream": stream, "qn": qn, "address": address, "length": length})
        ctx.set(dut.post.valid, 1)
        for cycle in range(limit):
            _, _, ready = await ctx.tick().sample(dut.post.ready)
            if ready:
                ctx.set(dut.post.valid, 0)
                return cycle
        ctx.set(dut.post.valid, 0)
        await ctx.tick().repeat(3)   # let the state machine return to idle
        return None

    async def lookup(ctx, stream, qn, msn, mo=0, length=1):
        ctx.set(dut.en, 1)
        ctx.set(dut.lookup, {"stream": stream, "qn": qn, "msn": msn, "mo": mo, "length": length})
        await ctx.tick().repeat(UntaggedBuffers.latency)
        return ctx.get(dut.result)

    async def retire(ctx, stream, qn, msn):
        ctx.set(dut.retire, {"stream": stream, "qn": qn, "msn": msn})
        ctx.set(dut.retire_en, 1)
        await ctx.tick()
        ctx.set(dut.retire_en, 0)

    async def revoke(ctx, stream, qn, msn=0, whole_queue=0):
        ctx.set(dut.revoke.payload, {"stream": stream, "qn": qn, "msn": msn, "whole_queue": whole_queue})
        ctx.set(dut.revoke.valid, 1)
        for _ in range(40):
            _, _, ready = await ctx.tick().sample(dut.revoke.ready)
            if ready:
                ctx.set(dut.revoke.valid, 0)
                return
        raise AssertionError("revocation never taken")

    async def bench(ctx):
        await script(ctx, post, lookup, retire, revoke)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_msn_window_mo_and_retirement():
    """RFC 5041 5.2 (MSNs from 1 in posting order), 7.1 untagged items 2-5, retirement in MSN order."""
    dut = UntaggedBuffers(4, depth=4)

    async def script(ctx, post, lookup, retire, revoke):
        for n in range(4):
            assert await post(ctx, 2, 1, 0x1000 * (n + 1), 100 + n) is not None
        assert await post(ctx, 2, 1, 0x9000, 10) is None          # depth buffers outstanding: waits
        result = await lookup(ctx, 2, 1, 1, mo=10, length=90)
        assert (result.fault, int(result.address)) == (UntaggedFault.NONE, 0x100A)
        assert (await lookup(ctx, 2, 1, 1, mo=100, length=1)).fault == UntaggedFault.INVALID_MO
        assert (await lookup(ctx, 2, 1, 1, mo=99, length=2)).fault == UntaggedFault.MESSAGE_TOO_LONG
        assert (await lookup(ctx, 2, 1, 1, mo=500, length=0)).fault == UntaggedFault.NONE   # zero length
        assert (await lookup(ctx, 2, 1, 5)).fault == UntaggedFault.NO_BUFFER
        assert (await lookup(ctx, 2, 1, 0)).fault == UntaggedFault.MSN_RANGE            # behind the window
        assert (await lookup(ctx, 2, 1, 1 + (1 << 31))).fault == UntaggedFault.MSN_RANGE
        assert (await lookup(ctx, 2, 0, 1)).fault == UntaggedFault.NO_BUFFER            # other queue, empty
        assert (await lookup(ctx, 1, 1, 1)).fault == UntaggedFault.NO_BUFFER            # other stream
        await retire(ctx, 2, 1, 1)
        assert (await lookup(ctx, 2, 1, 1)).fault == UntaggedFault.MSN_RANGE            # completed
        result = await lookup(ctx, 2, 1, 2, mo=0, length=101)
        assert result.fault == UntaggedFault.NONE
        assert await post(ctx, 2, 1, 0x5000, 7) is not None                             # slot freed: MSN 5
        result = await lookup(ctx, 2, 1, 5, mo=6, length=1)
        assert (result.fault, int(result.address)) == (UntaggedFault.NONE, 0x5006)
        # Out of order (after a revocation, say): MSN 3 retires before 2; 2 stays usable, 3 is gone.
        await retire(ctx, 2, 1, 3)
        assert (await lookup(ctx, 2, 1, 3)).fault == UntaggedFault.MSN_RANGE
        assert (await lookup(ctx, 2, 1, 2)).fault == UntaggedFault.NONE
        await retire(ctx, 2, 1, 2)
        assert (await lookup(ctx, 2, 1, 4)).fault == UntaggedFault.NONE
        assert (await lookup(ctx, 2, 1, 6)).fault == UntaggedFault.NO_BUFFER

    simulate(dut, script)


def test_lookup_sees_retirement_and_post_on_the_same_cycle():
    """Reads are transparent: a lookup taken on the cycle of a retirement or post sees it."""
    dut = UntaggedBuffers(2, depth=2)

    async def script(ctx, post, lookup, retire, revoke):
        assert await post(ctx, 0, 0, 0x40, 8) is not None
        ctx.set(dut.retire, {"stream": 0, "qn": 0, "msn": 1})
        ctx.set(dut.retire_en, 1)
        result = await lookup(ctx, 0, 0, 1)
        ctx.set(dut.retire_en, 0)
        assert result.fault == UntaggedFault.MSN_RANGE
        # A post whose write lands on the lookup's cycle: the lookup sees the new buffer.
        ctx.set(dut.post.payload, {"stream": 1, "qn": 2, "address": 0x80, "length": 4})
        ctx.set(dut.post.valid, 1)
        ctx.set(dut.en, 1)
        ctx.set(dut.lookup, {"stream": 1, "qn": 2, "msn": 1, "mo": 3, "length": 1})
        while True:
            _, _, ready = await ctx.tick().sample(dut.post.ready)
            if ready:
                break
        ctx.set(dut.post.valid, 0)
        await ctx.tick().repeat(UntaggedBuffers.latency - 1)
        result = ctx.get(dut.result)
        assert (result.fault, int(result.address)) == (UntaggedFault.NONE, 0x83)

    simulate(dut, script)


def test_revocation_of_one_buffer_and_of_a_queue():
    """The host takes back posted buffers (abi.rx.buffer_revoke_layout): a revoked MSN is out of the
    legal range like a consumed one (RFC 5041 7.1 item 5), its slot takes the next post, a stale MSN
    revokes nothing, and a revoked queue starts again at MSN 1 (RFC 5041 4.3) without touching others."""
    dut = UntaggedBuffers(4, depth=4)

    async def script(ctx, post, lookup, retire, revoke):
        for n in range(4):
            assert await post(ctx, 1, 0, 0x1000 * (n + 1), 64) is not None      # MSN 1..4
        assert await post(ctx, 1, 1, 0x8000, 64) is not None                    # other queue: MSN 1
        await revoke(ctx, 1, 0, 2)
        assert (await lookup(ctx, 1, 0, 2)).fault == UntaggedFault.MSN_RANGE
        assert (await lookup(ctx, 1, 0, 1)).fault == UntaggedFault.NONE
        assert (await lookup(ctx, 1, 0, 3)).fault == UntaggedFault.NONE
        await revoke(ctx, 1, 0, 6)                                               # never posted: no effect
        assert (await lookup(ctx, 1, 0, 4)).fault == UntaggedFault.NONE
        await retire(ctx, 1, 0, 1)
        assert await post(ctx, 1, 0, 0x5000, 64) is not None                    # MSN 5, slot of MSN 1
        await revoke(ctx, 1, 0, 1)                                               # stale: MSN 5 stays
        result = await lookup(ctx, 1, 0, 5, mo=1, length=1)
        assert (result.fault, int(result.address)) == (UntaggedFault.NONE, 0x5001)
        assert await post(ctx, 1, 0, 0x6000, 64) is not None                    # MSN 6 takes MSN 2's slot
        assert (await lookup(ctx, 1, 0, 6)).fault == UntaggedFault.NONE
        await revoke(ctx, 1, 0, whole_queue=1)
        for msn in (3, 4, 5, 6):
            assert (await lookup(ctx, 1, 0, msn)).fault == UntaggedFault.NO_BUFFER   # ahead of MSN 1
        assert await post(ctx, 1, 0, 0x7000, 64) is not None                    # MSN 1 again
        result = await lookup(ctx, 1, 0, 1, mo=2, length=1)
        assert (result.fault, int(result.address)) == (UntaggedFault.NONE, 0x7002)
        assert (await lookup(ctx, 1, 1, 1)).fault == UntaggedFault.NONE          # other queue untouched

    simulate(dut, script)
