"""Memory registration, tagged-access checks and host memory for the model.

Implements the Data Sink protection semantics of RFC 5041 8.2 (STag
association by Protection Domain and by DDP Stream), 8.3.1 (RNIC
requirements: no access outside the registered range, access rights that
can be revoked) and the tagged checks of RFC 5041 7.1, plus the access
rights of RFC 5040 (remote read for the Data Source of an RDMA Read, remote
write for RDMA Write).

`SparseMemory` is byte-addressable host memory with no preset size: unread
bytes return a fill value, and every write is logged so that tests can prove
that nothing was written outside registered regions.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntFlag

from model.errors import DdpError, EncodeError, RdmapError

TO_LIMIT = 1 << 64
"""Tagged Offsets are 64-bit (RFC 5041 4.2)."""


@dataclass(frozen=True)
class ProtectionDomain:
    """A Protection Domain identifier (RFC 5041 2.3, 8.2); locally defined."""

    pd_id: int


class Access(IntFlag):
    """Access rights of a memory region (RFC 5041 8.3.1 item 5, RFC 5040)."""

    NONE = 0
    LOCAL_READ = 0x1
    LOCAL_WRITE = 0x2
    REMOTE_READ = 0x4
    REMOTE_WRITE = 0x8


@dataclass
class MemoryRegion:
    """A registered buffer: the Tagged Offsets [base_to, base_to+length) of `stag`.

    `address` is the host address of the byte at `base_to`.  `stream` None
    means usable by every stream of the PD; otherwise only by that DDP
    Stream ID (RFC 5041 8.2).
    """

    stag: int
    pd: ProtectionDomain
    base_to: int
    length: int
    access: Access
    address: int
    stream: int | None = None
    valid: bool = True

    def host_address(self, to: int) -> int:
        """Host address of Tagged Offset `to` inside this region."""
        return self.address + (to - self.base_to)


class TaggedFault(Enum):
    """Why a tagged access was refused, in the order of RFC 5041 7.1 / 8.2.

    `ddp_error` is the RFC 5041 7.2 number where DDP defines one;
    `rdmap_error` the RFC 5040 Remote Protection Error number.
    """

    INVALID_STAG = (DdpError.INVALID_STAG, RdmapError.INVALID_STAG)
    STAG_NOT_ASSOCIATED = (DdpError.STAG_NOT_ASSOCIATED, RdmapError.STAG_NOT_ASSOCIATED)
    ACCESS_RIGHTS = (None, RdmapError.ACCESS_RIGHTS)
    BASE_OR_BOUNDS = (DdpError.BASE_OR_BOUNDS, RdmapError.BASE_OR_BOUNDS)
    TO_WRAP = (DdpError.TO_WRAP, RdmapError.TO_WRAP)

    @property
    def ddp_error(self) -> DdpError | None:
        return self.value[0]

    @property
    def rdmap_error(self) -> RdmapError:
        return self.value[1]


class MemoryTable:
    """Registered regions keyed by STag (RFC 5041 8.3.1 items 4-6)."""

    def __init__(self) -> None:
        self._regions: dict[int, MemoryRegion] = {}

    def register(self, region: MemoryRegion) -> MemoryRegion:
        """Add `region`; its STag must be free and its TO range inside 64 bits."""
        if region.stag in self._regions:
            raise EncodeError(f"STag 0x{region.stag:08x} is already registered")
        if not 0 <= region.stag < 1 << 32:
            raise EncodeError(f"STag {region.stag} does not fit in 32 bits")
        if region.length < 0 or region.base_to < 0 or region.base_to + region.length > TO_LIMIT:
            raise EncodeError("region TO range must lie within 64 bits")
        self._regions[region.stag] = region
        return region

    def lookup(self, stag: int) -> MemoryRegion | None:
        return self._regions.get(stag)

    def invalidate(self, stag: int) -> bool:
        """Revoke remote use of `stag` (8.3.1 item 6); False if unknown or already invalid."""
        region = self._regions.get(stag)
        if region is None or not region.valid:
            return False
        region.valid = False
        return True

    def deregister(self, stag: int) -> MemoryRegion:
        region = self._regions.pop(stag, None)
        if region is None:
            raise KeyError(stag)
        return region

    def __iter__(self):
        return iter(list(self._regions.values()))

    def check_tagged(
        self,
        stag: int,
        to: int,
        length: int,
        stream: int,
        pd: ProtectionDomain,
        need_access: Access,
    ) -> TaggedFault | None:
        """Check a tagged access of `length` bytes at `to`; None if allowed.

        Order (RFC 5041 7.1 tagged list, with 8.2 inside item 1):

        1. STag valid: registered and not invalidated -> INVALID_STAG;
           same PD and, if bound, same stream -> STAG_NOT_ASSOCIATED (8.2);
        2. the buffer allows this placement: access rights -> ACCESS_RIGHTS;
        3. TO >= base -> BASE_OR_BOUNDS;
        4. TO+length <= end -> BASE_OR_BOUNDS;
        5. the 64-bit sum TO+length does not wrap -> TO_WRAP.  A carry out
           of the 64-bit adder counts as a wrap, so a segment whose last
           byte is TO 2^64-1 is refused; that is the only way item 5 can
           fire after item 4 has passed.

        Zero-length accesses are not checked (RFC 5041 5.2).
        """
        if length == 0:
            return None
        region = self._regions.get(stag)
        if region is None or not region.valid:
            return TaggedFault.INVALID_STAG
        if (region.pd is not pd and region.pd != pd) or (region.stream is not None and region.stream != stream):
            return TaggedFault.STAG_NOT_ASSOCIATED
        needed = need_access._value_   # Flag containment (every right needed) on the values: `in` is Python's
        if region.access._value_ & needed != needed:
            return TaggedFault.ACCESS_RIGHTS
        if to < region.base_to:
            return TaggedFault.BASE_OR_BOUNDS
        if to + length > region.base_to + region.length:
            return TaggedFault.BASE_OR_BOUNDS
        if to + length >= TO_LIMIT:
            return TaggedFault.TO_WRAP
        return None


class SparseMemory:
    """Byte-addressable host memory with no preset size and a write log.

    Stored as 4 KiB pages created on first write, so a megabyte message
    costs a few hundred slice copies rather than a dict entry per byte.
    """

    PAGE = 4096

    def __init__(self, fill: int = 0) -> None:
        if not 0 <= fill <= 0xFF:
            raise EncodeError("fill must be a byte value")
        self.fill = fill
        self._pages: dict[int, bytearray] = {}
        self.writes: list[tuple[int, int]] = []
        """Every write as (address, length), in order."""

    def write(self, address: int, data: bytes) -> None:
        if address < 0:
            raise EncodeError("negative host address")
        if (type(data) is memoryview and type(data.obj) is bytes and data.itemsize == 1 and data.ndim == 1
                and data.contiguous):
            view = data   # over immutable bytes (a segment's payload in its packet): nothing to copy first
        else:
            view = memoryview(bytes(data))
        length = len(view)
        self.writes.append((address, length))
        pages, page_size = self._pages, self.PAGE
        page_number, start = divmod(address, page_size)
        if 0 < length and start + length <= page_size:   # within one page (most segments): one slice
            page = pages.get(page_number)
            if page is None:
                page = pages[page_number] = bytearray([self.fill]) * page_size
            page[start : start + length] = view
            return
        offset = 0
        while offset < length:   # page by page: the first from `start`, the others from their beginning
            page = pages.get(page_number)
            if page is None:
                page = pages[page_number] = bytearray([self.fill]) * page_size
            count = min(page_size - start, length - offset)
            page[start : start + count] = view[offset : offset + count]
            offset += count
            page_number, start = page_number + 1, 0

    def read(self, address: int, length: int) -> bytes:
        if address < 0 or length < 0:
            raise EncodeError("negative host address or length")
        pages, page_size = self._pages, self.PAGE
        page_number, start = divmod(address, page_size)
        if start + length <= page_size:   # within one page (most segments): one slice
            page = pages.get(page_number)
            return bytes(page[start : start + length]) if page is not None else bytes([self.fill]) * length
        out = bytearray()
        offset = 0
        while offset < length:   # page by page, as `write`
            count = min(page_size - start, length - offset)
            page = pages.get(page_number)
            out += page[start : start + count] if page is not None else bytes([self.fill]) * count
            offset += count
            page_number, start = page_number + 1, 0
        return bytes(out)

    def written_outside(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The logged writes not wholly inside one of `ranges` (address, length)."""
        outside = []
        for address, length in self.writes:
            if length == 0:
                continue
            if not any(start <= address and address + length <= start + size for start, size in ranges):
                outside.append((address, length))
        return outside
