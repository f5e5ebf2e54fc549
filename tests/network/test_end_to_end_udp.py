"""The driver's end-to-end program (`sim.e2e_program`: every RDMAP operation both ways, RDMA Write, RDMA Read and
the four Sends, at each size of the sweep from 0 B to 1 MiB, every byte placed and every completion checked,
then the graceful teardown) between two devices on real UDP sockets over loopback (RFC 6951)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from driver import open_device
from sim.e2e_program import MIB, end_to_end_checked


def test_every_rdmap_operation_both_ways_from_0_bytes_to_1_mib_over_loopback_udp() -> None:
    async def main():
        fabric = SimpleNamespace(devices=(open_device("udp:127.0.0.1:0"), open_device("udp:127.0.0.1:0")))
        try:
            return await end_to_end_checked(fabric, largest=MIB)
        finally:
            for device in fabric.devices:
                device.fabric.backend.close()

    report = asyncio.run(main())
    assert report.passed
    assert report.sizes[0] == 0 and report.sizes[-1] == MIB   # the sweep ran whole (MULPDU 1426 at MTU 1500)
    assert len(report.sizes) == 8
