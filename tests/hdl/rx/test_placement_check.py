"""hdl.rx.placement_check.PlacementCheck in Amaranth's simulator, against the golden model.

Tagged decisions are compared with ``model.ddp.memory.MemoryTable.check_tagged``
(every fault, every TO boundary), untagged and mixed in-order traffic with
``model.ddp.sink.DdpSink`` (verdicts, placed bytes, message lengths), with
random back-pressure on every port; plus the invalidation ordering
guarantee (RFC 5041 8.3.1 item 6) and stream error latching (7.1).
"""

import random

import pytest
from amaranth.sim import Simulator

from abi.rx import SegmentStatus
from hdl.rx.placement_check import PlacementCheck
from hdl.stream.packet import keep_mask
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory, TaggedFault
from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.sink import DdpSink, Delivered, Placed, SinkError
from model.errors import DdpError, RdmapError

W = 8
TO_LIMIT = 1 << 64
ASSOCIATIONS, STREAM_IDS = 2, 2


def make_dut(**kwargs):
    return PlacementCheck(W, regions=kwargs.pop("regions", 8), associations=ASSOCIATIONS,
                          stream_ids=kwargs.pop("stream_ids", STREAM_IDS), depth=kwargs.pop("depth", 4), **kwargs)


def segment_info(*, association=0, stream_id=0, tagged, last=True, opcode=0, stag=0, to=0, qn=0, msn=0,
                 mo=0, length=0, tsn=0, ssn=None, error=None):
    """A segment's info; ``ssn`` None: the stream's next DDP-SSN (:meth:`Run.segment`)."""
    layer, etype, code = error if error is not None else (0, 0, 0)
    return {
        "association": association, "tsn": tsn, "stream_id": stream_id, "ddp_ssn": ssn,
        "tagged": tagged, "last": last, "dv": 1, "rv": 1, "opcode": opcode, "stag": stag, "to": to,
        "qn": qn, "msn": msn, "mo": mo, "invalidate_stag": 0, "payload_length": length,
        "error": {"valid": error is not None, "layer": layer, "etype": etype, "code": code},
    }


def region_row(region: MemoryRegion, association=0):
    return {
        "index": region.stag >> 8,
        "entry": {
            "valid": region.valid, "key": region.stag & 0xFF, "pd": region.pd.pd_id,
            "stream_bound": region.stream is not None, "association": association,
            "stream_id": region.stream or 0,
            "remote_read": bool(region.access & Access.REMOTE_READ),
            "remote_write": bool(region.access & Access.REMOTE_WRITE),
            "local_write": bool(region.access & Access.LOCAL_WRITE),
            "base_to": region.base_to, "length": region.length, "host_address": region.address,
        },
    }


def number(fields):
    return (int(fields.layer), int(fields.etype), int(fields.code))


class Run:
    """Drive a PlacementCheck: host writes first, then segments and payloads, all with random stalls.

    Segments without a DDP-SSN get their stream's next one, from 0 (the ``first_ssn`` of a stream
    row written without one) and again from 0 after a host write of the row. An accepted untagged
    verdict with L = 1 retires its buffer, as the engine's delivery order does for in-order traffic,
    ``retire_delay`` cycles after the verdict leaves (None: never, as behind a stalled memory).
    """

    def __init__(self, dut, *, seed=0, stall=0.3, retire_delay=0):
        self.dut = dut
        self.retire_delay = retire_delay
        self.rng = random.Random(seed)
        self.stall = stall
        self.host_ops = []      # (port name, payload dict), in order, before any segment
        self.late_ops = []      # (cycle, port name, payload) issued while segments flow
        self.items = []         # (info dict, payload bytes) or ("host", port name, payload), in order
        self.verdicts, self.commands, self.packets = [], [], []
        self.taken_cycles, self.late_accept_cycles, self.verdict_cycles = [], [], []
        self._ssn = {}

    @property
    def segments(self):
        return [item for item in self.items if item[0] != "host"]

    def segment(self, info, body=b""):
        if info["ddp_ssn"] is None:
            key = (info["association"], info["stream_id"])
            info = {**info, "ddp_ssn": self._ssn.get(key, 0)}
            self._ssn[key] = (info["ddp_ssn"] + 1) & 0xFFFF
        self.items.append((info, body))

    def host(self, name, payload):
        """A host write issued after the segments before it were taken and before the next one."""
        if name == "stream_write":
            self._ssn.pop(divmod(payload["index"], self.dut._stream_ids), None)
        self.items.append(("host", name, payload))

    async def _send(self, ctx, port, payload, log=None, cycle_box=None):
        ctx.set(port.payload, payload)
        ctx.set(port.valid, 1)
        while True:
            _, _, ready = await ctx.tick().sample(port.ready)
            if cycle_box is not None:
                cycle_box[0] += 1
            if ready:
                break
        ctx.set(port.valid, 0)
        if log is not None and cycle_box is not None:
            log.append(cycle_box[0])

    async def _idle(self, ctx, cycle_box):
        while self.rng.random() < self.stall:
            await ctx.tick()
            cycle_box[0] += 1

    def run(self):
        dut, rng = self.dut, self.rng
        done = []

        async def main(ctx):
            cycle = [0]
            for name, payload in self.host_ops:
                await self._send(ctx, getattr(dut, name), payload, cycle_box=cycle)
            self.start_cycle = cycle[0]
            for item in self.items:
                await self._idle(ctx, cycle)
                if item[0] == "host":
                    await self._send(ctx, getattr(dut, item[1]), item[2], cycle_box=cycle)
                else:
                    await self._send(ctx, dut.segment, item[0], self.taken_cycles, cycle)

        async def late(ctx):
            cycle = [0]
            for at, name, payload in self.late_ops:
                while cycle[0] < at:
                    await ctx.tick()
                    cycle[0] += 1
                await self._send(ctx, getattr(dut, name), payload, self.late_accept_cycles, cycle)

        async def payloads(ctx):
            cycle = [0]
            for info, body in self.segments:
                for offset in range(0, len(body), W):
                    chunk = body[offset:offset + W]
                    await self._idle(ctx, cycle)
                    await self._send(ctx, dut.payload_in, {
                        "data": int.from_bytes(chunk + bytes(rng.randrange(256) for _ in range(W - len(chunk))),
                                               "little"),
                        "keep": keep_mask(len(chunk)), "last": offset + W >= len(body)}, cycle_box=cycle)

        def collector(port, out, cycles=None, packets=False):
            async def testbench(ctx):
                await collect(ctx, port, out, cycles, packets)
            return testbench

        async def collect(ctx, port, out, cycles=None, packets=False):
            cycle = 0
            current = b""
            while True:
                ready = rng.random() >= self.stall
                ctx.set(port.ready, ready)
                _, _, valid, payload = await ctx.tick().sample(port.valid, port.payload)
                cycle += 1
                if not (ready and valid):
                    continue
                if packets:
                    current += int(payload.data).to_bytes(W, "little")[:bin(int(payload.keep)).count("1")]
                    if payload.last:
                        out.append(current)
                        current = b""
                else:
                    out.append(payload)
                    if cycles is not None:
                        cycles.append(cycle)

        async def retirer(ctx):
            seen, cycle, due = 0, 0, []
            while True:
                ctx.set(dut.retire.valid, 0)
                if seen < len(self.verdicts):
                    verdict = self.verdicts[seen]
                    seen += 1
                    if (verdict.status == SegmentStatus.ACCEPTED and not verdict.tagged and verdict.last
                            and self.retire_delay is not None):
                        due.append((cycle + self.retire_delay, {
                            "stream": int(verdict.association) * dut._stream_ids + int(verdict.stream_id),
                            "qn": int(verdict.qn), "msn": int(verdict.msn)}))
                if due and due[0][0] <= cycle:
                    ctx.set(dut.retire.payload, due.pop(0)[1])
                    ctx.set(dut.retire.valid, 1)
                await ctx.tick()
                cycle += 1

        async def finish(ctx):
            while len(self.verdicts) < len(self.segments):
                await ctx.tick()
            await ctx.tick().repeat(60)
            done.append(True)

        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(main)
        sim.add_testbench(late, background=True)
        sim.add_testbench(payloads, background=True)
        sim.add_testbench(collector(dut.verdict, self.verdicts, self.verdict_cycles), background=True)
        sim.add_testbench(retirer, background=True)
        sim.add_testbench(collector(dut.cmd, self.commands), background=True)
        sim.add_testbench(collector(dut.payload_out, self.packets, packets=True), background=True)
        sim.add_testbench(finish)
        sim.run()
        assert done
        return self


# -- tagged: MemoryTable.check_tagged ------------------------------------------------------------

FAULT_NUMBER = {
    TaggedFault.INVALID_STAG: DdpError.INVALID_STAG.number,
    TaggedFault.STAG_NOT_ASSOCIATED: DdpError.STAG_NOT_ASSOCIATED.number,
    TaggedFault.ACCESS_RIGHTS: RdmapError.ACCESS_RIGHTS.number,
    TaggedFault.BASE_OR_BOUNDS: DdpError.BASE_OR_BOUNDS.number,
    TaggedFault.TO_WRAP: DdpError.TO_WRAP.number,
}


def random_regions(rng, count):
    regions = []
    for index in range(count):
        length = rng.choice([1, 7, 64, 1000, rng.randrange(1, 1 << 40)])
        base = rng.choice([0, rng.randrange(1 << 48), TO_LIMIT - length, TO_LIMIT - length - 3])
        access = Access(rng.choice([14] * 6 + [0, 2, 4, 8, 10, 12]))
        bound = rng.random() < 0.3
        regions.append(MemoryRegion(
            stag=index << 8 | rng.randrange(256), pd=ProtectionDomain(rng.choice([1, 1, 1, 2])), base_to=base,
            length=length, access=access, address=rng.randrange(1 << 60),
            stream=rng.randrange(STREAM_IDS) if bound else None, valid=rng.random() > 0.1))
    return regions


def boundary_tos(region, length):
    base, end = region.base_to, region.base_to + region.length
    return [t % TO_LIMIT for t in (base - 1, base, end - length, end - length + 1, end,
                                   TO_LIMIT - length, TO_LIMIT - length - 1, base + region.length // 2)]


@pytest.mark.parametrize("seed", [1, 2])
def test_tagged_checks_agree_with_check_tagged(seed):
    """RFC 5041 7.1 tagged items 1-5 and 8.2, in MemoryTable.check_tagged order, at every TO boundary."""
    rng = random.Random(seed)
    dut = make_dut(regions=8)
    run = Run(dut, seed=seed)
    table = MemoryTable()
    regions = random_regions(rng, 7)   # row 7 never written: invalid STag
    for region in regions:
        run.host_ops.append(("region_write", region_row(region)))
        valid = region.valid
        region.valid = True
        table.register(region)
        if not valid:
            table.invalidate(region.stag)
    stream_pd = {s: 1 for s in range(ASSOCIATIONS * STREAM_IDS)}
    stream_pd[3] = 2
    for s, pd in stream_pd.items():
        run.host_ops.append(("stream_write", {"index": s, "entry": {"valid": 1, "pd": pd}}))

    errored = set()
    expected = []
    for n in range(200):
        s = rng.randrange(ASSOCIATIONS * STREAM_IDS)
        association, stream_id = divmod(s, STREAM_IDS)
        region = rng.choice(regions)
        stag = rng.choice([region.stag] * 6 + [region.stag ^ 1, 7 << 8, (1 << 23 | 3) << 8 | 5])
        length = rng.choice([0, 1, 5, 8, 13, 24])
        to = rng.choice(boundary_tos(region, length))
        opcode = rng.choice([0, 2])
        need = Access.LOCAL_WRITE if opcode == 2 else Access.REMOTE_WRITE
        # Bound regions are bound to (association 0, their stream id).
        model_stream = stream_id if association == 0 else 100 + stream_id
        fault = table.check_tagged(stag, to, length, model_stream, ProtectionDomain(stream_pd[s]), need)
        if s in errored:
            expected.append((SegmentStatus.DROPPED, None, None))
        elif fault is not None:
            errored.add(s)
            expected.append((SegmentStatus.ERROR, FAULT_NUMBER[fault], None))
        else:
            found = table.lookup(stag)
            expected.append((SegmentStatus.ACCEPTED, None, found.host_address(to) if length else None))
        run.segment(segment_info(association=association, stream_id=stream_id, tagged=1, opcode=opcode,
                                 stag=stag, to=to, length=length, tsn=n),
                    rng.randbytes(length))
        for t in sorted(errored):
            if rng.random() < 0.3:   # re-arm: the host rewrites the row, clearing the error bit
                errored.discard(t)
                run.host("stream_write", {"index": t, "entry": {"valid": 1, "pd": stream_pd[t]}})
    run.run()

    assert len(run.verdicts) == len(expected)
    statuses = [v.status for v in run.verdicts]
    assert [int(v.tsn) for v in run.verdicts] == list(range(len(expected)))
    faults_seen = set()
    commands = iter(run.commands)
    for verdict, (status, error, address) in zip(run.verdicts, expected):
        assert verdict.status == status, verdict
        if status is SegmentStatus.ERROR:
            assert number(verdict.error) == tuple(error)
            faults_seen.add(tuple(error))
        if address is not None:
            command = next(commands)
            assert (int(command.address), int(command.length), int(command.tag)) == \
                (address, int(verdict.payload_length), int(verdict.tag))
            assert int(verdict.host_address) == address
    assert next(commands, None) is None
    accepted_payloads = [body for (info, body), v in zip(run.segments, run.verdicts)
                         if body and v.status is SegmentStatus.ACCEPTED]
    assert run.packets == accepted_payloads
    assert SegmentStatus.DROPPED in statuses and statuses.count(SegmentStatus.ACCEPTED) > 20
    assert faults_seen == {tuple(number) for number in FAULT_NUMBER.values()}


def test_every_tagged_fault_in_order():
    """Each fault of check_tagged, one stream each, plus the boundaries that pass (RFC 5041 7.1, 8.2)."""
    table = MemoryTable()
    base, length = 0x1000, 64
    regions = [
        MemoryRegion(stag=0 << 8 | 0x11, pd=ProtectionDomain(1), base_to=base, length=length,
                     access=Access.REMOTE_WRITE, address=0x8000_0000),
        MemoryRegion(stag=1 << 8 | 0x22, pd=ProtectionDomain(1), base_to=TO_LIMIT - 32, length=32,
                     access=Access.REMOTE_WRITE | Access.LOCAL_WRITE, address=0x9000_0000),
        MemoryRegion(stag=2 << 8 | 0x33, pd=ProtectionDomain(2), base_to=0, length=100,
                     access=Access.REMOTE_WRITE, address=0xA000_0000),
        MemoryRegion(stag=3 << 8 | 0x44, pd=ProtectionDomain(1), base_to=0, length=100,
                     access=Access.REMOTE_WRITE, address=0xB000_0000, stream=1),
    ]
    for region in regions:
        table.register(region)
    cases = [  # (stag, to, length, opcode, expected number or None)
        (0x0011, base, length, 0, None),                    # exactly the region
        (0x0011, base + length - 8, 8, 0, None),            # end - len
        (0x0011, 0, 0, 0, None),                            # zero length: not checked (5.2)
        (0x0012, base, 8, 0, DdpError.INVALID_STAG),        # key mismatch
        (0x0011, base - 1, 8, 0, DdpError.BASE_OR_BOUNDS),
        (0x0011, base + length - 7, 8, 0, DdpError.BASE_OR_BOUNDS),
        (0x0122, TO_LIMIT - 8, 8, 0, DdpError.TO_WRAP),     # ends on 2**64 - 1
        (0x0122, TO_LIMIT - 9, 8, 2, None),                 # Read Response, local write
        (0x0233, 0, 8, 0, DdpError.STAG_NOT_ASSOCIATED),    # other PD
        (0x0344, 0, 8, 0, DdpError.STAG_NOT_ASSOCIATED),    # bound to stream 1
        (0x0011, base, 8, 2, RdmapError.ACCESS_RIGHTS),     # no local write
        (0x4011, base, 8, 0, DdpError.INVALID_STAG),        # index beyond the table
    ]
    for stag, to, length, opcode, error in cases:   # the model agrees with the table above
        need = Access.LOCAL_WRITE if opcode == 2 else Access.REMOTE_WRITE
        fault = table.check_tagged(stag, to, length, 0, ProtectionDomain(1), need)
        assert (FAULT_NUMBER[fault] if fault else None) == (error.number if error else None)
    # An error latches its stream: stream 0 takes the allowed cases, streams 1-3 one error each.
    batches, batch = [], []
    for case in cases:
        batch.append(case)
        if sum(1 for c in batch if c[4] is not None) == 3:
            batches.append(batch)
            batch = []
    batches.append(batch)
    for batch_number, batch in enumerate(batches):
        run = Run(make_dut(regions=4), seed=batch_number, stall=0.2)
        for region in regions:
            run.host_ops.append(("region_write", region_row(region)))
        for s in range(4):
            run.host_ops.append(("stream_write", {"index": s, "entry": {"valid": 1, "pd": 1}}))
        streams, next_stream = [], 1
        for stag, to, length, opcode, error in batch:
            s = 0 if error is None else next_stream
            next_stream += error is not None
            streams.append(s)
            association, stream_id = divmod(s, STREAM_IDS)
            run.segment(segment_info(association=association, stream_id=stream_id, tagged=1,
                                              opcode=opcode, stag=stag, to=to, length=length),
                                 bytes(range(length)))
        run.run()
        for verdict, (stag, to, length, opcode, error) in zip(run.verdicts, batch):
            if error is None:
                assert verdict.status is SegmentStatus.ACCEPTED
                if length:
                    region = table.lookup(stag)
                    assert int(verdict.host_address) == region.host_address(to)
            else:
                assert verdict.status is SegmentStatus.ERROR
                assert number(verdict.error) == tuple(error.number)


# -- untagged and mixed in-order traffic: DdpSink ---------------------------------------------------

def _tagged_access(header):
    return Access.LOCAL_WRITE if header.rsvd_ulp & 0xF == 2 else Access.REMOTE_WRITE


@pytest.mark.parametrize("retire_delay", [0, None], ids=["retired-at-once", "never-retired"])
def test_in_order_traffic_matches_ddp_sink(retire_delay):
    """RFC 5041 7.1 untagged items 1-5 and tagged checks, byte for byte and error for error with DdpSink,
    whenever the delivery order retires the buffers: a message counts as delivered (5.4) from the decision
    that completed it, so a later segment naming its MSN gets MSN range (7.1 item 5) at once."""
    seen = set()
    for seed in (3, 4, 5):
        seen |= _in_order_run(seed, retire_delay)
    assert {DdpError.NO_BUFFER.number, DdpError.MSN_RANGE.number, DdpError.MESSAGE_TOO_LONG.number,
            DdpError.INVALID_MO.number, DdpError.INVALID_QN.number, DdpError.BASE_OR_BOUNDS.number} <= seen


def _in_order_run(seed, retire_delay=0):
    """One random in-order run against one DdpSink per stream; returns the outcomes seen."""
    rng = random.Random(seed)
    depth, stream_ids = 4, 8   # many streams: the model's sink cannot be re-armed after its error
    run = Run(make_dut(regions=4, depth=depth, stream_ids=stream_ids), seed=seed, retire_delay=retire_delay)
    table, model_memory = MemoryTable(), SparseMemory()
    region = table.register(MemoryRegion(stag=1 << 8 | 0x5A, pd=ProtectionDomain(1), base_to=0x10000, length=256,
                                         access=Access.REMOTE_WRITE | Access.LOCAL_WRITE, address=0x7000_0000))
    run.host_ops.append(("region_write", region_row(region)))
    streams = ASSOCIATIONS * stream_ids
    sinks = [DdpSink(pd=ProtectionDomain(1), memory_table=table, host_memory=model_memory, stream_id=s,
                     queues=(0, 1, 2), tagged_access=_tagged_access) for s in range(streams)]
    next_address = 0x1000_0000
    posted = {}
    for s in range(streams):
        run.host_ops.append(("stream_write", {"index": s, "entry": {"valid": 1, "pd": 1}}))
        for qn in range(3):
            for _ in range(rng.randrange(depth + 1)):
                length = rng.randrange(1, 48)
                sinks[s].post_buffer(qn, next_address, length)
                posted.setdefault((s, qn), []).append(length)
                run.host_ops.append(("post", {"stream": s, "qn": qn, "address": next_address, "length": length}))
                next_address += 0x100

    expected = []
    next_msn = {(s, qn): 1 for s in range(streams) for qn in range(3)}

    def send(s, header, body, info):
        sink = sinks[s]
        was_in_error = sink.error is not None
        events = sink.receive(DdpSegment(header, body).encode())
        expected.append((was_in_error, events))
        association, stream_id = divmod(s, stream_ids)
        run.segment(segment_info(association=association, stream_id=stream_id, length=len(body),
                                 tsn=len(expected) - 1, **info), body)

    while len(expected) < 300:
        s = rng.randrange(streams)
        if rng.random() < 0.25:   # a tagged segment, near the region's ends
            length = rng.choice([0, 1, 8, 17])
            to = rng.choice([region.base_to, region.base_to + 256 - length, region.base_to + 100,
                             region.base_to + 256 - length + rng.choice([0, 0, 0, 1]), region.base_to - 1])
            opcode = rng.choice([0, 2])
            header = TaggedHeader(last=rng.random() < 0.5, rsvd_ulp=0x40 | opcode, stag=region.stag, to=to)
            send(s, header, rng.randbytes(length), {"tagged": 1, "last": header.last, "opcode": opcode,
                                                    "stag": region.stag, "to": to})
            continue
        qn = rng.choice([0, 0, 1, 2, 2, 3] if rng.random() < 0.05 else [0, 1, 2])
        msn = next_msn.get((s, qn), 1)
        fault = rng.random()
        if fault < 0.04:
            msn = (msn + rng.choice([1, 3, depth + 1, 1 << 31, (1 << 31) + 1, -1, -2])) % (1 << 32)
        lengths = posted.get((s, qn), [])
        buffer_length = lengths[(msn - 1) % len(lengths)] if lengths and 1 <= msn <= len(lengths) else 32
        total = rng.choice([0, buffer_length, rng.randrange(buffer_length + 1)])
        if 0.04 <= fault < 0.07:
            total = buffer_length + rng.randrange(1, 9)   # message too long
        pieces, offset = [], 0
        while True:
            size = min(total - offset, rng.choice([1, 5, 8, 13, 20]))
            pieces.append((offset, size))
            offset += size
            if offset >= total:
                break
        if 0.07 <= fault < 0.09:                          # an MO at or past the end of the buffer
            pieces = [(buffer_length + rng.randrange(3), rng.randrange(1, 6))]
        for number_, (mo, size) in enumerate(pieces):
            last = number_ == len(pieces) - 1
            opcode = {0: 3, 1: 1, 2: 7}.get(qn, 3)
            header = UntaggedHeader(last=last, rsvd_ulp=(0x40 | opcode) << 32, qn=qn, msn=msn, mo=mo)
            send(s, header, rng.randbytes(size), {"tagged": 0, "last": last, "opcode": opcode, "qn": qn,
                                                  "msn": msn, "mo": mo})
        if (s, qn) in next_msn and msn == next_msn[(s, qn)]:
            next_msn[(s, qn)] = msn + 1
    run.run()

    hw_memory = SparseMemory()
    commands, packets = iter(run.commands), iter(run.packets)
    seen = set()
    for verdict, (was_in_error, events) in zip(run.verdicts, expected, strict=True):
        errors = [e for e in events if isinstance(e, SinkError)]
        placed = [e for e in events if isinstance(e, Placed)]
        delivered = [e for e in events if isinstance(e, Delivered)]
        if was_in_error:
            assert verdict.status is SegmentStatus.DROPPED
        elif errors:
            assert verdict.status is SegmentStatus.ERROR, (verdict, errors)
            assert number(verdict.error) == tuple(errors[0].number)
            seen.add(errors[0].number)
        else:
            assert verdict.status is SegmentStatus.ACCEPTED, (verdict, events)
            seen.add("accepted")
        if placed:
            command = next(commands)
            assert (int(command.address), int(command.length)) == (placed[0].address, placed[0].length)
            hw_memory.write(int(command.address), next(packets))
        if delivered and not delivered[0].tagged:
            assert int(verdict.message_length) == delivered[0].length
            seen.add("delivered")
    assert next(commands, None) is None and next(packets, None) is None
    assert hw_memory.writes == model_memory.writes
    for address, length in model_memory.writes:
        assert hw_memory.read(address, length) == model_memory.read(address, length)
    assert {"accepted", "delivered"} <= seen
    return seen


# -- ordering: invalidation, error latching ------------------------------------------------------------

def test_invalidation_racing_segments():
    """RFC 5041 8.3.1 item 6: no segment taken after an accepted invalidation places; none before is refused."""
    region = MemoryRegion(stag=2 << 8 | 0x77, pd=ProtectionDomain(1), base_to=0, length=1 << 20,
                          access=Access.REMOTE_WRITE, address=0x4000_0000)
    sweep = 4 * 8 + 3  # the stream row's write first sweeps the stream's 4 x 8 buffer slots (forget)
    for at in (30 + sweep, 37 + sweep, 44 + sweep):
        run = Run(make_dut(regions=4), seed=at, stall=0.0)
        run.host_ops.append(("region_write", region_row(region)))
        run.host_ops.append(("stream_write", {"index": 0, "entry": {"valid": 1, "pd": 1}}))
        revoked = region_row(region)
        revoked["entry"]["valid"] = 0
        run.late_ops.append((at, "region_write", revoked))
        for n in range(40):
            run.segment(segment_info(tagged=1, stag=region.stag, to=64 * n, length=8, tsn=n), bytes(8))
        run.run()
        (accepted_at,) = run.late_accept_cycles
        statuses = [v.status for v in run.verdicts]
        before = sum(1 for cycle in run.taken_cycles if cycle <= accepted_at)
        assert 0 < before < 40
        assert statuses[:before] == [SegmentStatus.ACCEPTED] * before
        assert statuses[before] is SegmentStatus.ERROR and number(run.verdicts[before].error) == \
            tuple(DdpError.INVALID_STAG.number)
        assert statuses[before + 1:] == [SegmentStatus.DROPPED] * (40 - before - 1)
        assert len(run.commands) == before
        # Every segment checked against the old row had left the pipeline when the write was accepted:
        # its verdict was in the output queue, which shows it one to three edges after stage 4 (module docs).
        assert run.verdict_cycles[before - 1] <= accepted_at + 2


def test_error_latches_back_to_back():
    """RFC 5041 7.1: after the first error, every later segment of the stream is dropped, even back to back."""
    run = Run(make_dut(), seed=5, stall=0.0)
    run.host_ops.append(("stream_write", {"index": 0, "entry": {"valid": 1, "pd": 1}}))
    run.host_ops.append(("stream_write", {"index": 1, "entry": {"valid": 1, "pd": 1}}))
    run.host_ops.append(("post", {"stream": 0, "qn": 0, "address": 0x100, "length": 64}))
    run.host_ops.append(("post", {"stream": 1, "qn": 0, "address": 0x200, "length": 64}))
    tagged_error = segment_info(tagged=1, stag=5 << 8, length=4)
    run.segment(segment_info(tagged=0, msn=1, length=4, last=0), bytes(4))
    run.segment(tagged_error, bytes(4))
    run.segment(segment_info(tagged=0, msn=1, mo=4, length=4), bytes(4))
    run.segment(segment_info(stream_id=1, tagged=0, msn=1, length=4), bytes(4))
    run.segment(segment_info(tagged=0, msn=1, mo=8, length=0))
    run.segment(segment_info(stream_id=1, tagged=0, msn=2, error=(1, 2, 6)))   # header error passes through
    run.segment(segment_info(stream_id=1, tagged=0, msn=2, length=4), bytes(4))
    run.segment(segment_info(association=1, stream_id=1, tagged=0, msn=1, length=4), bytes(4))  # not armed
    run.run()
    assert [v.status for v in run.verdicts] == [
        SegmentStatus.ACCEPTED, SegmentStatus.ERROR, SegmentStatus.DROPPED, SegmentStatus.ACCEPTED,
        SegmentStatus.DROPPED, SegmentStatus.ERROR, SegmentStatus.DROPPED, SegmentStatus.NO_STREAM]
    assert number(run.verdicts[1].error) == tuple(DdpError.INVALID_STAG.number)
    assert number(run.verdicts[5].error) == (1, 2, 6)
    assert int(run.verdicts[3].message_length) == 4
    assert [(int(c.address), int(c.length)) for c in run.commands] == [(0x100, 4), (0x200, 4)]


def test_header_error_with_payload_sends_no_packet():
    """A segment the header validator refused (DV, RFC 5041 4.1) has a payload length but no packet:
    the next accepted segment's payload must still be forwarded, not consumed in its place."""
    run = Run(make_dut(), seed=7, stall=0.2)
    run.host_ops.append(("stream_write", {"index": 0, "entry": {"valid": 1, "pd": 1}}))
    run.host_ops.append(("stream_write", {"index": 1, "entry": {"valid": 1, "pd": 1}}))
    run.host_ops.append(("post", {"stream": 1, "qn": 0, "address": 0x200, "length": 64}))
    run.segment(segment_info(tagged=1, stag=1 << 8, length=40, error=(1, 1, 4)))  # no payload packet
    body = bytes(range(20))
    run.segment(segment_info(stream_id=1, tagged=0, msn=1, length=len(body)), body)
    run.run()
    assert [v.status for v in run.verdicts] == [SegmentStatus.ERROR, SegmentStatus.ACCEPTED]
    assert run.packets == [body]


# -- delivered messages: their buffers are consumed from the deciding segment on ------------------------------

def _scripted_run(script, *, retire_delay, posts=((0, 1), (1, 1))):
    """Run ``script`` (per item: ("seg", stream, ssn, msn, mo, length, last) or ("rearm", stream)) through the
    DUT back to back and through one DdpSink per stream with the same DDP-SSNs; returns the DUT's
    verdicts and commands beside the model's events."""
    run = Run(make_dut(regions=2, depth=4), seed=11, stall=0.0, retire_delay=retire_delay)
    table, model_memory = MemoryTable(), SparseMemory()
    streams = {s: DdpSink(pd=ProtectionDomain(1), memory_table=table, host_memory=model_memory, stream_id=s,
                          queues=(0, 1, 2), window=32) for s, _ in posts}
    for s, count in posts:
        run.host_ops.append(("stream_write", {"index": s, "entry": {"valid": 1, "pd": 1}}))
        for n in range(count):
            address = 0x1000 * (s + 1) + 0x100 * n
            streams[s].post_buffer(0, address, 64)
            run.host_ops.append(("post", {"stream": s, "qn": 0, "address": address, "length": 64}))
    expected = []
    for item in script:
        if item[0] == "rearm":
            streams[item[1]].rearm(0)
            run.host("stream_write", {"index": item[1], "entry": {"valid": 1, "pd": 1}})
            continue
        _, s, ssn, msn, mo, length, last = item
        header = UntaggedHeader(last=last, rsvd_ulp=(0x40 | 3) << 32, qn=0, msn=msn, mo=mo)
        body = bytes([len(expected) + 1]) * length
        expected.append(streams[s].receive(DdpSegment(header, body).encode(), ssn))
        association, stream_id = divmod(s, STREAM_IDS)
        run.segment(segment_info(association=association, stream_id=stream_id, tagged=0, opcode=3, msn=msn,
                                 mo=mo, length=length, last=last, ssn=ssn, tsn=len(expected) - 1), body)
    run.run()
    return run, expected


def _outcome(events):
    errors = [e for e in events if isinstance(e, SinkError)]
    if errors:
        return SegmentStatus.ERROR, tuple(errors[0].number)
    return (SegmentStatus.ACCEPTED, None) if events else (SegmentStatus.DROPPED, None)


def _assert_agrees(run, expected):
    got = [(v.status, number(v.error) if v.status is SegmentStatus.ERROR else None) for v in run.verdicts]
    assert got == [_outcome(events) for events in expected]
    placed = [(e.address, e.length) for events in expected for e in events if isinstance(e, Placed)]
    assert [(int(c.address), int(c.length)) for c in run.commands] == placed


MSN_RANGE = tuple(DdpError.MSN_RANGE.number)


@pytest.mark.parametrize("retire_delay", [0, 40, None], ids=["retired-at-once", "retired-late", "never-retired"])
def test_a_completed_message_s_msn_is_refused_back_to_back(retire_delay):
    """RFC 5041 7.1 untagged item 5 and 5.3: a Send of MSN 1 completes; the next segment, back to back,
    names MSN 1 again: MSN range (0x2/0x03), nothing placed, and the stream's later segments are
    dropped, however late the delivery order retires the buffer. Stream 1's own MSN 1 is unaffected."""
    run, expected = _scripted_run([
        ("seg", 0, 0, 1, 0, 50, True),
        ("seg", 0, 1, 1, 0, 16, True),     # the completed MSN again
        ("seg", 1, 0, 1, 0, 8, True),      # another stream's MSN 1
        ("seg", 0, 2, 2, 0, 8, True),      # dropped: stream 0 is in error
    ], retire_delay=retire_delay)
    assert [_outcome(e) for e in expected] == [
        (SegmentStatus.ACCEPTED, None), (SegmentStatus.ERROR, MSN_RANGE), (SegmentStatus.ACCEPTED, None),
        (SegmentStatus.DROPPED, None)]
    _assert_agrees(run, expected)


def test_a_message_completes_once_its_gap_fills_and_not_twice():
    """RFC 5041 5.4: the last segment (DDP-SSN 1) arrives before the first (0): MSN 1 still finds its
    buffer for the first segment, then is delivered; a second L = 1 segment of MSN 1 that came while
    delivery waited is refused (5.3, at most once), and one after delivery too. Out of order, only the
    delivery order knows when to retire, so the harness never does: the block decides alone."""
    run, expected = _scripted_run([
        ("seg", 0, 1, 1, 8, 8, True),
        ("seg", 1, 1, 1, 8, 8, True),
        ("seg", 1, 2, 1, 16, 4, True),     # a second last segment while MSN 1 waits: MSN range
        ("seg", 0, 0, 1, 0, 8, False),     # fills the gap: MSN 1 delivered
        ("seg", 0, 2, 1, 0, 4, False),     # after delivery, MSN 1 is consumed: MSN range
    ], retire_delay=None, posts=((0, 2), (1, 2)))
    assert [_outcome(e) for e in expected] == [
        (SegmentStatus.ACCEPTED, None), (SegmentStatus.ACCEPTED, None), (SegmentStatus.ERROR, MSN_RANGE),
        (SegmentStatus.ACCEPTED, None), (SegmentStatus.ERROR, MSN_RANGE)]
    _assert_agrees(run, expected)


def test_rearming_a_stream_keeps_delivered_messages_consumed_and_forgets_undelivered_ones():
    """A stream row rewritten (re-armed) restarts its DDP-SSN window: a message delivered before stays
    consumed (MSN range), a last segment accepted but never delivered is forgotten, as the model's sink
    forgets it, so that message's last segment is accepted again."""
    run, expected = _scripted_run([
        ("seg", 0, 0, 1, 0, 8, True),      # MSN 1 delivered
        ("seg", 0, 2, 2, 8, 8, True),      # MSN 2's last segment, DDP-SSN 1 missing: not delivered
        ("rearm", 0),
        ("seg", 0, 0, 1, 0, 8, True),      # MSN 1 again: consumed
        ("rearm", 0),
        ("seg", 0, 1, 2, 8, 8, True),      # MSN 2's last segment again, a fresh window: accepted...
        ("seg", 0, 0, 2, 0, 8, False),     # ...and delivered once its first segment comes
        ("seg", 0, 2, 2, 0, 8, False),     # then consumed
    ], retire_delay=None, posts=((0, 2),))
    assert [_outcome(e) for e in expected] == [
        (SegmentStatus.ACCEPTED, None), (SegmentStatus.ACCEPTED, None), (SegmentStatus.ERROR, MSN_RANGE),
        (SegmentStatus.ACCEPTED, None), (SegmentStatus.ACCEPTED, None), (SegmentStatus.ERROR, MSN_RANGE)]
    _assert_agrees(run, expected)
