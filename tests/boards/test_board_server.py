"""The simulated board (sim/board_server.py) as a host program sees it: the control link through pyserial on its
pty (driver/link.py's ``open_serial_link``), frames on its TCP socket, both ways; then the client leaves and the
simulation ends, passed."""

import random
import socket
import struct

import pytest

from boards.ecpix5_top import HOST_MEMORY_BYTES
from driver.link import open_serial_link
from sim.board_server import simulated_board

#: The link's waits sized for the simulation, which runs some ten thousand times slower than the board: its UART
#: (25 Mbaud simulated) moves about 1400 bits a second of wall clock on one core of its own, fewer on a busy
#: machine; a request that waits for 10 bits a byte at 400 baud has room to spare.
BAUD, LATENCY = 400, 2.0
LENGTH = struct.Struct(">I")
BOARD_MAC, HOST_MAC = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")
#: An ARP request from the host for 10.0.0.2, broadcast (RFC 826): not the engine's, so passed up whole.
ARP_REQUEST = (b"\xff" * 6 + HOST_MAC + b"\x08\x06" + bytes.fromhex("0001080006040001") + HOST_MAC
               + bytes([10, 0, 0, 1]) + bytes(6) + bytes([10, 0, 0, 2]))


def send_frame(ethernet: socket.socket, frame: bytes) -> None:
    ethernet.sendall(LENGTH.pack(len(frame)) + frame)


def _exactly(ethernet: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = ethernet.recv(size - len(data))
        assert chunk, "the board's Ethernet socket closed"
        data += chunk
    return data


def receive_frame(ethernet: socket.socket) -> bytes:
    (length,) = LENGTH.unpack(_exactly(ethernet, LENGTH.size))
    return _exactly(ethernet, length)


def pop_exception(link, attempts: int = 50):
    for _ in range(attempts):
        packet = link.pop_exception()
        if packet is not None:
            return packet
    raise AssertionError(f"no exception packet after {attempts} pops")


@pytest.mark.cocotb
@pytest.mark.slow   # the board's Verilator build alone is minutes: more than the default suite can spend
def test_a_host_reaches_the_simulated_board(tmp_path):
    rng = random.Random(3)
    with simulated_board(tmp_path) as board, socket.create_connection(board.ethernet, timeout=120) as ethernet:
        link = open_serial_link(board.serial, baud=BAUD, latency=LATENCY)
        try:
            assert link.info.memory_bytes == HOST_MEMORY_BYTES
            data = rng.randbytes(300)
            link.write_memory(0x2000, data)
            assert link.read_memory(0x2000, len(data)) == data

            raw = HOST_MAC + BOARD_MAC + b"\x88\xb5" + rng.randbytes(20)
            link.send_frame(raw)
            assert receive_frame(ethernet) == raw + bytes(60 - len(raw))   # padded by the MAC, its FCS checked

            send_frame(ethernet, ARP_REQUEST)
            packet = pop_exception(link)
            assert packet.data == ARP_REQUEST + bytes(60 - len(ARP_REQUEST)) and not packet.truncated

            counters = link.mac_counters()
            # One frame each way, whatever the link repeated: on a loaded machine the simulation falls behind the
            # link's waits and a request is sent again (`link.client.retried`); the board recognizes it by its
            # sequence number and does not send its frame twice (driver/link.py).
            assert (counters["rx_frames"], counters["tx_frames"], counters["rx_fcs_errors"]) == (1, 1, 0)
        finally:
            link.port.close()
