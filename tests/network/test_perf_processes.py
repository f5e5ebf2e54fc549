"""`rnic perf --server` and `rnic perf --client` as two processes over loopback UDP (RFC 6951): the tables the
client prints, one row per test and size asked, and the server's verdict that every byte landed as sent."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIZES = (2, 4096, 65536)
ITERS = 3
TITLES = {"write_bw": "RDMA Write bandwidth (ib_write_bw)", "send_bw": "Send bandwidth (ib_send_bw)",
          "send_lat": "Send latency (ib_send_lat)", "read_bw": "RDMA Read bandwidth (ib_read_bw)"}


def rnic(*arguments: str, **options) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "sim.cli", *arguments], cwd=ROOT, env=environment, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)


def start_server() -> tuple[subprocess.Popen, int]:
    """A server on a free UDP port of 127.0.0.1; the port its first line names."""
    server = rnic("perf", "--server", "--bind", "127.0.0.1:0")
    first = server.stdout.readline()
    match = re.search(r"udp:127\.0\.0\.1:(\d+), waiting for a client", first)
    assert match, first + server.stderr.read()
    return server, int(match.group(1))


def test_a_server_and_a_client_process_measure_every_test_and_every_byte_lands() -> None:
    server, port = start_server()
    try:
        client = rnic("perf", "--client", f"127.0.0.1:{port}", "--sizes", *map(str, SIZES), "--iters", str(ITERS))
        out, err = client.communicate(timeout=120)
        served, server_err = server.communicate(timeout=30)
    finally:
        server.kill()
    assert client.returncode == 0, err
    assert server.returncode == 0, server_err
    tables = out.split("\n\n")[1:]
    assert [table.splitlines()[0].split(":")[0] for table in tables] == list(TITLES.values())
    for table in tables:
        rows = [line.split() for line in table.splitlines()[3:]]
        assert [(int(row[0]), int(row[1])) for row in rows] == [(size, ITERS) for size in SIZES]
        assert all(float(value) > 0 for row in rows for value in row[2:])
    verdicts = re.findall(r"^  (\w+) +(\d+) bytes x (\d+): (.*)$", served, re.MULTILINE)
    assert verdicts == [(test, str(size), str(ITERS), "landed exactly") for test in TITLES for size in SIZES]
    assert served.rstrip().endswith("every byte landed as sent")


def test_the_server_refuses_the_clients_options() -> None:
    server = rnic("perf", "--server", "--sizes", "64")
    _, err = server.communicate(timeout=60)
    assert server.returncode == 2 and "the client chooses them" in err
