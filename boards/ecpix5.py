"""The ECPIX-5 board's FPGA as data for the out-of-context synthesis flow.

The LambdaConcept ECPIX-5 (85k variant) carries a Lattice LFE5UM5G-85F,
speed grade 8, in the 554-ball caBGA package. The strings come from
amaranth-boards' :class:`ECPIX585Platform` and Amaranth's own ECP5 platform,
so this file and the board platform cannot disagree.
"""

from dataclasses import dataclass

from amaranth_boards.ecpix5 import ECPIX585Platform

__all__ = ["Ecp5Device", "ECPIX5_85F"]


@dataclass(frozen=True)
class Ecp5Device:
    """An ECP5 part as yosys ``synth_ecp5`` and ``nextpnr-ecp5`` name it."""

    device: str   # e.g. "LFE5UM5G-85F"
    package: str  # amaranth-boards spelling, e.g. "BG554"
    speed: str    # "6", "7" or "8"
    nextpnr_device_option: str   # e.g. "--um5g-85k"
    nextpnr_package: str         # e.g. "CABGA554"

    @classmethod
    def from_platform(cls, platform_class: type) -> "Ecp5Device":
        device, package, speed = platform_class.device, platform_class.package, platform_class.speed
        return cls(
            device=device,
            package=package,
            speed=str(speed),
            nextpnr_device_option=platform_class._nextpnr_device_options[device],
            nextpnr_package=platform_class._nextpnr_package_options[package].upper(),
        )

    def nextpnr_args(self) -> list[str]:
        return [self.nextpnr_device_option, "--package", self.nextpnr_package, "--speed", self.speed]


#: The ECPIX-5 85k board's FPGA: LFE5UM5G-85F, caBGA554, speed 8.
ECPIX5_85F = Ecp5Device.from_platform(ECPIX585Platform)
