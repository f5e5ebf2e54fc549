"""`rnic perf --server` and `--client` in two network namespaces joined through `sim.ethernet_impairment` (an
impairing bridge between two veth pairs: the kernel here has no netem), over UDP (RFC 6951) and over raw IPv4,
clean and at 1 % loss, duplication and reordering.  The test makes the namespaces and links itself (`ip netns`,
`ip link`, as root) and is skipped, saying why, where it may not."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TAG = f"{os.getpid() % 100000}"
NAMESPACES = (f"rnic{TAG}c", f"rnic{TAG}s")
"""The client's namespace and the server's."""
INSIDE = ("eth0", "eth0")
OUTSIDE = (f"rnic{TAG}c", f"rnic{TAG}s")
"""Each namespace's veth end, and its peer in this namespace, which the bridge joins."""
ADDRESSES = ("10.197.0.1", "10.197.0.2")
PORT = 9899


def _ip(*arguments: str) -> None:
    subprocess.run(["ip", *arguments], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def namespaces():
    try:
        for namespace, inside, outside, address in zip(NAMESPACES, INSIDE, OUTSIDE, ADDRESSES):
            _ip("netns", "add", namespace)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside, "netns", namespace)
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", inside)
            _ip("-n", namespace, "link", "set", inside, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("link", "set", outside, "up")
    except (OSError, subprocess.CalledProcessError) as error:
        _remove()
        pytest.skip(f"cannot make network namespaces here: {getattr(error, 'stderr', '') or error}")
    yield
    _remove()


def _remove() -> None:
    for namespace, outside in zip(NAMESPACES, OUTSIDE):
        subprocess.run(["ip", "link", "del", outside], capture_output=True)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def _start(namespace: str | None, *arguments: str) -> subprocess.Popen:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    return subprocess.Popen([*prefix, sys.executable, "-m", *arguments], cwd=ROOT, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


@pytest.mark.parametrize("impaired", [False, True], ids=["clean", "impaired"])
@pytest.mark.parametrize("transport", ["udp", "ip"])
def test_rnic_perf_between_two_namespaces(namespaces, transport: str, impaired: bool) -> None:
    rate = "0.01" if impaired else "0"
    bridge = _start(None, "sim.ethernet_impairment", *OUTSIDE, "--loss", rate, "--duplication", rate,
                    "--reordering", rate)
    server = _start(NAMESPACES[1], "sim.cli", "perf", "--server", "--bind", f"{transport}:{ADDRESSES[1]}:{PORT}")
    try:
        assert bridge.stdout.readline().startswith("bridging"), bridge.stderr.read()
        assert server.stdout.readline().endswith("waiting for a client\n"), server.stderr.read()
        bind = ["--bind", f"ip:{ADDRESSES[0]}"] if transport == "ip" else []
        client = _start(NAMESPACES[0], "sim.cli", "perf", "--client", f"{ADDRESSES[1]}:{PORT}", *bind,
                        "--sizes", "64", "65536", "--iters", "3")
        out, err = client.communicate(timeout=300)
        served, server_err = server.communicate(timeout=60)
    finally:
        server.kill()
        bridge.terminate()
        bridged, _ = bridge.communicate(timeout=30)
    assert client.returncode == 0, err
    assert server.returncode == 0, server_err
    counts = dict(zip(*[iter(bridged.split()[-8:])] * 2))
    assert int(counts["relayed"]) > 0
    if impaired:   # the impairments happened: the bytes landed exactly all the same
        assert all(int(counts[name]) > 0 for name in ("dropped", "duplicated", "reordered")), bridged
    assert f"{transport}:0.0.0.0" in out or f"{transport}:{ADDRESSES[0]}" in out
    assert len(re.findall(r"landed exactly", served)) == 4 * 2
