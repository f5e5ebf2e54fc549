"""Tests for model.ddp.memory: registration, tagged checks (RFC 5041 7.1, 8.2, 8.3.1), SparseMemory."""

import pytest

from model.errors import DdpError, EncodeError, RdmapError
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory, TaggedFault

PD = ProtectionDomain(1)
OTHER_PD = ProtectionDomain(2)
RW = Access.REMOTE_READ | Access.REMOTE_WRITE


def table(**overrides):
    fields = dict(stag=0x100, pd=PD, base_to=1000, length=100, access=RW, address=0x5000)
    fields.update(overrides)
    t = MemoryTable()
    t.register(MemoryRegion(**fields))
    return t


@pytest.mark.parametrize(
    "stag, to, length, stream, pd, access, expected",
    [
        (0x100, 1000, 100, 0, PD, Access.REMOTE_WRITE, None),
        (0x101, 1000, 10, 0, PD, Access.REMOTE_WRITE, TaggedFault.INVALID_STAG),
        (0x100, 1000, 10, 0, OTHER_PD, Access.REMOTE_WRITE, TaggedFault.STAG_NOT_ASSOCIATED),
        (0x100, 999, 10, 0, PD, Access.REMOTE_WRITE, TaggedFault.BASE_OR_BOUNDS),
        (0x100, 1050, 51, 0, PD, Access.REMOTE_WRITE, TaggedFault.BASE_OR_BOUNDS),
        (0x100, 1000, 10, 0, PD, Access.LOCAL_WRITE, TaggedFault.ACCESS_RIGHTS),
    ],
)
def test_check_tagged_rfc5041_7_1_and_8_2(stag, to, length, stream, pd, access, expected):
    assert table().check_tagged(stag, to, length, stream, pd, access) is expected


def test_stream_bound_stag_rfc5041_8_3_1_item_2():
    """An STag limited to one DDP Stream cannot be used by another."""
    t = table(stream=3)
    assert t.check_tagged(0x100, 1000, 1, 3, PD, Access.REMOTE_WRITE) is None
    assert t.check_tagged(0x100, 1000, 1, 4, PD, Access.REMOTE_WRITE) is TaggedFault.STAG_NOT_ASSOCIATED


def test_check_order_invalid_before_pd_before_rights_before_bounds_rfc5041_7_1():
    t = table(access=Access.NONE)
    assert t.check_tagged(0x100, 0, 10**6, 0, OTHER_PD, Access.REMOTE_WRITE) is TaggedFault.STAG_NOT_ASSOCIATED
    assert t.check_tagged(0x100, 0, 10**6, 0, PD, Access.REMOTE_WRITE) is TaggedFault.ACCESS_RIGHTS


def test_to_wrap_rfc5041_7_1_item_5():
    """A 64-bit sum of TO and length that carries out of 64 bits is a wrap."""
    t = table(base_to=2**64 - 100, length=100)
    assert t.check_tagged(0x100, 2**64 - 100, 50, 0, PD, Access.REMOTE_WRITE) is None
    assert t.check_tagged(0x100, 2**64 - 50, 50, 0, PD, Access.REMOTE_WRITE) is TaggedFault.TO_WRAP
    assert TaggedFault.TO_WRAP.ddp_error is DdpError.TO_WRAP
    assert TaggedFault.TO_WRAP.rdmap_error is RdmapError.TO_WRAP


def test_zero_length_not_checked_rfc5041_5_2():
    assert MemoryTable().check_tagged(0xDEAD, 2**64 - 1, 0, 9, OTHER_PD, Access.REMOTE_WRITE) is None


def test_invalidate_revokes_access_rfc5041_8_3_1_item_6():
    t = table()
    assert t.invalidate(0x100) is True
    assert t.check_tagged(0x100, 1000, 1, 0, PD, Access.REMOTE_WRITE) is TaggedFault.INVALID_STAG
    assert t.invalidate(0x100) is False
    t.deregister(0x100)
    assert t.lookup(0x100) is None
    with pytest.raises(KeyError):
        t.deregister(0x100)


def test_register_rejects_duplicates_and_ranges_past_64_bits():
    t = table()
    with pytest.raises(EncodeError):
        t.register(MemoryRegion(0x100, PD, 0, 1, RW, 0))
    with pytest.raises(EncodeError):
        t.register(MemoryRegion(0x200, PD, 2**64 - 1, 2, RW, 0))


def test_sparse_memory_fill_and_write_log():
    memory = SparseMemory(fill=0xAA)
    assert memory.read(10**12, 3) == b"\xaa\xaa\xaa"
    memory.write(100, b"xyz")
    assert memory.read(99, 5) == b"\xaaxyz\xaa"
    assert memory.writes == [(100, 3)]
    assert memory.written_outside([(100, 3)]) == []
    assert memory.written_outside([(101, 10)]) == [(100, 3)]
