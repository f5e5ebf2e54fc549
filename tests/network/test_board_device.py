"""The board as one device of its own (`driver.open_device("board:CONTROL@ADDRESS[:PORT]")`,
`driver.backends.board_network`): its spec and options refused with typed errors; ARP answered and asked through
the board; and the end-to-end runs, with the board's peer in another process.

The end-to-end arrangement: the model board (`sim.model_board_server`) serves its control link on a TCP socket
and puts its Ethernet on one end of a veth pair in a network namespace; the board's host is a process of its own
in that namespace, opening ``board:socket://127.0.0.1:PORT@ADDRESS``; the peer is a third process in a second
namespace, at the veth's other end, a device on raw Ethernet frames (``eth:eth0:ADDRESS``).  Nothing joins the
board's host and its peer but the board's Ethernet.  The test makes the namespaces itself (`ip netns`, as root)
and is skipped, saying why, where it may not; the rest runs anywhere, on the model board in this process.
"""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from driver import CMEventType, InvalidArgument, TransportError, open_device
from driver.backends.board_network import ARP_TRIES, BoardNetworkFabric, parse_board_spec
from driver.device import Fabric
from driver.link import LinkError
from model.rnic.link import Side
from model.rnic.pair import IPS, MACS
from sim.board_model import ModelBoard

ROOT = Path(__file__).resolve().parents[2]
TAG = f"{os.getpid() % 100000}"
NAMESPACES = (f"rnic{TAG}b", f"rnic{TAG}p")
"""The board's namespace (the model board and its host) and the peer's."""
ADDRESSES = ("10.198.0.1", "10.198.0.2")
"""The board's IPv4 address and the peer's: neither interface has one, each device is the host at its address."""
PORT = 9899
ARP_FRAME = struct.Struct("!6s6sHHHBBH6s4s6s4s")
"""RFC 826 in an Ethernet frame: destination, source, ethertype 0x0806, then the ARP packet."""


# -- the spec and the options ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, problem", [
    ("board:", "control link is missing"),
    ("board:@10.0.0.1", "control link is missing"),
    ("board:/dev/ttyUSB1", "control link is missing"),
    ("board:/dev/ttyUSB1@", "own IPv4 address"),
    ("board:/dev/ttyUSB1@10.0.0.1:port", "not a number"),
    ("board:/dev/ttyUSB1@10.0.0.1:0", "not within 1..65535"),
    ("board:/dev/ttyUSB1@10.0.0.1:65536", "not within 1..65535"),
    ("board:socket://127.0.0.1:1@224.0.0.1", "cannot be the board's own address"),
    ("board:socket://127.0.0.1:1@0.0.0.0", "cannot be the board's own address"),
])
def test_a_bad_board_spec_is_a_transport_error(spec, problem):
    with pytest.raises(TransportError, match=problem):
        open_device(spec)


def test_the_spec_names_the_control_link_the_address_and_the_port():
    spec = parse_board_spec("board:socket://127.0.0.1:7000@192.0.2.5:5001")
    assert (spec.control, spec.host, spec.port) == ("socket://127.0.0.1:7000", "192.0.2.5", 5001)
    assert parse_board_spec("board:/dev/ttyUSB1@192.0.2.5").port == 9899   # RFC 6951's port, as the other specs


@pytest.mark.parametrize("options, name", [({"udp": True}, "udp"), ({"seed": 1}, "seed"),
                                           ({"ethernet": "eth1"}, "ethernet"), ({"mac": b"\2" * 6}, "mac"),
                                           ({"engine_transport": True}, "engine_transport"),
                                           ({"baud": 0}, "baud")])
def test_options_a_board_device_does_not_take_are_refused(options, name):
    with pytest.raises(InvalidArgument, match=name):
        open_device("board:/dev/ttyUSB1@10.0.0.1", **options)


def test_another_host_is_refused():
    with pytest.raises(InvalidArgument, match="host"):
        open_device("board:/dev/ttyUSB1@10.0.0.1", host=lambda config, rng: None)


def test_a_control_link_that_cannot_be_opened_is_a_link_error():
    with pytest.raises(LinkError, match="control link"):
        open_device("board:/nonexistent/ttyUSB9@10.0.0.1")
    with socket.socket() as unused:           # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(LinkError, match="control link"):
        open_device(f"board:socket://127.0.0.1:{port}@10.0.0.1")


# -- ARP through the board, on the model board in this process ------------------------------------------------


def _board_device(ip: str = "192.0.2.7", **options) -> tuple[ModelBoard, Fabric]:
    board = ModelBoard(MACS[Side.A], IPS[Side.A])
    return board, Fabric(BoardNetworkFabric(board.control, ip, PORT, "board", **options))


def _arp(operation: int, sender_mac: bytes, sender_ip: str, target_mac: bytes, target_ip: str,
         destination: bytes) -> bytes:
    return ARP_FRAME.pack(destination, sender_mac, 0x0806, 1, 0x0800, 6, 4, operation, sender_mac,
                          socket.inet_aton(sender_ip), target_mac, socket.inet_aton(target_ip))


def test_the_board_answers_arp_for_its_address_out_of_its_own_mac():
    """RFC 826: a request for the board's address is answered (opcode 2) from the board's MAC, 02:00 and its
    address, to the asker; a request for another address is not; neither reaches the host as a frame."""
    board, fabric = _board_device("192.0.2.7")
    asker = bytes.fromhex("0a0000000042")
    board.port.send(_arp(1, asker, "192.0.2.9", bytes(6), "192.0.2.8", b"\xff" * 6))   # another address
    board.port.send(_arp(1, asker, "192.0.2.9", bytes(6), "192.0.2.7", b"\xff" * 6))
    fabric.backend.service()
    replies = [frame for frame in board.port.receive() if frame[12:14] == b"\x08\x06"]
    assert len(replies) == 1
    (destination, source, _, hardware, protocol, _, _, operation, sender_mac, sender_ip, target_mac,
     target_ip) = ARP_FRAME.unpack(replies[0][:ARP_FRAME.size])
    board_mac = bytes.fromhex("0200c0000207")
    assert (destination, source, hardware, protocol, operation) == (asker, board_mac, 1, 0x0800, 2)
    assert (sender_mac, sender_ip, target_mac, target_ip) == (board_mac, socket.inet_aton("192.0.2.7"), asker,
                                                              socket.inet_aton("192.0.2.9"))
    assert board.rx.config.local_mac == board_mac   # the board's engines were given the same MAC


def test_frames_not_for_the_boards_host_are_dropped_and_counted():
    """What the receive engine passes up and is neither ARP nor the host's (an IPv6 multicast, an IPv4 broadcast
    with a bad header checksum, a runt) is counted and dropped by the host, never raised (on a LAN the board
    sees such frames all the time)."""
    board, fabric = _board_device()
    other = bytes.fromhex("0a0000000042")
    frames = [bytes.fromhex("333300000001") + other + b"\x86\xdd" + bytes(60),
              b"\xff" * 6 + other + b"\x08\x00" + bytes.fromhex("4500001c0000000040110000c0000209ffffffff") + bytes(8),
              b"\x01" * 20]
    for frame in frames:
        board.port.send(frame)
    fabric.backend.service()
    statistics = fabric.backend.host.statistics
    assert statistics.frames_received == len(frames)
    assert (statistics.dropped_malformed + statistics.dropped_bad_checksum + statistics.dropped_misaddressed
            == len(frames))
    assert fabric.backend.host.association is None   # nothing began an association


def test_a_connect_nobody_answers_arp_for_is_unreachable():
    """The board asks for its peer's MAC once a second, `ARP_TRIES` times (the fabric's clock at ten times the wall
    clock's rate), then the connection is UNREACHABLE; no INIT went out (RFC 4960 5.1: nothing to send it to)."""
    board, fabric = _board_device(time_scale=10.0)
    device = fabric.devices[0]

    async def main():
        cm_id = device.create_id()
        cm_id.create_qp(device.alloc_pd(), device.create_cq())
        cm_id.connect(("192.0.2.50", PORT))
        return await cm_id.get_cm_event(timeout=30.0)

    event = fabric.backend.run(main)
    assert event.event_type is CMEventType.UNREACHABLE
    frames = board.port.receive()
    requests = [ARP_FRAME.unpack(frame[:ARP_FRAME.size]) for frame in frames if frame[12:14] == b"\x08\x06"]
    assert len(requests) == ARP_TRIES == len(frames)
    assert all(request[0] == b"\xff" * 6 and request[7] == 1 and request[11] == socket.inet_aton("192.0.2.50")
               for request in requests)


# -- the board and a peer in another process ------------------------------------------------------------------


def _ip(*arguments: str) -> None:
    subprocess.run(["ip", *arguments], check=True, capture_output=True, text=True)


def _remove() -> None:
    for namespace in NAMESPACES:
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


@pytest.fixture(scope="module")
def namespaces():
    """Two namespaces joined by one veth pair, each end ``eth0``, up, without an IPv4 address (each device is the
    host at its address) and without IPv6 (no router solicitations on the board's wire)."""
    try:
        for namespace in NAMESPACES:
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("link", "add", f"rnic{TAG}x", "netns", NAMESPACES[0], "type", "veth", "peer", "name", f"rnic{TAG}y",
            "netns", NAMESPACES[1])
        for namespace, name in zip(NAMESPACES, (f"rnic{TAG}x", f"rnic{TAG}y")):
            _ip("-n", namespace, "link", "set", name, "name", "eth0")
            subprocess.run(["ip", "netns", "exec", namespace, "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1"],
                           capture_output=True)
            _ip("-n", namespace, "link", "set", "eth0", "up")
    except (OSError, subprocess.CalledProcessError) as error:
        _remove()
        pytest.skip(f"cannot make network namespaces here: {getattr(error, 'stderr', '') or error}")
    yield
    _remove()


def _start(namespace: str, *arguments: str) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, "-m", *arguments], cwd=ROOT,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


@pytest.fixture
def model_board(namespaces):
    """The model board in the board's namespace, its Ethernet on eth0; its control link's URL."""
    server = _start(NAMESPACES[0], "sim.model_board_server", "eth0")
    line = server.stdout.readline()
    match = re.match(r"serving (socket://\S+),", line)
    if match is None:
        server.kill()
        raise AssertionError(f"the model board did not serve: {line!r} {server.stderr.read()}")
    yield match.group(1)
    server.terminate()
    out, err = server.communicate(timeout=30)
    assert server.returncode == 0, err
    frames_in, frames_out = map(int, re.search(r"frames in (\d+) out (\d+)", out).groups())
    assert frames_in > 0 and frames_out > 0


def _run_pair(server: tuple[str, ...], ready: str, client: tuple[str, ...]) -> tuple[str, str]:
    """Start `server` (its namespace, then its module and arguments), wait for its first line to end with `ready`,
    run `client` to its end, then wait for the server's; both must end with 0.  Their outputs: the client's, the
    server's (its first line too)."""
    process = _start(*server)
    try:
        first = process.stdout.readline()
        assert first.endswith(ready), process.stderr.read()
        other = _start(*client)
        client_out, client_err = other.communicate(timeout=180)
        server_out, server_err = process.communicate(timeout=60)
        server_out = first + server_out
    finally:
        process.kill()
    assert other.returncode == 0, client_err
    assert process.returncode == 0, server_err
    return client_out, server_out


#: Each side's bytes, chosen here: 1500 bytes of Write span two DDP segments at MTU 1500 (RFC 5043 9).
BOARD_BYTES = {"write": b"board writes " * 115 + b"12345", "read": b"the board's bytes to read", "send": b"sent by the board"}
PEER_BYTES = {"write": b"peer writes" + bytes(range(256)) * 2, "read": b"peer offers these " * 40, "send": b"the peer's Send"}


def _arguments(side: dict[str, bytes]) -> list[str]:
    return [side[name].hex() for name in ("write", "read", "send")]


@pytest.mark.parametrize("board_role", ["connect", "listen"])
def test_write_read_and_send_both_ways_between_the_board_and_a_peer_process(model_board, board_role):
    """RFC 5040 5.1-5.3 each way between the board (its host in one process) and a peer (another process, on
    raw Ethernet frames); the bytes each side finds are the other side's, as chosen here; the connector
    disconnects (RFC 5043 6.2) and both associations shut down gracefully (RFC 4960 9.2).  The board connecting
    asks ARP for its peer; listening, it answers the peer's request."""
    board_spec, peer_spec = f"board:{model_board}@{ADDRESSES[0]}", f"eth:eth0:{ADDRESSES[1]}:{PORT}"
    listen_ns, listen_spec, listen_bytes, connect_ns, connect_spec, connect_bytes, server_address = (
        (NAMESPACES[1], peer_spec, PEER_BYTES, NAMESPACES[0], board_spec, BOARD_BYTES, ADDRESSES[1])
        if board_role == "connect" else
        (NAMESPACES[0], f"{board_spec}:{PORT}", BOARD_BYTES, NAMESPACES[1], peer_spec, PEER_BYTES, ADDRESSES[0]))
    connected_out, listened_out = _run_pair(
        (listen_ns, "tests.network.exchange_program", "listen", listen_spec, *_arguments(listen_bytes)),
        "listening\n",
        (connect_ns, "tests.network.exchange_program", "connect", connect_spec, f"{server_address}:{PORT}",
         *_arguments(connect_bytes)))
    reports = {"connect": json.loads(connected_out.splitlines()[-1]), "listen": json.loads(listened_out.splitlines()[-1])}
    for role, other in (("connect", listen_bytes), ("listen", connect_bytes)):
        report = reports[role]
        assert bytes.fromhex(report["written"]) == other["write"], role
        assert bytes.fromhex(report["read"]) == other["read"], role
        assert bytes.fromhex(report["received"]) == other["send"], role
        assert report["completions"] == [[1, "SUCCESS"], [10, "SUCCESS"], [11, "SUCCESS"], [12, "SUCCESS"]], role
        assert report["disconnected"] == "DISCONNECTED", role
        assert report["end"] == "CLOSED", role   # SHUTDOWN, SHUTDOWN ACK, SHUTDOWN COMPLETE (RFC 4960 9.2)


@pytest.mark.parametrize("board_is", ["client", "server"])
def test_rnic_perf_between_the_board_and_a_peer_process(model_board, board_is):
    """`rnic perf --bind board:...` against `rnic perf` on raw Ethernet in the peer's namespace, the board the
    client (it Writes and Sends, the server Reads from it) or the server (the sink: the peer Writes and Sends
    into it, it Reads from the peer), pings both ways (RFC 5040 5.1-5.3); the server checks every byte that lands
    on it against the pattern both compute, and each side ends with 0."""
    board = (NAMESPACES[0], f"board:{model_board}@{ADDRESSES[0]}:{PORT}")
    peer = (NAMESPACES[1], f"eth:eth0:{ADDRESSES[1]}:{PORT}")
    (server_ns, server_bind), (client_ns, client_bind) = (peer, board) if board_is == "client" else (board, peer)
    server_address = ADDRESSES[1] if board_is == "client" else ADDRESSES[0]
    out, served = _run_pair(
        (server_ns, "sim.cli", "perf", "--server", "--bind", server_bind), "waiting for a client\n",
        (client_ns, "sim.cli", "perf", "--client", f"{server_address}:{PORT}", "--bind", client_bind, "--sizes", "64",
         "1500", "--iters", "3"))
    assert client_bind in out if board_is == "client" else server_bind in served   # the board is that side's device
    assert len(re.findall(r"landed exactly", served)) == 4 * 2   # four tests, two sizes
