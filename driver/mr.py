"""Memory regions (RFC 5041 8.3.1): host memory registered under an STag with access rights (pyverbs `MR`).

iWARP has one STag per region: it is both the `lkey` the local SGEs name and
the `rkey` a peer names in an RDMA Write or Read (RFC 5040 5.1, 5.2).
"""

from __future__ import annotations

from enum import IntFlag
from typing import TYPE_CHECKING

from model.ddp.memory import Access
from model.errors import RnicError

from driver import arguments
from driver.errors import InvalidArgument, InvalidState, OutOfResources

if TYPE_CHECKING:
    from driver.pd import PD


class AccessFlags(IntFlag):
    """`ibv_access_flags`: local reading is always allowed (verbs); the rest is opt-in."""

    LOCAL_WRITE = 0x1
    REMOTE_WRITE = 0x2
    REMOTE_READ = 0x4

    def model_access(self) -> Access:
        """The model's access rights (RFC 5041 8.3.1 item 5) for these flags."""
        access = Access.LOCAL_READ
        if self & AccessFlags.LOCAL_WRITE:
            access |= Access.LOCAL_WRITE
        if self & AccessFlags.REMOTE_WRITE:
            access |= Access.REMOTE_WRITE
        if self & AccessFlags.REMOTE_READ:
            access |= Access.REMOTE_READ
        return access


class MR:
    """A registered buffer: `buf` (its address and first Tagged Offset), `length`, `lkey` = `rkey` (its STag).
    `read` and `write` reach its bytes in host memory."""

    def __init__(self, pd: PD, length: int, access: AccessFlags) -> None:
        access = AccessFlags(access)
        if access & AccessFlags.REMOTE_WRITE and not access & AccessFlags.LOCAL_WRITE:
            raise InvalidArgument("access REMOTE_WRITE needs LOCAL_WRITE (ibv_reg_mr)")
        self.pd = pd
        self.length = length
        self.access = access
        backend = pd.device.backend
        self.buf = backend.allocate(length)
        try:
            self.lkey = backend.register(self.buf, length, access.model_access(), base_to=self.buf)
        except RnicError as error:  # the device's tables are full
            raise OutOfResources(f"{pd.device.name} cannot register another region: {error}") from None
        self._deregistered = False

    @property
    def rkey(self) -> int:
        return self.lkey

    @property
    def valid(self) -> bool:
        """False once a peer's Send with Invalidate revoked it (RFC 5040 5.3) or it was deregistered."""
        return not self._deregistered and self.pd.device.backend.region_valid(self.lkey)

    def contains(self, address: int, length: int) -> bool:
        return self.buf <= address and address + length <= self.buf + self.length

    def write(self, data: bytes, offset: int = 0) -> None:
        """Write `data` into the region at `offset` (the host writing its own buffer)."""
        data = arguments.data("data", data, self.length)
        self._check_range(offset, len(data), "data")
        self.pd.device.backend.write(self.buf + offset, data)

    def read(self, length: int, offset: int = 0) -> bytes:
        """`length` bytes of the region from `offset`."""
        arguments.whole("length", length, 0, self.length)
        self._check_range(offset, length, "length")
        return self.pd.device.backend.read(self.buf + offset, length)

    def dereg(self) -> None:
        """Deregister (`ibv_dereg_mr`): the STag is no longer usable, locally or by the peer."""
        if self._deregistered:
            raise InvalidState(f"STag 0x{self.lkey:08x} is already deregistered")
        self.pd.device.backend.deregister(self.lkey)
        self.pd.regions.pop(self.lkey, None)
        self._deregistered = True

    def _check_range(self, offset: int, length: int, what: str) -> None:
        if self._deregistered:
            raise InvalidState(f"the region of STag 0x{self.lkey:08x} is deregistered")
        arguments.whole("offset", offset, 0, self.length)
        if offset + length > self.length:
            raise InvalidArgument(f"offset {offset} and {what} ({length} bytes) run past the {self.length}-byte "
                                  "region")

    def __repr__(self) -> str:
        return f"MR(buf=0x{self.buf:x}, length={self.length}, lkey=rkey=0x{self.lkey:08x}, access={self.access!r})"
