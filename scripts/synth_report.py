"""Print resources and Fmax of the engines and their blocks on the ECPIX-5's ECP5 (out-of-context P&R).

Usage: python scripts/synth_report.py [--widths 8 32] [--blocks rnic rx_engine tx_engine ...] [--target-mhz 156.25] [--keep DIR]
                                      [--failing]

By default the RNIC top level (``rnic``: both engines, their register files
and AXI ports, hdl/rnic.py) at W = 8, the standing 156.25 MHz bar;
``rnic_read_responder`` the top built with the engines' Read responder;
``rx_engine`` and ``tx_engine`` are the engines alone, the other names
their blocks. Capacity is the line-rate limit, one
W-byte beat per cycle at Fmax: W x 8 x Fmax bits per second.
"""

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from boards.ecpix5 import ECPIX5_85F  # noqa: E402
from boards.synth import synthesize  # noqa: E402
from hdl.rx.chunk_parser import ChunkParser  # noqa: E402
from hdl.stream.crc32c import Crc32c  # noqa: E402
from hdl.rx.ddp_header import DdpHeaderValidator  # noqa: E402
from hdl.rx.dma_writer import DmaWriter  # noqa: E402
from hdl.rx.frame_receiver import FrameReceiver  # noqa: E402
from hdl.rx.placement_check import PlacementCheck  # noqa: E402
from hdl.rx.engine import RxEngine  # noqa: E402
from hdl.rx.region_table import RegionTable  # noqa: E402
from hdl.rx.report_engine import ReportEngine  # noqa: E402
from hdl.rx.untagged_buffers import UntaggedBuffers  # noqa: E402
from hdl.tx.engine import TxEngine  # noqa: E402
from hdl.tx.transport_unit import TransportUnit  # noqa: E402
from hdl.rnic import Rnic  # noqa: E402

BLOCKS = {
    "crc32c": Crc32c,
    "frame_rx": FrameReceiver,
    "chunk_parser": ChunkParser,
    "ddp_header": DdpHeaderValidator,
    "placement": PlacementCheck,
    "dma_writer": DmaWriter,
    "rx_engine": RxEngine,
    "tx_engine": TxEngine,
    "rnic": Rnic,
    "rnic_read_responder": lambda width: Rnic(width, read_responder=True),   # issue 29 item 3's option
    # Blocks inside the placement check and after it; the width does not change them.
    "region_table": lambda width: RegionTable(16),
    "untagged_buffers": lambda width: UntaggedBuffers(8),
    "report_engine": lambda width: ReportEngine(),
    "transport_unit": lambda width: TransportUnit(2),
}


def _block_of(cell: str) -> str:
    """The two levels of hierarchy under the wrapper: ``block.placement.verdicts...`` -> placement.verdicts."""
    parts = re.sub(r"_TRELLIS.*$", "", cell).split(".")
    return ".".join(parts[1:3]) if parts[0] == "block" else parts[0]


def print_failing(endpoints) -> None:
    failing = [endpoint for endpoint in endpoints if endpoint[0] < 0]
    print(f"  {len(failing)} of {len(endpoints)} flip-flop and RAM write inputs miss the target")
    counts, worst = Counter(), {}
    for slack, cell, port in failing:
        block = _block_of(cell)
        counts[block] += 1
        worst.setdefault(block, (slack, cell, port))
    for block, count in counts.most_common(15):
        slack, cell, port = worst[block]
        print(f"  {count:6d}  {block:<32} worst {slack:6.2f} ns  {cell}.{port}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", nargs="+", choices=sorted(BLOCKS) + ["all"], default=["rnic"],
                        help="what to synthesize (all = every entry, the RNIC and the engines first)")
    parser.add_argument("--widths", nargs="+", type=int, default=[8], help="datapath widths in bytes")
    parser.add_argument("--target-mhz", type=float, default=156.25, help="the bar: Fmax and failing inputs are judged against it")
    parser.add_argument("--constraint-mhz", type=float,
                        help="clock given to nextpnr if tighter than the target (default: the target)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="keep build files under this directory")
    parser.add_argument("--failing", action="store_true",
                        help="after each row, the flip-flop inputs that miss the target, counted per block")
    arguments = parser.parse_args(argv)

    device = ECPIX5_85F
    print(f"{device.device} {device.package} speed {device.speed}, out of context, "
          f"target {arguments.target_mhz:g} MHz, registered ports")
    header = (f"{'block':<12} {'W':>3} {'LUT4':>6} {'FF':>6} {'BRAM':>5} {'DSP':>4} {'Fmax MHz':>9} "
              f"{'Wx8xFmax Gb/s':>14} {'time s':>7}")
    print(header, flush=True)
    print("-" * len(header))
    blocks = list(BLOCKS) if "all" in arguments.blocks else arguments.blocks
    tops = ("rnic", "rnic_read_responder", "rx_engine", "tx_engine")
    blocks = sorted(blocks, key=lambda name: (tops + (name,)).index(name))  # tops first
    for block in blocks:
        for width in arguments.widths:
            keep = arguments.keep / f"{block}_w{width}" if arguments.keep else None
            result = synthesize(BLOCKS[block](width), f"{block}_w{width}", device=device,
                                target_mhz=arguments.target_mhz, constraint_mhz=arguments.constraint_mhz,
                                seed=arguments.seed, keep_dir=keep,
                                endpoints=arguments.failing)
            capacity = width * 8 * result.fmax_mhz / 1000
            print(f"{block:<12} {width:>3} {result.lut4:>6} {result.ff:>6} {result.bram:>5} {result.dsp:>4} "
                  f"{result.fmax_mhz:>9.1f} {capacity:>14.1f} {result.seconds:>7.1f}", flush=True)
            if arguments.failing:
                print_failing(result.endpoints)
    return 0


if __name__ == "__main__":
    sys.exit(main())
