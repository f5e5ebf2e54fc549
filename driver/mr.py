"""Memory regions (RFC 5041 8.3.1): host memory registered under an STag with access rights (pyverbs `MR`).

iWARP has one STag per region: it is both the `lkey` the local SGEs name and
the `rkey` a peer names in an RDMA Write or Read (RFC 5040 5.1, 5.2).

A region is either memory the driver allocates (`pd.reg_mr(length)`) or the
caller's own buffer (`pd.reg_mr(bytearray(...))`, as `ibv_reg_mr` takes an
address).  A device reaches only its own memory (the model's host memory, the
testbench's AXI RAM on `sim`, the board's block RAM), so a caller's buffer is
mirrored by a buffer of the device's memory, which is what `MR.buf` addresses
(SGEs and a peer's remote addresses are `mr.buf + offset`).  The two are kept
equal at the driver's calls (`_Mirror`): bytes the caller changed go to the
device before the device may read them (at every post, at every wait and
before each service of the fabric), bytes the device wrote (a peer's RDMA
Write, a received Send, a Read Response) come back into the caller's buffer
whenever the driver routes what the devices reported (every poll and wait),
before the completion that announces them is seen, and at deregistration.
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


BLOCK = 256
"""Bytes compared at a time when looking for what changed in a mirrored buffer."""


def changed_ranges(now: bytes | memoryview, before: bytes | bytearray) -> list[tuple[int, int]]:
    """The (start, end) ranges, in blocks of `BLOCK` bytes merged when adjacent, where `now` differs from `before`
    (of the same length)."""
    if now == before:
        return []
    ranges: list[tuple[int, int]] = []
    for start in range(0, len(before), BLOCK):
        end = min(start + BLOCK, len(before))
        if now[start:end] != before[start:end]:
            if ranges and ranges[-1][1] == start:
                ranges[-1] = (ranges[-1][0], end)
            else:
                ranges.append((start, end))
    return ranges


class _Mirror:
    """The caller's buffer and the device memory that stands for it (see the module docstring).  `shadow` holds
    the bytes both last agreed on, so that each side's changes are told apart: the caller's go to the device,
    the device's to the caller."""

    def __init__(self, view: memoryview, device_writes: bool) -> None:
        self.view = view
        self.shadow = bytearray(view)
        self.device_writes = device_writes
        """The device may write the region (LOCAL_WRITE or REMOTE_WRITE): its bytes are read back."""
        self.frames_seen: int | None = -1

    def push(self, backend, address: int) -> None:
        """The bytes the caller changed since the last synchronisation, to the device."""
        for start, end in changed_ranges(self.view, self.shadow):
            chunk = bytes(self.view[start:end])
            backend.write(address + start, chunk)
            self.shadow[start:end] = chunk

    def pull(self, backend, address: int, force: bool = False) -> None:
        """The bytes the device wrote since the last synchronisation, to the caller's buffer; only when frames
        have arrived since the last look (every byte a device places comes in a frame), unless `force`."""
        if not self.device_writes:
            return
        frames = backend.frames_received()
        if not force and frames is not None and frames == self.frames_seen:
            return
        self.frames_seen = frames
        device = backend.read(address, len(self.shadow))
        for start, end in changed_ranges(device, self.shadow):
            self.view[start:end] = device[start:end]
            self.shadow[start:end] = device[start:end]


class MR:
    """A registered buffer: `buf` (its address and first Tagged Offset), `length`, `lkey` = `rkey` (its STag).
    `read` and `write` reach its bytes in host memory; `buffer` is the caller's buffer it mirrors, if any."""

    def __init__(self, pd: PD, length: int, access: AccessFlags, buffer: memoryview | None = None) -> None:
        access = AccessFlags(access)
        if access & AccessFlags.REMOTE_WRITE and not access & AccessFlags.LOCAL_WRITE:
            raise InvalidArgument("access REMOTE_WRITE needs LOCAL_WRITE (ibv_reg_mr)")
        self.pd = pd
        self.length = length
        self.access = access
        self.buffer = buffer
        backend = pd.device.backend
        self.buf = backend.allocate(length)
        self._mirror: _Mirror | None = None
        if buffer is not None:
            backend.write(self.buf, bytes(buffer))
            self._mirror = _Mirror(buffer, bool(access & (AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE)))
        try:
            self.lkey = backend.register(self.buf, length, access.model_access(), base_to=self.buf, pd_id=pd.pd_id)
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
        if self._mirror is not None:
            self._mirror.view[offset:offset + len(data)] = data
            self.sync()
            return
        self.pd.device.backend.write(self.buf + offset, data)

    def read(self, length: int, offset: int = 0) -> bytes:
        """`length` bytes of the region from `offset`."""
        arguments.whole("length", length, 0, self.length)
        self._check_range(offset, length, "length")
        if self._mirror is not None:
            self.sync()
            return bytes(self._mirror.view[offset:offset + length])
        return self.pd.device.backend.read(self.buf + offset, length)

    def sync(self, force: bool = False) -> None:
        """A mirrored region: the caller's changes to the device, then the device's to the caller's buffer (`force`:
        read the device's memory even if no frame arrived).  Nothing for an allocated region."""
        if self._mirror is None or self._deregistered:
            return
        backend = self.pd.device.backend
        self._mirror.push(backend, self.buf)
        self._mirror.pull(backend, self.buf, force)

    def dereg(self) -> None:
        """Deregister (`ibv_dereg_mr`): the STag is no longer usable, locally or by the peer; a caller's buffer
        keeps the bytes the device wrote into it until now."""
        if self._deregistered:
            raise InvalidState(f"STag 0x{self.lkey:08x} is already deregistered")
        self.sync(force=True)
        self.pd.device.backend.deregister(self.lkey)
        self.pd.regions.pop(self.lkey, None)
        self.pd.mirrors.pop(self.lkey, None)
        self._deregistered = True

    def _check_range(self, offset: int, length: int, what: str) -> None:
        if self._deregistered:
            raise InvalidState(f"the region of STag 0x{self.lkey:08x} is deregistered")
        arguments.whole("offset", offset, 0, self.length)
        if offset + length > self.length:
            raise InvalidArgument(f"offset {offset} and {what} ({length} bytes) run past the {self.length}-byte "
                                  "region")

    def __repr__(self) -> str:
        mirrors = ", mirroring the caller's buffer" if self.buffer is not None else ""
        return (f"MR(buf=0x{self.buf:x}, length={self.length}, lkey=rkey=0x{self.lkey:08x}, access={self.access!r}"
                f"{mirrors})")
