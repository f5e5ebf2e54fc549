"""Protection domains (RFC 5041 2.3, 8.2): the scope of memory regions and queue pairs (pyverbs `PD`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from driver.arguments import flags, whole
from driver.errors import InvalidArgument, WrongArgumentType
from driver.mr import MR, AccessFlags

Buffer = bytearray | memoryview
"""A caller's buffer `reg_mr` takes: anything with the buffer protocol (a `bytearray`, a `memoryview`, an
`array.array`, a `mmap`...)."""


def _buffer(value: object, writable: bool) -> memoryview:
    """The caller's buffer as one contiguous run of bytes."""
    try:
        view = memoryview(value)  # type: ignore[arg-type]
    except TypeError:
        raise WrongArgumentType(f"length must be an int, or the buffer to register an object with the buffer "
                                f"protocol (bytearray, memoryview...), not {type(value).__name__}") from None
    if not view.contiguous:
        raise InvalidArgument("buffer is not contiguous: a region is one run of bytes (RFC 5041 8.3.1)")
    if writable and view.readonly:
        raise InvalidArgument("buffer is read-only, and the access asked lets the device write it (LOCAL_WRITE "
                              "or REMOTE_WRITE): register a writable buffer (a bytearray) or ask less")
    return view.cast("B")

if TYPE_CHECKING:
    from driver.device import Device


class PD:
    """A protection domain of a device: `reg_mr` registers memory in it, `Device.create_id(...).create_qp`
    binds queue pairs to it.  A queue pair's SGEs name regions of its PD, and a peer reaches through a queue
    pair only the regions of its PD: another PD's STag is "STag not associated with DDP Stream" (RFC 5041 7.2,
    8.2)."""

    def __init__(self, device: Device, pd_id: int) -> None:
        self.device = device
        self.pd_id = pd_id
        """The PD's number in the device's tables (a region's and a stream's PD must match, RFC 5041 8.2)."""
        self.regions: dict[int, MR] = {}
        self.mirrors: dict[int, MR] = {}
        """The regions over a caller's buffer, the only ones `sync_buffers` has work for (it runs per frame)."""

    def reg_mr(self, length: int | Buffer, access: AccessFlags = AccessFlags.LOCAL_WRITE) -> MR:
        """Register memory (`ibv_reg_mr`): `length` bytes the driver allocates, or the caller's own buffer (a
        `bytearray`, `memoryview`, or any contiguous object with the buffer protocol; writable when the device
        may write it, LOCAL_WRITE or REMOTE_WRITE), whose bytes then follow the region's (see `driver.mr`).  The
        region's Tagged Offsets are its addresses (`MR.buf`), so a peer's `remote_addr` is an address, as in
        verbs."""
        self.device.check_open()
        access = flags("access", access, AccessFlags)
        buffer = None
        if isinstance(length, int) and not isinstance(length, bool):
            whole("length", length, 0, self.device.attr.max_msg_sz)
        else:
            buffer = _buffer(length, bool(access & (AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE)))
            whole("len(buffer)", buffer.nbytes, 0, self.device.attr.max_msg_sz)
            length = buffer.nbytes
        region = MR(self, length, access, buffer)
        self.regions[region.lkey] = region
        if buffer is not None:
            self.mirrors[region.lkey] = region
        return region

    def sync_buffers(self) -> None:
        """Every region mirroring a caller's buffer brought level with the device's memory (`MR.sync`)."""
        for region in list(self.mirrors.values()):
            region.sync()

    def region(self, lkey: int) -> MR | None:
        """The region of this PD with STag `lkey`, if registered here."""
        return self.regions.get(lkey)
