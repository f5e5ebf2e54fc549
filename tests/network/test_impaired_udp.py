"""Devices on real UDP sockets through an impairing relay (`sim.udp_impairment`: 1 % loss, 1 % duplication, 1 %
reordering; this machine's kernel has no netem): the driver's end-to-end program, every RDMAP operation both ways
with every byte and completion checked, and `rnic perf --server` / `--client` as processes (slow)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from driver import open_device
from sim.e2e_program import KIB, end_to_end_checked
from sim.udp_impairment import Impairment, ImpairingRelay

ROOT = Path(__file__).resolve().parents[2]
IMPAIRED = Impairment(loss=0.01, duplication=0.01, reordering=0.01, seed=5)
SHORT_TIMERS = dict(rto_initial=0.3, rto_min=0.05, rto_max=0.5, association_max_retrans=60, path_max_retrans=60)
"""RFC 4960 15's RTO.Min of 1 s is for the Internet; on loopback a lost chunk is found in tens of milliseconds.
With RTO.Max at 0.5 s, RFC 4960 15's Association.Max.Retrans of 10 gives up after some 5 s without a SACK, which a
busy 2-core machine can starve a process of; 60 gives it 30 s."""


class Behind:
    """A device reached at another address, the relay's: every call is the device's but `address`."""

    def __init__(self, device, address: tuple[str, int]) -> None:
        self._device, self.address = device, address

    def __getattr__(self, name: str):
        return getattr(self._device, name)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_every_rdmap_operation_both_ways_through_loss_duplication_and_reordering() -> None:
    async def main():
        port = free_port()
        server = open_device(f"udp:127.0.0.1:{port}", **SHORT_TIMERS)
        client = open_device("udp:127.0.0.1:0", **SHORT_TIMERS)
        relay = ImpairingRelay(("127.0.0.2", port), ("127.0.0.1", port), IMPAIRED)
        await relay.start()
        try:
            report = await end_to_end_checked(SimpleNamespace(devices=(client, Behind(server, relay.listen))),
                                              largest=64 * KIB)
        finally:
            relay.close()
            for device in (server, client):
                device.fabric.backend.close()
        return report, relay.counters

    report, counters = asyncio.run(main())
    assert report.passed and report.sizes[-1] == 64 * KIB
    assert counters.dropped and counters.duplicated and counters.reordered   # the impairments happened


@pytest.mark.slow
def test_rnic_perf_between_processes_through_loss_duplication_and_reordering() -> None:
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}

    def start(*arguments: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", *arguments], cwd=ROOT, env=environment, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    server = start("sim.cli", "perf", "--server", "--bind", f"127.0.0.1:{port}")
    relay = start("sim.udp_impairment", "--listen", f"127.0.0.2:{port}", "--to", f"127.0.0.1:{port}",
                  "--loss", "0.01", "--duplication", "0.01", "--reordering", "0.01")
    try:
        assert server.stdout.readline().endswith("waiting for a client\n")
        assert relay.stdout.readline().startswith("relaying")
        client = start("sim.cli", "perf", "--client", f"127.0.0.2:{port}", "--sizes", "64", "65536", "1048576",
                       "--iters", "5")
        out, err = client.communicate(timeout=600)
        served, _ = server.communicate(timeout=60)
    finally:
        for process in (server, relay):
            process.kill()
    assert client.returncode == 0, err
    assert server.returncode == 0
    assert len(re.findall(r"landed exactly", served)) == 4 * 3
