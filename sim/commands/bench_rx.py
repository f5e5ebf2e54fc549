"""`rnic bench rx`: the RTL receive engine's throughput, latency and synthesis results, as tables.

Simulation (sim/tb/rx_bench.py, Verilator): for each width and payload size,
back-to-back RDMA Write frames with always-ready memory and outputs.
Synthesis (optional, `--synth`): the whole engine out of context on the
ECPIX-5's LFE5UM5G-85F speed 8 (boards/synth.py), LUT4/FF/BRAM and Fmax, and
the capacity W x 8 x Fmax.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

PAYLOADS = (64, 256, 1024, 1460, 4096, 9000)


def simulate(width: int, payloads: tuple[int, ...], frames: int) -> list[dict]:
    from hdl.rx.engine import RxEngine
    from sim.runner import default_build_root, run_cocotb
    from sim.traffic.rx import EngineShape

    shape = EngineShape()
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "bench.json"
        run_cocotb(
            RxEngine(width, associations=shape.associations, stream_ids=shape.stream_ids, regions=shape.regions,
                     buffers_per_queue=shape.buffers_per_queue),
            test_module="sim.tb.rx_bench", toplevel=f"rx_engine_w{width}",
            build_root=default_build_root() / "rx_engine", log_file=Path(scratch) / "simulation.log",
            parameters={"width_bytes": width, "payloads": list(payloads), "frames": frames, "output": str(output)},
        )
        return json.loads(output.read_text())


def run_rx_bench(widths: tuple[int, ...] = (8, 64), payloads: tuple[int, ...] = PAYLOADS, frames: int = 24,
                 synth: bool = False, target_mhz: float = 156.25) -> None:
    print(f"receive engine (RTL, Verilator): {frames} back-to-back RDMA Write frames per row, memory and "
          "outputs always ready; latencies are medians, in cycles from a frame's last beat")
    header = (f"{'W':>3} {'payload':>8} {'frame B':>8} {'bytes/cycle/W':>14} {'beats/cycle':>12} {'stalls':>7} "
              f"{'src idle':>9} {'->1st write':>12} {'->report':>9}")
    print(header)
    print("-" * len(header), flush=True)
    for width in widths:
        for row in simulate(width, payloads, frames):
            print(f"{width:>3} {row['payload']:>8} {row['frame_bytes']:>8} {row['fraction']:>14.3f} "
                  f"{row['beats_per_cycle']:>12.3f} {row['stalls']:>7} {row['source_idle']:>9} "
                  f"{row['write_latency']:>12.0f} {row['report_latency']:>9.0f}", flush=True)
    if not synth:
        print("(synthesis: rnic bench rx --synth, or make synth)")
        return
    from boards.ecpix5 import ECPIX5_85F
    from boards.synth import synthesize
    from hdl.rx.engine import RxEngine

    print(f"\nsynthesis: {ECPIX5_85F.device} {ECPIX5_85F.package} speed {ECPIX5_85F.speed}, out of context, "
          f"target {target_mhz:g} MHz")
    header = f"{'W':>3} {'LUT4':>7} {'FF':>7} {'BRAM':>5} {'Fmax MHz':>9} {'W x Fmax Gb/s':>14} {'time s':>7}"
    print(header)
    print("-" * len(header), flush=True)
    for width in widths:
        result = synthesize(RxEngine(width), f"rx_engine_w{width}", target_mhz=target_mhz)
        print(f"{width:>3} {result.lut4:>7} {result.ff:>7} {result.bram:>5} {result.fmax_mhz:>9.1f} "
              f"{width * 8 * result.fmax_mhz / 1000:>14.1f} {result.seconds:>7.0f}", flush=True)
