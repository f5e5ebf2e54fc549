"""Protection domains (RFC 5041 2.3, 8.2): the scope of memory regions and queue pairs (pyverbs `PD`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from driver.arguments import flags, whole
from driver.mr import MR, AccessFlags

if TYPE_CHECKING:
    from driver.device import Device


class PD:
    """A protection domain of a device: `reg_mr` registers memory in it, `Device.create_id(...).create_qp`
    binds queue pairs to it."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.regions: dict[int, MR] = {}

    def reg_mr(self, length: int, access: AccessFlags = AccessFlags.LOCAL_WRITE) -> MR:
        """Allocate `length` bytes of host memory and register them (`ibv_reg_mr`); the region's Tagged
        Offsets are its addresses (`MR.buf`), so a peer's `remote_addr` is an address, as in verbs."""
        self.device.check_open()
        whole("length", length, 0, self.device.attr.max_msg_sz)
        region = MR(self, length, flags("access", access, AccessFlags))
        self.regions[region.lkey] = region
        return region

    def region(self, lkey: int) -> MR | None:
        """The region of this PD with STag `lkey`, if registered here."""
        return self.regions.get(lkey)
