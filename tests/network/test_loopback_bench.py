"""`rnic bench usrsctp --udp`: usrsctp and the software RNIC, each as two processes over loopback UDP (RFC 6951), at
each path MTU; and `rnic perf --mtu`, the path MTU of a device on a real transport.

The packets' sizes are read off the loopback interface with a packet socket (the kernel's view, not either
stack's), where this process may open one."""

from __future__ import annotations

import re
import socket
import struct
import threading
import time

import pytest

from sim import loopback_bench
from sim.cli import main
from sim.loopback_bench import LoopbackFailed, rnic_write, usrsctp_write
from tests.network.test_perf_processes import rnic

needs_usrsctp = pytest.mark.usefixtures("usrsctp_library")
ROW = re.compile(r"^ *(\d+) +(\d+) +(\d+) +([\d.e+]+) +([\d.e+]+) +([\d.]+) +([\d.]+) +([\d.]+)$", re.MULTILINE)


class LoopbackSniffer:
    """The total length of every IPv4 packet carrying UDP on ``lo`` while it runs (Linux AF_PACKET)."""

    def __init__(self, packet_socket: socket.socket) -> None:
        self._socket = packet_socket
        self._socket.bind(("lo", 0))
        self._socket.settimeout(0.05)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
        self.lengths: list[int] = []
        self._running = True
        self._thread = threading.Thread(target=self._sniff)
        self._thread.start()

    def _sniff(self) -> None:
        while self._running:
            try:
                frame, (_, _, kind, *_) = self._socket.recvfrom(1 << 16)
            except TimeoutError:
                continue
            if kind == socket.PACKET_OUTGOING:   # each packet on lo is seen twice: going out and coming in
                continue
            ip = frame[14:]
            if len(ip) >= 20 and ip[0] >> 4 == 4 and ip[9] == socket.IPPROTO_UDP:
                self.lengths.append(struct.unpack_from("!H", ip, 2)[0])

    @classmethod
    def start(cls) -> LoopbackSniffer | None:
        """A sniffer, or None where this process may not open a packet socket (it needs CAP_NET_RAW)."""
        try:
            return cls(socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0800)))
        except (PermissionError, AttributeError):
            return None

    def stop(self) -> list[int]:
        time.sleep(0.2)
        self._running = False
        self._thread.join()
        self._socket.close()
        return self.lengths


@needs_usrsctp
@pytest.mark.parametrize("write, mtu", [(usrsctp_write, 1500), (usrsctp_write, 9000), (rnic_write, 1500)],
                         ids=["usrsctp-1500", "usrsctp-9000", "rnic-1500"])
def test_each_stacks_packets_fill_the_path_mtu_and_never_pass_it(write, mtu) -> None:
    """The comparison is fair only if both stacks put the same packets on the wire: IPv4 packets (headers
    included) up to the path MTU, and the full ones exactly at it (the RNIC's at 9000: the perf test below)."""
    sniffer = LoopbackSniffer.start()
    if sniffer is None:
        pytest.skip("no packet socket here (it needs CAP_NET_RAW): the packets' sizes cannot be read off loopback")
    try:
        span = write(65536, 4, mtu)
    finally:
        lengths = sniffer.stop()
    assert span.wall > 0
    assert lengths and max(lengths) == mtu


@needs_usrsctp
@pytest.mark.slow   # eight processes
def test_a_row_per_mtu_and_size_with_each_rate_and_their_ratio(capsys) -> None:
    assert main(["bench", "usrsctp", "--udp", "--sizes", "4096", "65536", "--iters", "4", "--mtus", "1500",
                 "9000"]) == 0
    out = capsys.readouterr().out
    rows = ROW.findall(out)
    assert [(int(mtu), int(size), int(iters)) for mtu, size, iters, *_ in rows] == [
        (1500, 4096, 4), (1500, 65536, 4), (9000, 4096, 4), (9000, 65536, 4)]
    for *_, usrsctp, rnic_rate, ratio, _, _ in rows:
        assert float(usrsctp) > 0 and float(rnic_rate) > 0
        assert float(ratio) == pytest.approx(float(rnic_rate) / float(usrsctp), rel=2e-3, abs=1e-3)
    assert "load average before the runs" in out


@needs_usrsctp
def test_usrsctp_bytes_other_than_those_sent_fail_the_measurement(monkeypatch) -> None:
    """The receiving process hashes what it reads; a hash other than that of the messages sent is an error, not
    a figure (here the expected messages are made one byte longer than those sent)."""
    payload = loopback_bench._payload
    monkeypatch.setattr(loopback_bench, "_payload", lambda size, index: payload(size, index) + b"\x00")
    with pytest.raises(LoopbackFailed, match="other bytes"):
        usrsctp_write(4096, 2, 1500)


@pytest.mark.parametrize("arguments, message", [
    (["--mtus", "9000"], "--mtus: only with --udp"),
    (["--udp", "--profile"], "--profile: not with --udp"),
    (["--udp", "--mtus", "500"], "--mtus: each within"),
])
def test_its_options_out_of_place_are_usage_errors(arguments, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "usrsctp", *arguments])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_without_libusrsctp_the_udp_runs_name_the_package(monkeypatch, capsys) -> None:
    from sim.usrsctp import UsrsctpUnavailable

    def unavailable() -> None:
        raise UsrsctpUnavailable("libusrsctp is not installed: apt-get install libusrsctp-dev")

    monkeypatch.setattr("sim.commands.bench_usrsctp.check_installed", unavailable)
    assert main(["bench", "usrsctp", "--udp", "--sizes", "1434", "--iters", "1"]) == 1
    assert "libusrsctp-dev" in capsys.readouterr().err


def test_perf_between_processes_at_a_jumbo_path_mtu() -> None:
    """`rnic perf --mtu 9000` on both ends: the client's header names it, every byte lands, and the packets
    on loopback reach 9000 bytes where they can be read."""
    sniffer = LoopbackSniffer.start()
    server = rnic("perf", "--server", "--bind", "127.0.0.1:0", "--mtu", "9000")
    try:
        first = server.stdout.readline()
        port = int(re.search(r"udp:127\.0\.0\.1:(\d+), waiting", first).group(1))
        client = rnic("perf", "--client", f"127.0.0.1:{port}", "--mtu", "9000", "--test", "write_bw", "--sizes",
                      "65536", "--iters", "4")
        out, err = client.communicate(timeout=120)
        served, server_err = server.communicate(timeout=30)
    finally:
        server.kill()
        lengths = sniffer.stop() if sniffer is not None else None
    assert client.returncode == 0, err
    assert server.returncode == 0, server_err
    assert "path MTU 9000" in out.splitlines()[0]
    assert served.rstrip().endswith("every byte landed as sent")
    if lengths is not None:
        assert max(lengths) == 9000


@pytest.mark.parametrize("arguments, message", [
    (["--mtu", "9000"], "--mtu: only with --server or --client"),
    (["--server", "--mtu", "100"], "--mtu: 100 is not within"),
    (["--server", "--bind", "board:/dev/null@10.0.0.2", "--mtu", "9000"], "--mtu: not with a board"),
])
def test_perf_mtu_out_of_place_is_a_usage_error(arguments, message) -> None:
    process = rnic("perf", *arguments)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2 and message in err, err

