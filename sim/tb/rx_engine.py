"""cocotb tests of ``hdl.rx.engine.RxEngine`` against the golden model (run by tests/sim/test_rx_engine_cocotb.py).

Each test configures the engine through its AXI4-Lite register map, sends
frames on ``s_axis`` and compares everything the engine did (placed bytes
over the whole RAM, report records, ack records, exception packets,
counters) with ``model.engine.rx.ReceiveEngineModel`` fed the same frames
and given the same host commands. Tests share a simulation: each starts
with a reset and a configuration that takes back every posted buffer.
Parameters (:func:`sim.runner.test_parameters`): ``width_bytes``, ``seed``,
``messages``, ``max_payload``, ``backpressure``, ``part`` (one part of the
malformed catalogue; every part in turn without it), ``buffer_bytes``, and the engine's build
parameters as :class:`~sim.traffic.rx.EngineShape` names them (``associations``, ``stream_ids``,
``regions``, ``buffers_per_queue``, ``key_bits``; by default the shape's own), and ``read_responder``
(1: the engine was built with its read responder, and so is the model).
"""

from __future__ import annotations

import random
from dataclasses import replace

import cocotb
from cocotb.triggers import ClockCycles

from abi.register_file import PARAMS_OFFSET
from abi.rx import RX_PARAMS, RX_TABLES, register_map
from model.ddp.memory import TO_LIMIT, Access, SparseMemory
from model.ddp.segment import UntaggedHeader
from model.engine.config import ReceiveConfig, RegionEntry
from model.engine.rx import ReceiveEngineModel
from model.net.pcap import read_capture
from model.rdmap.messages import Opcode, ReadRequest
from sim.runner import test_parameters
from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG
from sim.tb.rx_engine_tb import CANARY, RxEngineTB
from sim.traffic.rx import (
    Catalogue,
    EngineShape,
    disorder,
    ValidTraffic,
    case_frames,
    catalogue_config,
    catalogue_parts,
    random_config,
)

SHAPE = EngineShape(**{name: int(value) for name, value in test_parameters().items()
                        if name in EngineShape.__dataclass_fields__})
MEMORY_BYTES = 1 << 22


async def _start(dut) -> tuple[RxEngineTB, dict]:
    parameters = test_parameters()
    tb = RxEngineTB(dut, int(parameters["width_bytes"]),
                    register_map(SHAPE.associations, SHAPE.stream_ids, SHAPE.regions, SHAPE.key_bits), SHAPE,
                    memory_bytes=MEMORY_BYTES, seed=int(parameters.get("seed", 1)),
                    read_responder=bool(int(parameters.get("read_responder", 0))))
    await tb.reset()
    # The PARAMS words name the tables the engine was built with (abi.rx.RX_PARAMS, RX_TABLES).
    params = RX_PARAMS.unpack(await tb.read_register(PARAMS_OFFSET))
    regions = RX_TABLES.unpack(await tb.read_register(PARAMS_OFFSET + 4))["regions"]
    assert (params, regions) == ({"width_bytes": int(parameters["width_bytes"]), "associations": SHAPE.associations,
                                  "stream_ids_log2": SHAPE.stream_ids.bit_length() - 1,
                                  "buffers_log2": SHAPE.buffers_per_queue.bit_length() - 1,
                                  "key_bits": SHAPE.key_bits}, SHAPE.regions), (params, regions)
    return tb, parameters


async def _run_and_compare(tb: RxEngineTB, config: ReceiveConfig, frames: list[bytes],
                           gaps: list[int] | None = None) -> None:
    run = await _Run.configure(tb, config)
    await run.send(frames, gaps)
    await run.compare()


class _Run:
    """One configuration on the engine and on the model, phase by phase: host commands given to both,
    frames sent and drained, then everything the engine did compared with the model."""

    def __init__(self, tb: RxEngineTB, config: ReceiveConfig) -> None:
        self.tb, self.config = tb, config
        self.model = ReceiveEngineModel(config, SparseMemory(CANARY), read_responder=tb.read_responder)

    @classmethod
    async def configure(cls, tb: RxEngineTB, config: ReceiveConfig, **options) -> _Run:
        await tb.configure(config, **options)
        return cls(tb, config)

    async def send(self, frames: list[bytes], gaps: list[int] | None = None) -> None:
        await self.tb.send_frames(frames, gaps)
        await self.tb.drain()
        for frame in frames:
            self.model.receive(frame, 0.0)

    async def rearm(self, association: int, stream_id: int, sender) -> None:
        """Rewrite the stream's row on the engine and the model (a new session: the sender's DDP-SSNs
        start again at the row's first_ssn)."""
        entry = next(s for s in self.config.streams if (s.association, s.stream_id) == (association, stream_id))
        await self.tb.arm_stream(association, stream_id, entry.pd, entry.first_ssn)
        self.model.rearm_stream(association, stream_id)
        sender.restart(association, stream_id)

    async def compare(self) -> None:
        problems = await self.tb.compare_with_model(self.model, self.model.next_events())
        assert not problems, f"{len(problems)} mismatches with the model:\n" + "\n".join(problems)


@cocotb.test()
async def sample_capture(dut) -> None:
    """The demo capture (every RDMAP message, session control, SCTP over UDP) with its configuration: with
    per-message reports (the reset value), then with a record per segment (``segment_reports``)."""
    tb, _ = await _start(dut)
    config = ReceiveConfig.from_json(SAMPLE_CONFIG.read_text())
    frames = [record.data for record in read_capture(SAMPLE_CAPTURE.read_bytes())]
    for segment_reports in (False, True):
        if segment_reports:
            await tb.restart()
        await _run_and_compare(tb, replace(config, segment_reports=segment_reports), frames)


@cocotb.test()
async def random_valid_traffic(dut) -> None:
    """Random valid traffic (every opcode, multi-segment, bundled, back to back), with random back-pressure
    on the RAM and both output streams when the ``backpressure`` parameter is non-zero; with the profile
    ``disordered``, as a link that reorders and duplicates frames delivers it, and a report record per
    segment (``segment_reports``; the other profiles report per message)."""
    tb, parameters = await _start(dut)
    rng = random.Random(int(parameters.get("seed", 1)))
    max_payload = int(parameters["max_payload"])
    config = random_config(rng, SHAPE, MEMORY_BYTES, max_payload)
    frames = ValidTraffic(rng, config, max_payload=max_payload).frames(int(parameters["messages"]))
    if parameters.get("profile") == "disordered":
        frames = disorder(frames, rng)
        config = replace(config, segment_reports=True)
    back_to_back = parameters.get("profile") == "small"
    gaps = None if back_to_back else [0 if rng.random() < 0.7 else rng.randint(1, 20) for _ in frames]
    tb.set_backpressure(float(parameters["backpressure"]))
    await _run_and_compare(tb, config, frames, gaps)


@cocotb.test()
async def read_requests(dut) -> None:
    """For an engine with its read responder: RDMA Read Requests (RFC 5040 4.4) among Writes and Sends, with
    no QN 1 buffer posted, reordered and duplicated; accepted ones (several a packet, size 0, a region bound
    to its stream), and on streams of their own each refusal of the Data Source check (invalid STag, PD,
    stream binding, no REMOTE_READ, bounds, 64-bit wrap; RFC 5040 7.2, RFC 5041 7.1, 8.2) and a request
    that is not one whole 28-byte message, each followed by a request the stream's error drops."""
    tb, parameters = await _start(dut)
    assert tb.read_responder, "the read_requests test needs an engine built with read_responder"
    rng = random.Random(int(parameters.get("seed", 1)))
    config, frames = _read_request_traffic(rng)
    frames = disorder(frames, rng)
    tb.set_backpressure(float(parameters.get("backpressure", 0.3)))
    await _run_and_compare(tb, config, frames)


#: A region with no REMOTE_READ right (table row, key), beside the catalogue's.
_NO_READ = (6, 0x66)


def _read_request_traffic(rng: random.Random) -> tuple[ReceiveConfig, list[bytes]]:
    base = catalogue_config(SHAPE)
    no_read = RegionEntry(SHAPE.stag(*_NO_READ), 1, 0, 4096, Access.REMOTE_WRITE | Access.LOCAL_WRITE, 0x2_A000)
    config = replace(base, regions=base.regions + (no_read,),
                     buffers=tuple(b for b in base.buffers if b.qn != 1))   # the responder needs none
    c = Catalogue(config, SHAPE)
    msns: dict[tuple[int, int], int] = {}

    def request(a: int, s: int, stag: int, to: int, size: int, *, last: bool = True, cut: int = 28) -> bytes:
        msn = msns.get((a, s), 1)
        msns[(a, s)] = msn + 1
        header = UntaggedHeader(last=last, rsvd_ulp=(0x40 | Opcode.RDMA_READ_REQUEST) << 32, qn=1, msn=msn, mo=0)
        sink = (rng.randrange(1 << 32), rng.randrange(1 << 64))
        return header.encode() + ReadRequest(*sink, size, stag, to).encode()[:cut]

    frames = []
    good, bound = (0, 0), (SHAPE.associations - 1, SHAPE.stream_ids - 1)
    for i in range(12):
        to = 0x1000 + rng.randrange(4096)
        size = rng.randrange(0x1000 + 4096 - to + 1)
        frames.append(c.segment_frame(*good, c.write(to=0x1000 + rng.randrange(3000))))
        frames.append(c.segment_frame(*good, request(*good, c.stag_rw, to, size)))
        if i < 2:   # the catalogue posts two QN 0 buffers a stream
            frames.append(c.segment_frame(*good, c.send(*good)))
        # Several requests in one packet, one of size 0 (RFC 5041 5.2: not checked).
        chunks = [c.sender.segment(*good, request(*good, c.stag_read_only, rng.randrange(4000), rng.randrange(96))),
                  c.sender.segment(*good, request(*good, c.stag_unregistered, 0, 0)),
                  c.sender.segment(*good, request(*good, c.stag_rw, 0x1000, 4096))]
        frames.append(c.frame(good[0], chunks))
        frames.append(c.segment_frame(*bound, request(*bound, c.stag_bound, rng.randrange(2048), 2048)))
    refusals = [
        c.stag_unregistered, c.stag_other_pd, c.stag_bound, SHAPE.stag(*_NO_READ),
    ]
    streams = [(a, s) for a in range(SHAPE.associations) for s in range(SHAPE.stream_ids)
               if (a, s) not in (good, bound)]
    cases = [(stag, 0, 64) for stag in refusals] + [
        (c.stag_rw, 0x1000 + 4000, 97),                 # past the end
        (c.stag_top, TO_LIMIT - 16, 16),                 # the 64-bit sum wraps
    ]
    for (a, s), (stag, to, size) in zip(streams, cases):
        frames.append(c.segment_frame(a, s, request(a, s, stag, to, size)))
        frames.append(c.segment_frame(a, s, request(a, s, c.stag_rw, 0x1000, 8)))   # dropped: the stream failed
    # Not one whole 28-byte message (RFC 5040 4.4), then one cut short: the good stream's last.
    frames.append(c.segment_frame(*good, request(*good, c.stag_rw, 0x1000, 8, last=False)))
    frames.append(c.segment_frame(*good, request(*good, c.stag_rw, 0x1000, 8, cut=13)))
    return config, frames


@cocotb.test()
async def malformed_catalogue(dut) -> None:
    """The malformed catalogue, a part per configuration (one part if ``part`` is given); every latching
    error on a DDP stream of its own (RFC 5041 7.1)."""
    tb, parameters = await _start(dut)
    config = catalogue_config(SHAPE)
    parts = catalogue_parts(SHAPE)
    numbers = [int(parameters["part"])] if "part" in parameters else range(len(parts))
    for position, number in enumerate(numbers):
        if position:
            await tb.restart()
        catalogue = Catalogue(config, SHAPE)
        frames = [frame for case, association, stream_id in parts[number]
                  for frame in case_frames(catalogue, case, association, stream_id)]
        tb.set_backpressure(0.2)
        await _run_and_compare(tb, config, frames)


@cocotb.test()
async def revocation_and_rearm(dut) -> None:
    """The host takes back a posted buffer (a segment for it: MSN range, RFC 5041 7.1 item 5, the stream
    latches; other streams go on), re-arms the stream, resets a queue (its MSNs start at 1 again,
    RFC 5041 4.3) and posts a new buffer, which is placed into."""
    tb, _ = await _start(dut)
    config = catalogue_config(SHAPE)
    c = Catalogue(config, SHAPE)
    run = await _Run.configure(tb, config)
    await tb.revoke_buffer(0, 1, 0, 2)
    assert run.model.revoke_buffer(0, 1, 0, 2)
    await tb.revoke_buffer(0, 2, 0, 7)                       # never posted: nothing happens
    assert not run.model.revoke_buffer(0, 2, 0, 7)
    await run.send([c.segment_frame(0, 1, c.send(0, 1, msn=1)), c.segment_frame(0, 1, c.send(0, 1, msn=2)),
                    c.probe(0, 1), c.segment_frame(0, 2, c.send(0, 2, msn=1)), c.probe(0, 2)])
    await run.rearm(0, 1, c.sender)
    await tb.revoke_queue(SHAPE.stream_row(0, 1), 0)
    run.model.reset_queue(0, 1, 0)
    await tb.post_buffer(0, 1, 0, 0x3_8000, 128)
    assert run.model.post_buffer(0, 1, 0, 0x3_8000, 128) == 1
    await run.send([c.segment_frame(0, 1, c.send(0, 1, msn=1, mo=8, length=100)), c.probe(0, 1)])
    await run.compare()


@cocotb.test()
async def bad_write_response(dut) -> None:
    """Memory answers SLVERR for part of a region: the segment's report says so (ERROR, DDP Local
    Catastrophic, dma_error), its stream drops what follows until re-armed, another stream is unharmed."""
    tb, _ = await _start(dut)
    config = catalogue_config(SHAPE)
    c = Catalogue(config, SHAPE)
    run = await _Run.configure(tb, config)
    region = next(r for r in config.regions if r.stag == c.stag_rw)
    refused = region.host_address + 0x100
    tb.refuse_writes(refused, 0x100)
    run.model.refuse_writes(refused, 0x100)
    to = lambda offset: region.base_to + offset  # noqa: E731
    # Straddling the refused range: the bytes before it are written, the segment fails.
    await run.send([c.segment_frame(1, 0, c.write(to=to(0xC0), length=128)),
                    c.segment_frame(1, 1, c.write(to=to(0x800), length=64))])
    # The failure is latched once its response is back: a later segment of the stream is dropped.
    await run.send([c.segment_frame(1, 0, c.write(to=to(0x900), length=64)),
                    c.segment_frame(1, 1, c.write(to=to(0xA00), length=64))])
    await run.rearm(1, 0, c.sender)
    await run.send([c.segment_frame(1, 0, c.write(to=to(0xB00), length=64))])
    await run.compare()


@cocotb.test()
async def frame_buffer_overflow(dut) -> None:
    """With drop_when_full and every output held, the frames that fit the receive buffer wait in it and
    every later frame is dropped whole and counted; released, the engine places the ones kept, and
    frames sent afterwards are placed too. Which frames fit follows from the buffer's size alone: no
    frame leaves the buffer before it is read out whole, and the outputs hold far less than a frame."""
    tb, parameters = await _start(dut)
    width = int(parameters["width_bytes"])
    buffer_beats = int(parameters["buffer_bytes"]) // width - 1   # the buffer keeps one beat in reserve
    config = catalogue_config(SHAPE)
    c = Catalogue(config, SHAPE)
    rng = random.Random(int(parameters.get("seed", 1)))

    def frame(index: int) -> bytes:
        # W / 8 segments of 1400 bytes: about 185 beats at every W, more than the outputs hold.
        association = index % SHAPE.associations
        chunks = [c.sender.segment(association, k % SHAPE.stream_ids,
                                   c.write(to=0x1000 + rng.randrange(0, 4096 - 1400), length=1400))
                  for k in range(max(1, width // 8))]
        return c.frame(association, chunks)

    first = frame(0)
    beats = -(-len(first) // width)
    fitting = buffer_beats // beats
    assert buffer_beats - fitting * beats >= 8 and (fitting + 1) * beats - buffer_beats >= 8, \
        "the frames' size leaves no margin around the buffer's size"
    held = [first] + [frame(i) for i in range(1, fitting + 4)]
    assert all(-(-len(f) // width) == beats for f in held)
    run = await _Run.configure(tb, config, drop_when_full=True)
    tb.hold_outputs(True)
    await tb.send_frames(held)
    await tb.source.wait()
    await ClockCycles(dut.clk, 200)
    tb.hold_outputs(False)
    await tb.drain()
    for index, held_frame in enumerate(held):
        (run.model.receive if index < fitting else run.model.overflow)(held_frame, 0.0)
    await run.send([frame(i) for i in range(fitting + 4, fitting + 7)])
    await run.compare()
