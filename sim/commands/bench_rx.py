"""`rnic bench rx`: the RTL receive engine's throughput, latency and synthesis results, as tables.

Simulation (sim/tb/rx_bench.py, Verilator): for each width and payload size,
back-to-back RDMA Write frames with always-ready memory and outputs.
Synthesis (optional, `--synth`): the whole engine out of context on the
ECPIX-5's LFE5UM5G-85F speed 8 (boards/synth.py), LUT4/FF/BRAM and Fmax, and
the capacity W x 8 x Fmax.
"""

from __future__ import annotations

import inspect
import json
import tempfile
from pathlib import Path

from model.ddp.memory import Access
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment, TaggedHeader
from model.engine.config import AssociationEntry, ReceiveConfig, RegionEntry, StreamEntry
from model.net.frames import build_frame
from model.rdmap.messages import Opcode, tagged_rsvd_ulp
from model.sctp.packet import PPID_DDP_SEGMENT, DataChunk, SctpPacket
from sim.traffic.rx import EngineShape

PAYLOADS = (64, 256, 1024, 1460, 4096, 9000)

# The bench's engine, host memory, configuration and frames (sim/tb/rx_bench.py runs them).
SHAPE = EngineShape()
MEMORY_BYTES = 1 << 22
LOCAL_MAC, PEER_MAC = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")
STAG, REGION_ADDRESS, REGION_LENGTH = 0x0101, 0x10000, 1 << 21
TAG = 0x5E6F7080

CONFIG = ReceiveConfig(
    local_mac=LOCAL_MAC, local_ip="10.0.0.2",
    associations=(AssociationEntry(0, 5002, 5001, "10.0.0.1", TAG),),
    streams=(StreamEntry(0, 0, 1),),
    regions=(RegionEntry(STAG, 1, 0, REGION_LENGTH, Access.REMOTE_WRITE, REGION_ADDRESS),),
)


def write_frames(payload: int, count: int, first_tsn: int) -> tuple[list[bytes], list[int]]:
    """`count` frames of one RDMA Write segment each; and each segment's host address. The DDP-SSN
    follows the TSN, so TSNs from 1 on are the stream's DDP-SSNs from its `first_ssn` (1) on."""
    frames, addresses = [], []
    data = bytes(i & 0xFF for i in range(payload))
    for i in range(count):
        to = (i * (payload + 3)) % (REGION_LENGTH - payload)  # a new byte alignment each time
        segment = DdpSegment(TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), STAG, to), data).encode()
        chunk = DataChunk(first_tsn + i, 0, 0, PPID_DDP_SEGMENT, DdpSegmentChunkData((first_tsn + i) & 0xFFFF, segment).encode(),
                          unordered=True)
        packet = SctpPacket(5001, 5002, TAG, [chunk]).encode()
        frames.append(build_frame(packet, PEER_MAC, LOCAL_MAC, "10.0.0.1", "10.0.0.2"))
        addresses.append(REGION_ADDRESS + to)
    return frames, addresses


def largest_payload(width: int) -> int:
    """The largest payload whose frame the engine at W = ``width`` stores whole: its store-and-forward
    buffer keeps one beat in reserve (hdl/rx/frame_receiver.py), so a frame holds at most
    ``buffer_bytes - width`` bytes; a longer one is dropped as ``overflow``."""
    from hdl.rx.engine import RxEngine

    longest_frame = inspect.signature(RxEngine).parameters["buffer_bytes"].default - width
    payload = longest_frame - len(_frame(0))
    while len(_frame(payload)) > longest_frame:  # the DATA chunk's padding (RFC 4960 3.2)
        payload -= 1
    return payload


def _frame(payload: int) -> bytes:
    return write_frames(payload, 1, 1)[0][0]


def simulate(width: int, payloads: tuple[int, ...], frames: int, waves: str | bool | None = None) -> list[dict]:
    from hdl.rx.engine import RxEngine
    from sim.runner import default_build_root, run_cocotb

    shape = SHAPE
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "bench.json"
        run_cocotb(
            RxEngine(width, associations=shape.associations, stream_ids=shape.stream_ids, regions=shape.regions,
                     buffers_per_queue=shape.buffers_per_queue),
            test_module="sim.tb.rx_bench", toplevel=f"rx_engine_w{width}",
            build_root=default_build_root() / "rx_engine", log_file=Path(scratch) / "simulation.log", waves=waves,
            parameters={"width_bytes": width, "payloads": list(payloads), "frames": frames, "output": str(output)},
        )
        return json.loads(output.read_text())


def run_rx_bench(widths: tuple[int, ...] = (8, 64), payloads: tuple[int, ...] = PAYLOADS, frames: int = 24,
                 synth: bool = False, target_mhz: float = 156.25, waves: str | bool | None = None) -> None:
    print(f"receive engine (RTL, Verilator): {frames} back-to-back RDMA Write frames per row, memory and "
          "outputs always ready; latencies are medians, in cycles from a frame's last beat")
    header = (f"{'W':>3} {'payload':>8} {'frame B':>8} {'bytes/cycle/W':>14} {'beats/cycle':>12} {'stalls':>7} "
              f"{'src idle':>9} {'->1st write':>12} {'->report':>9}")
    print(header)
    print("-" * len(header), flush=True)
    for width in widths:
        for row in simulate(width, payloads, frames, waves):
            print(f"{width:>3} {row['payload']:>8} {row['frame_bytes']:>8} {row['fraction']:>14.3f} "
                  f"{row['beats_per_cycle']:>12.3f} {row['stalls']:>7} {row['source_idle']:>9} "
                  f"{row['write_latency']:>12.0f} {row['report_latency']:>9.0f}", flush=True)
    if not synth:
        print("(synthesis: rnic bench rx --synth, or scripts/synth_report.py --blocks rx_engine)")
        return
    from hdl.rx.engine import RxEngine
    from sim.commands.synthesis_table import print_synthesis_table

    print_synthesis_table(RxEngine, "rx_engine", widths, target_mhz)
