"""The control link (hdl/link/) in Amaranth's simulator, driven by the host's code (driver/link.py) over UART bits.

The board's side is the RTL: UART, SLIP, request buffer, executor, with the
engine's register file and the host memory behind it; the streams it pops
and the frames it sends are the testbench's. The host's side is
``driver.link.AsyncLink`` on a UART written from the 8N1 definition
(tests/hdl/link/harness.py). Expectations: the register file's map
(``DEVICE_ID``, the values written), the bytes the testbench offered or
wrote, and that a write retried after a damaged byte happens once.
"""

import random
import struct

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from driver.link import AsyncLink, LinkStatusError, LinkTimeout, Polled
from abi.link import (LINK_VERSION, REQUEST_DATA_BYTES, LinkQueue, Op, Status, TxInput, TxOutput, tx_input_bytes,
                      tx_output_bytes, zero_run_encode)
from abi.rx import ack_bytes, exception_record_layout, register_map, report_bytes
from abi.register_file import DEVICE_ID
from hdl.bus.register_file import RegisterFile
from hdl.link.host_memory import HostMemory
from hdl.link.link import ControlLink
from hdl.mac.mac import RX_EVENTS, TX_EVENTS
from hdl.stream.queue import Queue
from hdl.stream.simulation import beats_of
from tests.hdl.link.harness import CLOCK_PERIOD, SimTransport, SimUart

BIT_CLOCKS = 4
BAUD = 1 / (BIT_CLOCKS * CLOCK_PERIOD)
MEMORY_BYTES = 4096
LATENCY = 3000 * CLOCK_PERIOD  # the board's longest execution: 2 clocks a byte of a 1024-byte memory write


class Bench:
    """ControlLink + HostMemory + the engine's RegisterFile; the table write streams and frames are collected."""

    def __init__(self, *, hold_bytes: int = 16384, stalled: TxInput | None = None):
        self.m = m = Module()
        self.link = m.submodules.link = ControlLink(divisor=BIT_CLOCKS, memory_bytes=MEMORY_BYTES,
                                                    hold_bytes=hold_bytes, register_bits=12)
        self.memory = m.submodules.memory = HostMemory(MEMORY_BYTES)
        self.registers = m.submodules.registers = RegisterFile(register_map())
        wiring.connect(m, self.link.memory, self.memory.link)
        wiring.connect(m, self.link.axil, self.registers.axil)
        self.uart = SimUart(self.link.uart_rx, self.link.uart_tx, BIT_CLOCKS)
        self.table_writes: list[int] = []
        self.frames: list[bytes] = []
        # The transmit engine's request streams: two-deep queues, as the engine's inputs are queues;
        # the `stalled` one is never read.
        self.pushed: dict[TxInput, list[int]] = {stream: [] for stream in TxInput}
        self.push_queues = {}
        for stream, size in tx_input_bytes().items():
            axis = getattr(self.link, f"push_{stream.name.lower()}")
            queue = self.push_queues[stream] = m.submodules[f"push_{stream.name.lower()}"] = Queue(8 * size, 2)
            m.d.comb += [queue.sink.payload.eq(axis.tdata), queue.sink.valid.eq(axis.tvalid),
                         axis.tready.eq(queue.sink.ready)]
        self.stalled = stalled

    def run(self, main, *, faults: dict | None = None, background=()):
        sim = Simulator(self.m)
        sim.add_clock(CLOCK_PERIOD)
        sim.add_testbench(self.uart.driver(), background=True)
        sim.add_testbench(self.uart.monitor(), background=True)
        sim.add_testbench(self._tables(), background=True)
        sim.add_testbench(self._frames(), background=True)
        for stream, queue in self.push_queues.items():
            if stream is not self.stalled:
                sim.add_testbench(self._records(queue, self.pushed[stream]), background=True)
        for testbench in background:
            sim.add_testbench(testbench, background=True)
        result = {}

        async def testbench(ctx):
            transport = SimTransport(ctx, self.uart, **(faults or {}))
            link = AsyncLink(transport, baud=BAUD, latency=LATENCY, seed=1)
            await link.open()
            result["value"] = await main(ctx, link)
            result["transport"], result["link"] = transport, link
        sim.add_testbench(testbench)
        sim.run()
        return result

    def _tables(self):
        async def testbench(ctx):
            table = self.registers.table_association
            ctx.set(table.ready, 1)
            while True:
                if not ctx.get(table.valid):
                    await ctx.posedge(table.valid)
                _, _, valid, payload = await ctx.tick().sample(table.valid, table.payload.as_value())
                if valid:
                    self.table_writes.append(payload)
        return testbench

    @staticmethod
    def _records(queue, into: list[int]):
        async def testbench(ctx):
            ctx.set(queue.source.ready, 1)
            while True:
                _, _, valid, payload = await ctx.tick().sample(queue.source.valid, queue.source.payload)
                if valid:
                    into.append(payload)
        return testbench

    def _frames(self):
        async def testbench(ctx):
            axis = self.link.frames
            ctx.set(axis.tready, 1)
            current = b""
            while True:
                if not ctx.get(axis.tvalid):
                    await ctx.posedge(axis.tvalid)
                _, _, valid, data, keep, last = await ctx.tick().sample(axis.tvalid, axis.tdata, axis.tkeep,
                                                                        axis.tlast)
                if valid:
                    count = bin(keep).count("1")
                    assert keep == (1 << count) - 1
                    current += data.to_bytes(8, "little")[:count]
                    if last:
                        self.frames.append(current)
                        current = b""
        return testbench


def test_registers_memory_and_ping():
    bench = Bench()
    local_ip = register_map().config_offset("local_ip")
    rng = random.Random(1)
    payload = rng.randbytes(300)

    async def main(ctx, link):
        info = link.info
        await link.write_register(local_ip, 0x0A000002)
        await link.write_memory(100, payload)
        return (info, await link.read_register(0), await link.read_register(local_ip),
                await link.read_memory(100, len(payload)), await link.read_memory(MEMORY_BYTES - 8, 8))

    info, device_id, ip, readback, top = bench.run(main)["value"]
    assert (info.version, info.memory_bytes, info.request_data_bytes) == (LINK_VERSION, MEMORY_BYTES,
                                                                          REQUEST_DATA_BYTES)
    assert device_id == DEVICE_ID
    assert ip == 0x0A000002
    assert readback == payload
    assert top == bytes(8)


def test_refusals():
    """Ranges past the memory are refused whole; a register write's data must be one word."""
    bench = Bench()
    statuses = []

    async def main(ctx, link):
        for call in (link.read_memory(MEMORY_BYTES - 4, 8), link.write_memory(MEMORY_BYTES - 1, b"ab")):
            try:
                await call
            except LinkStatusError as error:
                statuses.append(error.status)
        response = await link.call(Op.REG_WRITE, 0x10, 0, b"\x01\x02")
        statuses.append(response.status)
        return await link.read_memory(MEMORY_BYTES - 1, 1)

    last = bench.run(main)["value"]
    assert statuses == [Status.BAD_ADDRESS, Status.BAD_ADDRESS, Status.BAD_REQUEST]
    assert last == b"\x00"


def _record_source(axis, records: list[int]):
    """Offers each record on a one-beat AXI4-Stream, the next after the design took it."""
    async def testbench(ctx):
        for record in records:
            ctx.set(axis.tdata, record)
            ctx.set(axis.tkeep, -1)
            ctx.set(axis.tlast, 1)
            ctx.set(axis.tvalid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(axis.tready)
                if ready:
                    break
            ctx.set(axis.tvalid, 0)
    return testbench


def _exception_source(axis, packets: list[tuple[int, bytes]]):
    async def testbench(ctx):
        for record, packet in packets:
            for beat in beats_of(packet, 8):
                ctx.set(axis.tdata, beat["data"])
                ctx.set(axis.tkeep, beat["keep"])
                ctx.set(axis.tlast, beat["last"])
                ctx.set(axis.tuser, record)
                ctx.set(axis.tvalid, 1)
                while True:
                    _, _, ready = await ctx.tick().sample(axis.tready)
                    if ready:
                        break
            ctx.set(axis.tvalid, 0)
    return testbench


def test_pops_counters_and_frames():
    bench = Bench(hold_bytes=128)
    rng = random.Random(2)
    reports = [rng.getrandbits(8 * report_bytes()) for _ in range(2)]
    acks = [rng.getrandbits(8 * ack_bytes())]
    record_bits = exception_record_layout().size
    exceptions = [(rng.getrandbits(record_bits), rng.randbytes(61)), (rng.getrandbits(record_bits), rng.randbytes(150))]
    frames = [rng.randbytes(60), rng.randbytes(101), rng.randbytes(13)]
    counter_values = {name: rng.getrandbits(32) for name in RX_EVENTS + TX_EVENTS}

    async def main(ctx, link):
        for name, value in counter_values.items():
            ctx.set(getattr(bench.link.mac_counters, name), value)
        popped = {"reports": [], "acks": [], "exceptions": []}
        for _ in range(3):
            popped["reports"].append(await link.pop_report())
        for _ in range(2):
            popped["acks"].append(await link.pop_ack())
        for _ in range(3):
            popped["exceptions"].append(await link.pop_exception())
        for frame in frames:
            await link.send_frame(frame)
        popped["counters"] = await link.mac_counters()
        return popped

    popped = bench.run(main, background=[_record_source(bench.link.report, reports),
                                         _record_source(bench.link.ack, acks),
                                         _exception_source(bench.link.exceptions, exceptions)])["value"]
    assert popped["reports"] == [r.to_bytes(report_bytes(), "little") for r in reports] + [None]
    assert popped["acks"] == [acks[0].to_bytes(ack_bytes(), "little"), None]
    first, second, empty = popped["exceptions"]
    assert (first.record, first.data, first.truncated) == (exceptions[0][0], exceptions[0][1], False)
    # 128 bytes of hold RAM: 8 for the header, 120 of the packet.
    assert (second.record, second.data, second.truncated) == (exceptions[1][0], exceptions[1][1][:120], True)
    assert empty is None
    assert bench.frames == frames
    assert popped["counters"] == counter_values


def test_transmit_records_pushed_and_popped():
    """PUSH_RECORD hands one record to the named request stream, FULL (nothing pushed) when its queue has no
    room; a record of the wrong length or an unknown stream is refused. POP_RECORD takes one record of the
    named output stream, EMPTY when none waits."""
    bench = Bench(stalled=TxInput.CONTROL)
    rng = random.Random(4)
    # Two records for the stalled stream (its queue's depth), one for each other; two completions, one of each
    # refusal.
    records = {stream: [rng.randbytes(size) for _ in range(2 if stream is TxInput.CONTROL else 1)]
               for stream, size in tx_input_bytes().items()}
    outputs = {output: [rng.getrandbits(8 * size) for _ in range(2 if output is TxOutput.COMPLETION else 1)]
               for output, size in tx_output_bytes().items()}
    sources = {TxOutput.COMPLETION: bench.link.completions, TxOutput.TSN_REFUSED: bench.link.tsn_refused,
               TxOutput.READ_RESPONSE_REFUSED: bench.link.read_responses_refused,
               TxOutput.TRANSPORT_STOPPED: bench.link.transport_stopped}

    async def main(ctx, link):
        outcome = {"pushed": [], "popped": [], "statuses": []}
        for stream in TxInput:
            for record in records[stream]:
                outcome["pushed"].append(await link.push_record(stream, record))
        # The stalled stream's queue holds two: a third finds it full.
        outcome["pushed"].append(await link.push_record(TxInput.CONTROL,
                                                        rng.randbytes(tx_input_bytes()[TxInput.CONTROL])))
        for output in TxOutput:
            outcome["popped"] += [await link.pop_record(output) for _ in outputs[output]]
        outcome["popped"].append(await link.pop_record(TxOutput.COMPLETION))
        for request in ((Op.PUSH_RECORD, TxInput.TSN, b"\x00" * (tx_input_bytes()[TxInput.TSN] + 1)),
                        (Op.PUSH_RECORD, len(TxInput), b"\x00" * 5), (Op.POP_RECORD, len(TxOutput), b"")):
            outcome["statuses"].append((await link.call(request[0], request[1], 0, request[2])).status)
        return outcome

    outcome = bench.run(main, background=[_record_source(sources[output], values)
                                          for output, values in outputs.items()])["value"]
    # two for the stalled stream, one for each other: all taken; the third for the stalled one refused
    assert outcome["pushed"] == [True] * (len(TxInput) + 1) + [False]
    for stream in TxInput:
        if stream is not TxInput.CONTROL:
            assert bench.pushed[stream] == [int.from_bytes(r, "little") for r in records[stream]], stream
    expected_pops = []
    for output, size in tx_output_bytes().items():
        expected_pops += [value.to_bytes(size, "little") for value in outputs[output]]
    assert outcome["popped"] == expected_pops + [None]
    assert outcome["statuses"] == [Status.BAD_REQUEST] * 3


def _batch(records: list[bytes], limit: int, hold_bytes: int) -> list[bytes]:
    """The records a pop takes by abi's rule, written out here: each but the last padded to a multiple
    of 8 bytes, as many as fit in `limit` bytes and the hold RAM, one at least."""
    taken = []
    while records and (not taken or len(taken) * ((len(records[0]) + 7) // 8 * 8) + len(records[0])
                                    <= min(limit, hold_bytes)):
        taken.append(records.pop(0))
    return taken


def test_batched_pops_and_poll():
    """A pop takes every record waiting that fits in its `length` and the hold RAM, one at least; POLL flags
    the streams holding a record. With damaged responses, a retried pop answers the same records: each is
    popped exactly once."""
    hold_bytes = 128
    bench = Bench(hold_bytes=hold_bytes)
    rng = random.Random(5)
    reports = [rng.randbytes(report_bytes()) for _ in range(5)]
    acks = [rng.randbytes(ack_bytes()) for _ in range(7)]
    completions = [rng.randbytes(tx_output_bytes()[TxOutput.COMPLETION]) for _ in range(3)]
    refused = [rng.randbytes(tx_output_bytes()[TxOutput.READ_RESPONSE_REFUSED])]
    report_pops = (1000, 0, 111, 1000)          # hold RAM: 2; one; 56 + 55 bytes: 2; none left
    ack_pops = (31, 1000)                        # 8 x 3 + 7 bytes: 4; the 3 left
    completion_pops = (14, 100)

    async def main(ctx, link):
        await ctx.tick().repeat(10)
        outcome = {"polls": [await link.poll(0)]}
        outcome["reports"] = [await link.pop_reports(limit) for limit in report_pops]
        outcome["acks"] = [await link.pop_acks(limit) for limit in ack_pops]
        outcome["polls"].append(await link.poll())
        outcome["completions"] = [await link.pop_records(TxOutput.COMPLETION, limit) for limit in completion_pops]
        outcome["refused"] = await link.pop_records(TxOutput.READ_RESPONSE_REFUSED, 1000)
        outcome["polls"].append(await link.poll())
        outcome["bad"] = (await link.call(Op.POLL, 0, 0, b"\x00")).status
        return outcome

    sources = [_record_source(bench.link.report, [int.from_bytes(r, "little") for r in reports]),
               _record_source(bench.link.ack, [int.from_bytes(r, "little") for r in acks]),
               _record_source(bench.link.completions, [int.from_bytes(r, "little") for r in completions]),
               _record_source(bench.link.read_responses_refused, [int.from_bytes(r, "little") for r in refused])]
    faults = {position: "flip" for position in (40, 230, 420)}
    result = bench.run(main, background=sources, faults={"response_faults": faults})
    outcome = result["value"]
    assert result["link"].client.retried >= 2
    remaining = list(reports)
    assert outcome["reports"] == [_batch(remaining, limit, hold_bytes) for limit in report_pops]
    assert [len(batch) for batch in outcome["reports"]] == [2, 1, 2, 0]
    remaining = list(acks)
    assert outcome["acks"] == [_batch(remaining, limit, hold_bytes) for limit in ack_pops]
    assert [len(batch) for batch in outcome["acks"]] == [4, 3]
    remaining = list(completions)
    assert outcome["completions"] == [_batch(remaining, limit, hold_bytes) for limit in completion_pops]
    assert outcome["refused"] == refused
    # POLL's word: the register at its address (0: the register file's ID, hdl.bus.register_file).
    assert outcome["polls"] == [Polled(LinkQueue.REPORT | LinkQueue.ACK | LinkQueue.COMPLETION
                                       | LinkQueue.READ_RESPONSE_REFUSED, DEVICE_ID),
                                Polled(LinkQueue.COMPLETION | LinkQueue.READ_RESPONSE_REFUSED, DEVICE_ID),
                                Polled(LinkQueue(0), DEVICE_ID)]
    assert outcome["bad"] == Status.BAD_REQUEST


def test_a_poll_with_a_length_brings_the_reports_that_fit():
    """POLL with a `length` (abi.link.Op.POLL): after its 8 bytes of flags and word, the reports that fit in
    `length` and the hold RAM, padded as a pop pads them; with a `length` too short for one, none, and a POLL
    without reports waiting answers its 8 bytes. Its flags are those before the pop. With damaged responses a
    retried POLL answers the same reports: each is taken exactly once."""
    hold_bytes = 128
    bench = Bench(hold_bytes=hold_bytes)
    rng = random.Random(7)
    reports = [rng.randbytes(report_bytes()) for _ in range(5)]
    limits = (62, 63, 1000, 8 + 56 + 55, 1000)     # too short; one; the hold RAM's two; two; none left

    async def main(ctx, link):
        await ctx.tick().repeat(10)
        return [await link.poll(0, limit) for limit in limits]

    sources = [_record_source(bench.link.report, [int.from_bytes(r, "little") for r in reports])]
    result = bench.run(main, background=sources, faults={"response_faults": {position: "flip"
                                                                              for position in (30, 200)}})
    assert result["link"].client.retried >= 1
    remaining, expected = list(reports), []
    for limit in limits:
        room = min(limit, hold_bytes) - 8       # the word first, then whole reports (abi.link.pop_body_bytes)
        taken = []
        while remaining and len(taken) * 56 + report_bytes() <= room:
            taken.append(remaining.pop(0))
        expected.append(Polled(LinkQueue.REPORT if len(remaining) + len(taken) else LinkQueue(0), DEVICE_ID,
                               tuple(taken)))
    assert [len(polled.reports) for polled in expected] == [0, 1, 2, 2, 0]
    assert result["value"] == expected


def _exception_batch(packets: list[bytes], limit: int, hold_bytes: int) -> list[tuple[bytes, bool]]:
    """The packets a POP_EXCEPTION takes by abi's rule, written out here: the first whatever its length
    (cut at the hold RAM's end less its 8-byte header), then each next that fits whole, header included, in
    `limit` and the hold RAM, every packet but the last padded to a multiple of 8 bytes."""
    taken, used = [], 0
    while packets:
        end = used + 8 + len(packets[0])
        if taken and end > min(limit, hold_bytes):
            break
        packet = packets.pop(0)
        kept = packet[:hold_bytes - used - 8]
        taken.append((kept, len(kept) < len(packet)))
        used = end + (-end % 8)
    return taken


def test_batched_exception_pops():
    """POP_EXCEPTION takes the packets that wait and fit whole (by the length in their record) in its length
    and the hold RAM, one at least, the first cut at the hold RAM's end if it must be."""
    hold_bytes = 256
    bench = Bench(hold_bytes=hold_bytes)
    rng = random.Random(6)
    sizes = (30, 20, 100, 150, 300, 10, 10, 30)
    limits = (1000, 0, 1000, 60, 60)          # A B C | D | E (cut) | F G | H
    packets = [rng.randbytes(size) for size in sizes]
    layout = exception_record_layout()
    records = [layout.pack({"source": 1, "reason": 3, "association": 1, "length": len(packet)})
               for packet in packets]

    async def main(ctx, link):
        await ctx.tick().repeat(10)
        return [await link.pop_exceptions(limit) for limit in limits] + [await link.pop_exceptions(1000)]

    popped = bench.run(main, background=[_exception_source(bench.link.exceptions,
                                                           list(zip(records, packets)))])["value"]
    remaining = list(packets)
    expected = [_exception_batch(remaining, limit, hold_bytes) for limit in limits] + [[]]
    assert [[(p.data, p.truncated) for p in batch] for batch in popped] == expected
    assert [len(batch) for batch in popped] == [3, 1, 1, 2, 1, 0]
    assert popped[2][0].truncated and len(popped[2][0].data) == hold_bytes - 8
    assert [p.record for batch in popped for p in batch] == records


def _held_table(table, hold: dict, taken: list[int]):
    """Takes each row of ``table`` ``hold["cycles"]`` cycles after it is offered (never while that is None)."""
    async def testbench(ctx):
        while True:
            if not ctx.get(table.valid):
                await ctx.posedge(table.valid)
            for _ in range(hold["cycles"] or 0):
                await ctx.tick()
            while hold["cycles"] is None:
                await ctx.tick()
            ctx.set(table.ready, 1)
            _, _, payload = await ctx.tick().sample(table.payload.as_value())
            ctx.set(table.ready, 0)
            taken.append(payload)
    return testbench


def test_a_commit_written_with_wait_answers_once_the_table_took_the_row():
    """REG_WRITE_WAIT (abi.link): a row taken 150 clocks after its COMMIT is answered OK (the link read COMMIT
    until it read 0), so write_table costs one request; a row still held after WAIT_READS reads is answered
    PENDING, written once all the same, and the host's REG_READs see it taken once the table takes it. A
    register that keeps its nonzero word answers PENDING."""
    bench = Bench()
    registers = bench.registers
    window = registers.map.tables["region"]
    hold, taken = {"cycles": 150}, []
    local_ip = register_map().config_offset("local_ip")
    row = {"index": 2, "entry": {"valid": 1, "key": 0x05, "length": 64}}

    async def main(ctx, link):
        requests = []
        link.client.observe = lambda exchanged: requests.append(exchanged.op)
        await link.write_table(window, row)
        first = list(requests)
        hold["cycles"] = None
        held = await link.call(Op.REG_WRITE_WAIT, window.commit, 0, (1).to_bytes(4, "little"))
        still = await link.read_register(window.commit)
        hold["cycles"] = 0
        for _ in range(20):
            if not await link.read_register(window.commit):
                break
        kept = await link.call(Op.REG_WRITE_WAIT, local_ip, 0, (0x0A000002).to_bytes(4, "little"))
        return first, held.status, still, kept.status, await link.read_register(local_ip)

    result = bench.run(main, background=[_held_table(registers.table_region, hold, taken)])
    first, held, still, kept, ip = result["value"]
    assert first.count(Op.REG_WRITE_WAIT) == 1 and Op.REG_READ not in first
    assert (held, still) == (Status.PENDING, 1)
    assert taken == [window.layout.pack(row)] * 2   # the first row, and the held one once
    assert (kept, ip) == (Status.PENDING, 0x0A000002)


@pytest.mark.parametrize("direction", [pytest.param("request", marks=pytest.mark.slow), "response"])
def test_damaged_bytes_are_recovered_and_writes_happen_once(direction):
    """Dropped and flipped bytes in either direction: every operation completes, by retry, and each table
    write, memory write and raw frame takes effect once."""
    bench = Bench()
    window = register_map().tables["association"]
    rng = random.Random(3)
    payload = rng.randbytes(24)
    frame = rng.randbytes(40)
    tsn_record = rng.randbytes(tx_input_bytes()[TxInput.TSN])
    # Damage spread over the run after the ping, dropped or flipped: each request is hit at most once.
    spacing = {"request": range(30, 400, 67), "response": range(20, 200, 29)}[direction]
    faults = {position: ("drop" if position % 2 else "flip") for position in spacing}

    async def main(ctx, link):
        await link.write_table(window, {"index": 1, "valid": 1, "ddp": 1, "local_port": 5002, "peer_port": 5001,
                                        "peer_ip": 0x0A000001, "tag": 0x5E6F7080})
        await link.write_memory(8, payload)
        await link.send_frame(frame)
        assert await link.push_record(TxInput.TSN, tsn_record)
        return await link.read_memory(8, len(payload))

    result = bench.run(main, faults={f"{direction}_faults": faults})
    transport, link = result["transport"], result["link"]
    damaged = transport.requests_damaged if direction == "request" else transport.responses_damaged
    assert damaged >= 4 and link.client.retried >= 4
    assert result["value"] == payload
    expected = window.layout.pack({"index": 1, "valid": 1, "ddp": 1, "local_port": 5002, "peer_port": 5001,
                                   "peer_ip": 0x0A000001, "tag": 0x5E6F7080})
    assert bench.table_writes == [expected]
    assert bench.frames == [frame]
    assert bench.pushed[TxInput.TSN] == [int.from_bytes(tsn_record, "little")]


def test_no_board_times_out():
    """A board that never answers: the request is tried 1 + retries times, then LinkTimeout."""
    m = Module()
    link = m.submodules.link = ControlLink(divisor=BIT_CLOCKS, memory_bytes=MEMORY_BYTES, register_bits=12)
    uart = SimUart(link.uart_rx, link.uart_tx, BIT_CLOCKS)
    sim = Simulator(m)
    sim.add_clock(CLOCK_PERIOD)
    sim.add_testbench(uart.driver(), background=True)
    outcome = {}

    async def testbench(ctx):  # the monitor is not running: nothing comes back
        client = AsyncLink(SimTransport(ctx, uart), baud=BAUD, latency=LATENCY, retries=2)
        try:
            await client.ping()
        except LinkTimeout:
            outcome["writes"] = client.transport.writes
    sim.add_testbench(testbench)
    sim.run()
    assert outcome["writes"] == 3


def _with_zero_runs(rng: random.Random, size: int, *, ending_in_zeros: bool = False) -> bytes:
    """Random bytes of ``size`` with zero runs of random lengths in them (a record's unused fields); with
    ``ending_in_zeros``, its last three bytes zeros after a nonzero one."""
    data = bytearray()
    while len(data) < size:
        data += bytes(rng.randrange(1, 12)) if rng.random() < 0.5 else rng.randbytes(rng.randrange(1, 6))
    data = data[:size]
    if ending_in_zeros:
        data[size - 4:] = b"\x5a" + bytes(3)
    return bytes(data)


def _padded(records: list[bytes]) -> bytes:
    """A pop's body: each record but the last padded to a multiple of 8 bytes (abi.link.pop_body_bytes)."""
    return b"".join(record + bytes(-len(record) % 8) for record in records[:-1]) + records[-1]


def test_record_bodies_go_zero_run_coded_and_pushed_records_are_decoded():
    """Link version 7 (abi.link.zero_run_encode): a POLL's and a pop's body are on the wire exactly as
    abi codes them, zero runs of every length among them (within a record, a record ending in zeros, runs of
    whole zero records past 255 bytes); a retry of a coded pop (same seq and op) is answered with the same
    bytes and pops nothing more. PUSH_RECORD's coded data is decoded into the record pushed; data that does not
    decode to exactly one record is refused (BAD_REQUEST), nothing pushed."""
    bench = Bench()
    rng = random.Random(8)
    size = report_bytes()
    reports = [_with_zero_runs(rng, size) for _ in range(3)] + [_with_zero_runs(rng, size, ending_in_zeros=True)]
    reports += [bytes(size)] * 10 + [_with_zero_runs(rng, size), _with_zero_runs(rng, size, ending_in_zeros=True)]
    acks = [_with_zero_runs(rng, ack_bytes()) for _ in range(3)] + [bytes(ack_bytes())]
    completions = [bytes(tx_output_bytes()[TxOutput.COMPLETION]), _with_zero_runs(rng, 6, ending_in_zeros=True)]
    work_bytes = tx_input_bytes()[TxInput.WORK]
    work = [_with_zero_runs(rng, work_bytes, ending_in_zeros=True), bytes(work_bytes), _with_zero_runs(rng, work_bytes)]
    ending = work[0]
    bad_pushes = [zero_run_encode(ending)[:-1],                  # the last run without its count
                  zero_run_encode(ending[:-1]),                  # a byte short
                  zero_run_encode(ending + b"\x01"),             # a byte over
                  zero_run_encode(ending[:10]) + b"\x00\x00" + zero_run_encode(ending[10:]),   # a count of 0
                  bytes([0, work_bytes + 1]),                    # a run past the record
                  b"\x05" * work_bytes + b"\x00\x01"]
    polled_length = 8 + 2 * 56 + size                             # the word and three reports

    async def main(ctx, link):
        await ctx.tick().repeat(10)
        outcome = {"poll": await link.call(Op.POLL, 0, polled_length)}
        outcome["pop"] = await link.call(Op.POP_REPORT, 0, 1000)
        link.client._seq = (link.client._seq - 1) % 256       # the same seq again: a retry, as after a lost answer
        outcome["retry"] = await link.call(Op.POP_REPORT, 0, 1000)
        outcome["after"] = await link.pop_reports(1000)
        outcome["acks"] = await link.pop_acks(1000)
        outcome["completions"] = await link.pop_records(TxOutput.COMPLETION, 1000)
        outcome["pushed"] = [await link.push_record(TxInput.WORK, record) for record in work]
        outcome["bad"] = [(await link.call(Op.PUSH_RECORD, TxInput.WORK, 0, data)).status for data in bad_pushes]
        await ctx.tick().repeat(10)
        return outcome

    sources = [_record_source(bench.link.report, [int.from_bytes(r, "little") for r in reports]),
               _record_source(bench.link.ack, [int.from_bytes(r, "little") for r in acks]),
               _record_source(bench.link.completions, [int.from_bytes(r, "little") for r in completions])]
    outcome = bench.run(main, background=sources)["value"]
    flags = LinkQueue.REPORT | LinkQueue.ACK | LinkQueue.COMPLETION
    poll, pop, retry = outcome["poll"], outcome["pop"], outcome["retry"]
    assert (poll.status, poll.body) == (Status.OK, zero_run_encode(struct.pack("<II", flags, DEVICE_ID)
                                                                   + _padded(reports[:3])))
    assert (pop.status, pop.body) == (Status.OK, zero_run_encode(_padded(reports[3:])))
    # A run of the ten zero reports and their padding: two full counts and more; the body ends in a run.
    assert bytes(560) in _padded(reports[3:]) and b"\x00\xff\x00\xff" in pop.body and pop.body.endswith(b"\x00\x03")
    assert retry == pop and outcome["after"] == []
    assert outcome["acks"] == acks and outcome["completions"] == completions
    assert outcome["pushed"] == [True] * len(work)
    assert outcome["bad"] == [Status.BAD_REQUEST] * len(bad_pushes)
    assert bench.pushed[TxInput.WORK] == [int.from_bytes(record, "little") for record in work]
