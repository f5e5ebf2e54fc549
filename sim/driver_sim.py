"""The driver's `sim` backend: the gateware RNIC under Verilator, driven by the host driver.

`SimFabric` is the `engine` backend (`driver.backends.engine`) with the RTL
in it: device 0 (host A, 10.0.0.1) is an `EngineRnic` whose data plane is the
RNIC top level `hdl.rnic.Rnic` under Verilator, both ways, through the
reusable testbench `sim.tb.rnic_tb.RnicTB`:

* receive (`RtlEngine`): the receive engine's tables are written over
  AXI4-Lite (`write_table`, `arm_stream`, `post_buffer`, `revoke_queue`),
  frames go in on `s_axis`, its exception, report and ack streams come back as
  records;
* transmit (`sim.tb.rnic_transmit.RtlTransmit`): the transmit engine's rows
  over AXI4-Lite, the host's work requests, Read Responses, session-control
  messages and LIMIT/RESEND/ACK requests on their streams; every DATA chunk
  host A sends is a frame from `m_axis`, every Write and Send completes on a
  record from `m_axis_completion`;
* the host memory is the testbench's AXI RAM, which both engines reach over
  `m_axi` and the host's software reads and writes (`RamMemory`); its top
  quarter is host A's bounce area for gather lists, and the driver's buffers
  stay below it.

Device 1 (host B) is the `engine` backend's host, an `EngineRnic` over both
engines' golden models. One simulation builds one top,
`sim.tb.rnic_tb.rnic_driver_top`: the RNIC top with the transport unit, its
timer ticked by the fabric (`external_tick`).

SACKs and the transport, as on `engine`: the receive engine SACKs the peer's
DATA (`engine_sacks`, the default; RFC 4960 6.2) and, with
`engine_transport`, the transmit engine's transport unit takes the peer's
SACKs and retransmits (6.1-6.3, 7.2, 8.1). The gateware's timer is not its
own clock here: before the RTL is given anything at the fabric's time t, its
timer is ticked to t's tick (`model.engine.sack.ticks_at`), one tick at a
time, each taken before the next, so its delayed SACKs and T3-rtx expire in
the ticks its models count; the fabric's clock stops at the receive model's
delayed-SACK deadline as at the hosts' timers.

Every frame the RTL takes is also given to a shadow `ReceiveEngineModel`
with the same table writes, and the records are compared (the testbench's
comparisons); every request the RTL is given also goes to a shadow
`TransmitEngineModel`, and every frame, completion and refusal is compared.
A difference fails the run, as does a write outside the model's writes.

Scheduling (the asyncio/cocotb question).  Under `soft` and `engine` the
user's coroutine runs on an asyncio loop over simulated time.  Under `sim`
it runs on cocotb's scheduler: the cocotb test awaits `main(fabric)`
itself, and every wait of the driver (`CQ.wait`, `CMID.get_cm_event`) is
`SimFabric.wait_until`, which drives the fabric while the predicate does not
hold: the RTL host's table writes, frames and transmit requests go through
the engines (awaiting the simulator's clock: a frame's records come back, and
a request's frames leave, before anything else happens), what is due is sent,
then the link's and the protocol's clock (simulated seconds, separate from the
engine's nanoseconds) jumps to the next arrival or timer.  So the same
program runs unchanged, as long as it awaits only the driver's calls (no
asyncio primitives under cocotb).  `run_program(main)` runs `main(fabric)`
that way in a cocotb test (`sim.tb.driver_program`); `main` must be
importable (a module-level function of a module, or of a script file).
"""

from __future__ import annotations

import dataclasses
import inspect
import random
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

from cocotb.triggers import Lock

from driver.backends.base import FabricBackend
from driver.backends.engine import ENGINE_RESOURCES, STREAM_IDS, EngineDevice
from driver.backends.soft import SoftDevice
from driver.errors import BackendUnavailable, InvalidArgument, SimulationStalled, WaitTimeout
from driver.records import receive_row_writes, segment_verdict
from abi.rx import AckDisposition
from model.ddp.memory import SparseMemory
from model.engine.sack import SackRecord
from model.engine.tx import ticks_at
from model.rnic.engine_host import EngineRnic, TransmitEngine
from model.rnic.host import RnicConfig, SoftRnic
from model.rnic.link import Link, LinkConfig, Side
from model.rnic.offload import Ack, EngineCommand, EngineOutput, FrameIn, ModelEngine
from model.rnic.pair import IPS, MACS, HostPair, host_config
from model.sctp.packet import SackChunk
from sim.runner import SimulationResult, default_build_root, run_cocotb
from sim.tb.rnic_tb import rnic_driver_top
from sim.tb.rx_engine_tb import CANARY, RxEngineTB, _compare_acks, _compare_chunk_errors, _compare_segments
from sim.traffic.rx import EngineShape

T = TypeVar("T")

WIDTH_BYTES = 8
"""The default width; the top's cocotb tests build 8 and 64 (tests/sim/test_tx_cocotb.py), and those builds
are reused."""
SHAPE = EngineShape()
MEMORY_BYTES = 1 << 22
RTL_SIDE = Side.A


def bounce_area(memory_bytes: int) -> tuple[int, int]:
    """(base, bytes) of host A's bounce area: the top quarter of its memory."""
    return memory_bytes - memory_bytes // 4, memory_bytes // 4


class RamMemory:
    """The testbench's AXI RAM as the host's memory (the `SparseMemory` calls the host makes)."""

    def __init__(self, tb: RxEngineTB) -> None:
        self._ram = tb.ram

    def read(self, address: int, length: int) -> bytes:
        return bytes(self._ram.read(address, length))

    def write(self, address: int, data: bytes) -> None:
        self._ram.write(address, bytes(data))


class EngineMismatch(AssertionError):
    """The RTL engine's records differ from its golden model's for the same frame and tables."""


class AsyncEngine(Protocol):
    """A receive engine that takes time to run a command (the RTL under the simulator)."""

    memory: RamMemory | SparseMemory
    sacks: Callable[[SackRecord], None] | None

    async def execute(self, command: EngineCommand) -> EngineOutput | None: ...
    def next_timeout(self) -> float | None: ...
    async def catch_up(self, now: float) -> None: ...


class RtlEngine:
    """`RxEngineTB` behind the host's command interface, checked against a shadow golden model.

    The acknowledgement unit's SACKs (RFC 4960 6.2) go from the RTL's receive engine to its transmit engine
    by themselves; the model's (after a frame, a `SackFlush`, or its delayed-SACK timer in `catch_up`) go to
    `sacks`, the transmit side's `post_sack`, so that the RTL's SACK frames are expected there. So do the
    peer's SACK chunks of a SACK row with ``peer_sacks`` (6.2.1): the RTL's reach its transport unit by
    themselves, the model's go to `peer_sacks`, the transmit side's `take_peer_sack`, before the frame goes
    in, so that what the unit sends for them is expected."""

    def __init__(self, tb: RxEngineTB, local_mac: bytes = MACS[RTL_SIDE], local_ip: str = IPS[RTL_SIDE]) -> None:
        self.tb = tb
        self.memory = RamMemory(tb)
        self.shadow = ModelEngine(local_mac, local_ip, SparseMemory(CANARY))
        self.sacks: Callable[[SackRecord], None] | None = None
        self.peer_sacks: Callable[[int, SackChunk, int], None] | None = None

    def next_timeout(self) -> float | None:
        """When the acknowledgement unit's next delayed SACK is due (the model's timer)."""
        return self.shadow.next_timeout()

    async def catch_up(self, now: float) -> None:
        """The timer to `now`: the model's delayed SACKs due by then are expected, and a top whose timer the
        testbench ticks (`external_tick`) is ticked to `now`'s tick (`model.engine.tx.ticks_at`)."""
        self._pass_sacks(self.shadow.handle_timeout(now))
        if getattr(self.tb, "external_tick", False):
            await self.tb.tick_to(ticks_at(now))

    def _pass_sacks(self, records: list[SackRecord]) -> None:
        if records and self.sacks is None:
            raise EngineMismatch(f"the engine SACKs ({records[0]}) and nothing takes its SACKs")
        for record in records:
            self.sacks(record)

    def time(self) -> tuple[int, float]:
        """(cycles, nanoseconds) of the simulator's clock so far."""
        from cocotb.utils import get_sim_time

        return self.tb.cycle, get_sim_time("ns")

    async def execute(self, command: EngineCommand) -> EngineOutput | None:
        tb = self.tb
        if isinstance(command, FrameIn):
            return await self._frame(command)
        self.shadow.execute(command)
        self._pass_sacks(self.shadow.model.next_sacks())     # a SackFlush's
        for table, fields in receive_row_writes(command, tb.shape.stream_ids, tb.shape.key_bits):
            await tb.write_table(table, fields)
        return None

    async def _frame(self, command: FrameIn) -> EngineOutput:
        tb, shadow = self.tb, self.shadow
        written, model_writes = len(tb.written), len(shadow.memory.writes)
        await self.catch_up(command.now)
        expected = shadow.execute(command)
        assert expected is not None
        self._pass_sacks(expected.sacks)
        for peer_sack in expected.peer_sacks:   # the RTL's receive engine hands them to its transport unit
            if self.peer_sacks is None:
                raise EngineMismatch(f"the engine takes the peer's SACK ({peer_sack}) and nothing has a transport unit")
            self.peer_sacks(peer_sack.association, peer_sack.sack, ticks_at(command.now))
        await tb.send_frames([command.frame])
        await tb.drain()
        results = await tb.results()
        result = shadow.last_result
        assert result is not None
        problems = (_compare_segments(results.segments, result.segments)
                    + _compare_chunk_errors(results.chunk_errors, result.chunk_faults)
                    + _compare_acks(results.acks, result.acks))
        got_frames = [p.data for p in results.frame_exceptions]
        got_chunks = [p.data for p in results.chunk_exceptions]
        assert expected is not None
        if got_frames != ([expected.frame] if expected.frame is not None else []) or got_chunks != expected.chunks:
            problems.append("exception stream: engine passed up different frames or chunks than the model")
        allowed = [(a, a + n) for a, n in shadow.memory.writes[model_writes:] if n]
        for address, length in tb.written[written:]:
            if not any(start <= address and address + length <= end for start, end in allowed):
                problems.append(f"engine wrote {length} bytes at {address:#x}, outside every write of the model")
        if problems:
            raise EngineMismatch("; ".join(problems[:8]))
        return EngineOutput(
            frame=got_frames[0] if got_frames else None, chunks=got_chunks,
            acks=[Ack(r.tsn, AckDisposition(r.disposition), r.length, bool(r.immediate)) for r in results.acks],
            reports=[segment_verdict(r.fields) for r in results.segments], chunk_errors=len(results.chunk_errors),
            reports_waiting=results.counters["reports_waiting"])


class AsyncTransmit(TransmitEngine, Protocol):
    """A transmit engine whose commands take time to run (`sim.tb.rnic_transmit.RtlTransmit`)."""

    @property
    def busy(self) -> bool: ...

    async def settle(self) -> None: ...


@dataclasses.dataclass
class RtlHost:
    """A host's engines on the simulator: `engine` receives (`RtlEngine`), `transmit` sends (`RtlTransmit`;
    None: the golden model, at once); `memory_bytes`: its memory, whose top quarter is its bounce area (None:
    unbounded, the bounce area far above the buffers)."""
    engine: AsyncEngine
    transmit: AsyncTransmit | None = None
    memory_bytes: int | None = None
    frames_received: int = 0


class SimFabric(FabricBackend):
    """Host A on the RTL engines, host B on their golden models or on RTL engines too, one simulated link
    (see the module docstring).

    `engine`, `transmit`, `memory_bytes`: host A's (`RtlHost`); `peer`: host B's RTL (None: the golden
    models); `peer_host`: makes host B instead, as `driver.backends.soft.SoftFabric`'s does (a `SoftRnic`
    over usrsctp: `sim.usrsctp_host.usrsctp_host`); `lock`: serialises the waits that drive the fabric (a
    cocotb `Lock` by default); `record`: keep the link's frames (`pair.pcap()`)."""

    def __init__(self, engine: AsyncEngine, link: LinkConfig | None = None, seed: int = 1, lock=None,
                 record: bool = False, *, transmit: AsyncTransmit | None = None, memory_bytes: int | None = None,
                 peer: RtlHost | None = None,
                 peer_host: Callable[[RnicConfig, random.Random], SoftRnic] | None = None,
                 **options: object) -> None:
        options.setdefault("resources", ENGINE_RESOURCES)
        options.setdefault("streams", STREAM_IDS)
        options.setdefault("engine_sacks", True)   # as on `engine`: the receive engines SACK (RFC 4960 6.2)
        self.rtl_hosts = {RTL_SIDE: RtlHost(engine, transmit, memory_bytes)}
        if peer is not None:
            self.rtl_hosts[Side.B] = peer
        for option in ("engine_sacks", "engine_transport"):
            if options.get(option) and not all(getattr(getattr(rtl.engine, "tb", None), "external_tick", False)
                                               and rtl.transmit is not None for rtl in self.rtl_hosts.values()):
                raise InvalidArgument(f"{option}: needs RTL hosts on `sim.tb.rnic_tb.rnic_driver_top` (the "
                                      "transport unit, the timer ticked by the fabric) with their transmit engines")
        for rtl in self.rtl_hosts.values():
            if rtl.transmit is not None:
                rtl.engine.sacks = rtl.transmit.post_sack
                rtl.engine.peer_sacks = rtl.transmit.take_peer_sack
                rtl.transmit.clock = lambda: ticks_at(self.pair.now)
        hosts = {}
        for side in Side:
            config = host_config(side, **options)
            rng = random.Random(seed * 2 + (side is Side.B))
            rtl = self.rtl_hosts.get(side)
            if side is Side.B and peer_host is not None:    # another host than the backend's (see SoftFabric)
                hosts[side] = peer_host(config, rng)
            elif rtl is not None:
                bounce = ({} if rtl.memory_bytes is None
                          else dict(zip(("bounce_base", "bounce_bytes"), bounce_area(rtl.memory_bytes))))
                hosts[side] = EngineRnic(config, rtl.engine.memory, rng, None,  # type: ignore[arg-type]
                                         session_policy=None, regions=SHAPE.regions,
                                         buffers_per_queue=SHAPE.buffers_per_queue, transmit=rtl.transmit, **bounce)
            else:
                memory = SparseMemory()
                hosts[side] = EngineRnic(config, memory, rng, ModelEngine(MACS[side], IPS[side], memory),
                                         session_policy=None, regions=SHAPE.regions,
                                         buffers_per_queue=SHAPE.buffers_per_queue)
        self.pair = HostPair(hosts, Link(link, record=record), record=record)
        self.rtl = engine
        self.devices = (EngineDevice(self, Side.A),  # type: ignore[arg-type]
                        (SoftDevice if peer_host is not None else EngineDevice)(self, Side.B))  # type: ignore[arg-type]
        for side, rtl in self.rtl_hosts.items():
            if rtl.memory_bytes is not None:
                self.devices[side is Side.B].memory_end = bounce_area(rtl.memory_bytes)[0]
        self._kicked = False
        self._lock = lock if lock is not None else Lock()

    @property
    def frames_through_rtl(self) -> int:
        """Frames the RTL receive engines took."""
        return sum(rtl.frames_received for rtl in self.rtl_hosts.values())

    def now(self) -> float:
        return self.pair.now

    def engine_time(self) -> tuple[int, float] | None:
        time = getattr(self.rtl, "time", None)  # the golden model behind the same interface has no clock
        return time() if time is not None else None

    def kick(self) -> None:
        """Something was posted: the wait that drives the fabric sends it before time moves on."""
        self._kicked = True

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        raise BackendUnavailable("under cocotb the test awaits the program itself: see sim.driver_sim.run_program")

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None) -> None:
        async with self._lock:
            pair = self.pair
            deadline = None if timeout is None else pair.now + timeout
            while True:
                await self._settle()
                if predicate():
                    return
                if self._kicked:  # the predicate's routing posted something (a session opened): send it first
                    continue
                next_time = min((t for t in (pair.next_time(), *(rtl.engine.next_timeout()
                                                                  for rtl in self.rtl_hosts.values()))
                                 if t is not None), default=None)
                if next_time is None:
                    raise SimulationStalled("nothing is in flight and no timer runs: the wait can never end")
                if deadline is not None and next_time > deadline:
                    pair.advance(deadline)
                    raise WaitTimeout(f"not done within {timeout:g} s of simulated time")
                pair.advance(next_time)

    async def _settle(self) -> None:
        """The RTL hosts' engine work (receive, then transmit), then what is due, until nothing is left to do
        now."""
        self._kicked = False
        for rtl in self.rtl_hosts.values():   # the RTL's timer to the fabric's clock, before what happens now
            await rtl.engine.catch_up(self.pair.now)
        while True:
            busy = False
            for side, rtl in self.rtl_hosts.items():
                host = self.pair.hosts[side]
                assert isinstance(host, EngineRnic)
                while (command := host.take_engine_work()) is not None:
                    output = await rtl.engine.execute(command)
                    if output is not None:
                        assert isinstance(command, FrameIn)
                        rtl.frames_received += 1
                        host.engine_output(output, command.now)
                if rtl.transmit is not None:
                    await rtl.transmit.settle()
            self.pair.send_due()
            self.pair.collect()
            if self.on_change is not None:
                self.on_change()
            for side, rtl in self.rtl_hosts.items():
                busy |= self.pair.hosts[side].engine_work_waiting or (rtl.transmit is not None and rtl.transmit.busy)
            if not busy:
                return


# -- running a program ------------------------------------------------------------------------------


def program_reference(main: Callable) -> dict[str, str]:
    """How the cocotb test finds `main`: its module, or the file of a script run as __main__."""
    module = main.__module__
    reference = {"function": main.__qualname__}
    if module == "__main__" or module not in sys.modules or getattr(sys.modules[module], "__spec__", None) is None:
        reference["file"] = str(Path(inspect.getfile(main)).resolve())
    else:
        reference["module"] = module
    return reference


def run_program(main: Callable, *, link: LinkConfig | None = None, seed: int = 1, log_file: Path | None = None,
                width_bytes: int = WIDTH_BYTES, memory_bytes: int = MEMORY_BYTES, record: bool = False,
                arguments: dict | None = None, gateware_peer: bool = False, usrsctp_peer: bool = False,
                options: dict | None = None) -> SimulationResult:
    """Run the coroutine function `main(fabric, **arguments)` on the `sim` fabric, in a cocotb test on the
    RNIC top of `width_bytes` (`sim.tb.rnic_tb.rnic_driver_top`: the transport unit in it, its timer ticked
    by the fabric's clock) with
    `memory_bytes` of host memory for host A (its top quarter the bounce area); `gateware_peer`: host B on an
    RNIC top of its own too, in the same simulation (`sim.tb.rnic_pair.RnicPair`, a build of its own);
    `usrsctp_peer`: host B a software host over usrsctp (`sim.usrsctp_host.usrsctp_host`);
    `record` keeps the link's frames. `SimulationFailed` when `main` raises or an engine differs from its
    model. `main`'s prints go to the simulator's log (stdout, or `log_file`); `options`: the fabric's
    (`RnicConfig` fields, as `open_fabric` takes them: `engine_sacks`, `engine_transport`, ...); `arguments`
    and `options` must be JSON-serialisable."""
    parameters = {**program_reference(main), "seed": seed,
                  "link": dataclasses.asdict(link) if link is not None else None,
                  "width_bytes": width_bytes, "memory_bytes": memory_bytes, "record": record,
                  "arguments": arguments or {}, "gateware_peer": gateware_peer, "usrsctp_peer": usrsctp_peer,
                  "options": options or {}}
    if gateware_peer and usrsctp_peer:
        raise InvalidArgument("host B is either on the RTL (gateware_peer) or over usrsctp (usrsctp_peer)")
    if gateware_peer:
        from sim.tb.rnic_pair import RnicPair

        top, name = RnicPair(width_bytes, SHAPE), f"rnic_pair_w{width_bytes}"
    else:
        top, name = rnic_driver_top(width_bytes, SHAPE), f"rnic_driver_w{width_bytes}"
    return run_cocotb(top, test_module="sim.tb.driver_program", toplevel=name,
                      build_root=default_build_root() / name.rsplit("_w", 1)[0], parameters=parameters,
                      log_file=log_file, waves_name=f"{name}-driver-{main.__name__}")
