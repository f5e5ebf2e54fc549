"""The synthesis table the benches print with ``--synth``: one row per width, out of context on the ECPIX-5's part."""

from __future__ import annotations

from collections.abc import Callable


def print_synthesis_table(design: Callable[[int], object], name: str, widths: tuple[int, ...],
                          target_mhz: float) -> None:
    """Synthesize ``design(width)`` for each width (``boards.synth``) and print LUT4, FF, BRAM, Fmax,
    the capacity W x 8 x Fmax and the seconds each run took."""
    from boards.ecpix5 import ECPIX5_85F
    from boards.synth import synthesize

    print(f"\nsynthesis: {ECPIX5_85F.device} {ECPIX5_85F.package} speed {ECPIX5_85F.speed}, out of context, "
          f"target {target_mhz:g} MHz")
    header = f"{'W':>3} {'LUT4':>7} {'FF':>7} {'BRAM':>5} {'Fmax MHz':>9} {'W x Fmax Gb/s':>14} {'time s':>7}"
    print(header)
    print("-" * len(header), flush=True)
    for width in widths:
        result = synthesize(design(width), f"{name}_w{width}", target_mhz=target_mhz)
        print(f"{width:>3} {result.lut4:>7} {result.ff:>7} {result.bram:>5} {result.fmax_mhz:>9.1f} "
              f"{width * 8 * result.fmax_mhz / 1000:>14.1f} {result.seconds:>7.0f}", flush=True)
