"""`rnic bench e2e`: RDMA Write goodput between two software RNICs, as a table and a goodput-versus-loss plot.

Host A RDMA Writes ``total`` bytes to host B in messages of each size, all posted at once, over the
demo's link (`sim.commands.demo.impaired`: loss, duplication, reordering and corruption each at the
rate), for each rate of the sweep. Goodput is the bytes placed at B per second: per wall-clock second
of this CPython process, and per simulated second. The plot (matplotlib, the ``plot`` extra) draws the
simulated goodput against the rate, one line per message size, on a log scale. A cell whose transfer
does not finish (`model.rnic.pair.Stalled`) is listed as stalled and left out of the plot.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from model.ddp.memory import Access
from model.rnic.events import WriteArrived
from model.rnic.link import Side
from model.rnic.pair import HostPair, Stalled
from sim.commands.demo import SOURCE, STREAM, WRITE_SINK, impaired

SIZES = (4096, 1 << 20)
LOSSES = (0.0, 0.005, 0.01, 0.02, 0.05)


@dataclass(frozen=True)
class BenchRow:
    message: int
    loss: float
    messages: int
    wall_seconds: float
    simulated_seconds: float
    retransmissions: int
    stalled: str = ""  # why the transfer did not finish; empty when it did

    @property
    def nbytes(self) -> int:
        return self.message * self.messages

    @property
    def simulated_goodput(self) -> float | None:
        """Bytes per simulated second (None: stalled, or no simulated time passed)."""
        if self.stalled or self.simulated_seconds <= 0:
            return None
        return self.nbytes / self.simulated_seconds


def measure_e2e(message: int, loss: float, total: int, seed: int = 1) -> BenchRow:
    """RDMA Write `total` bytes from A to B in `message`-byte messages, all posted at once."""
    bed = HostPair.create(impaired(loss, seed), seed=seed)
    messages = max(1, total // message)
    wall_start = time.perf_counter()
    try:
        bed.connect()
        bed.open_stream(STREAM, b"rnic demo")
        bed.memory[Side.A].write(SOURCE, random.Random(seed).randbytes(message))
        sink = bed.b.register_memory(WRITE_SINK, message, Access.REMOTE_WRITE)
        wall_start, simulated_start = time.perf_counter(), bed.now
        for _ in range(messages):
            bed.a.post_write(STREAM, sink, 0, SOURCE, message)
        bed.run_until(lambda: bed.count(Side.B, WriteArrived) >= messages)
    except Stalled as error:
        return BenchRow(message, loss, messages, time.perf_counter() - wall_start, bed.now, 0, stalled=str(error))
    wall, simulated = time.perf_counter() - wall_start, bed.now - simulated_start
    if bed.memory[Side.B].read(WRITE_SINK, message) != bed.memory[Side.A].read(SOURCE, message):
        raise AssertionError("bench e2e: the data placed at B differs from A's")
    stats = bed.a.statistics.association
    assert stats is not None
    return BenchRow(message, loss, messages, wall, simulated, stats.retransmitted_by_timeout + stats.fast_retransmitted)


def run_e2e_bench(total: int = 4 << 20, sizes: tuple[int, ...] = SIZES, losses: tuple[float, ...] = LOSSES,
                  out: TextIO | None = None) -> list[BenchRow]:
    """Print the table, a row per (message size, loss), as each is measured; return the rows."""
    out = out if out is not None else sys.stdout
    rows = []
    print(f"model-to-model RDMA Write goodput, {total / (1 << 20):g} MiB per cell, one core, CPython", file=out)
    header = (f"{'message':>9} | {'loss':>5} | {'msgs':>5} | {'wall s':>7} | {'MB/s wall':>10} | "
              f"{'sim s':>8} | {'MB/s sim':>10} | {'rtx':>4}")
    print(header, file=out)
    print("-" * len(header), file=out, flush=True)
    for size in sizes:
        for loss in losses:
            row = measure_e2e(size, loss, total)
            rows.append(row)
            if row.stalled:
                print(f"{size:>8}B | {loss:>5.1%} | stalled after {row.simulated_seconds:.1f} simulated s: "
                      f"{row.stalled}", file=out, flush=True)
                continue
            sim_rate = row.simulated_goodput / 1e6 if row.simulated_goodput is not None else float("inf")
            print(f"{size:>8}B | {loss:>5.1%} | {row.messages:>5} | {row.wall_seconds:>7.2f} | "
                  f"{row.nbytes / row.wall_seconds / 1e6:>10.2f} | {row.simulated_seconds:>8.3f} | "
                  f"{sim_rate:>10.2f} | {row.retransmissions:>4}", file=out, flush=True)
    return rows


def goodput_series(rows: list[BenchRow]) -> dict[int, list[tuple[float, float]]]:
    """Per message size, the (loss in %, simulated goodput in MB/s) points the plot draws: stalled cells
    and cells with no simulated time are left out."""
    series: dict[int, list[tuple[float, float]]] = {}
    for row in rows:
        if row.simulated_goodput is not None:
            series.setdefault(row.message, []).append((row.loss * 100, row.simulated_goodput / 1e6))
    return series


def plot_goodput(rows: list[BenchRow], path: Path, total: int) -> None:
    """Write the goodput-versus-loss plot of `rows` to `path` (PNG). Needs matplotlib (the ``plot`` extra)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for size, points in sorted(goodput_series(rows).items()):
        losses, goodputs = zip(*points)
        label = f"{size >> 20} MiB messages" if size >= 1 << 20 and size % (1 << 20) == 0 else f"{size} B messages"
        axes.plot(losses, goodputs, marker="o", label=label)
    axes.set_yscale("log")
    axes.set_xlabel("link loss, duplication, reordering and corruption, each (%)")
    axes.set_ylabel("goodput (MB per simulated second)")
    axes.set_title(f"RDMA Write A->B between two software RNICs, {total / (1 << 20):g} MiB per point")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100)
    pyplot.close(figure)
