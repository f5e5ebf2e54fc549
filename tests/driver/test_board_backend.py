"""The `board` backend's host side against a board made of the engines' golden models (sim/board_model.py).

The driver's example program and the end-to-end program run unchanged on
it, over a clean and a lossy link; the backend's opening, pacing and checks
refuse what they must. The gateware board (under Verilator, over a pty and
a socket) is tests/boards/test_board_backend.py.
"""

import ipaddress
import socket
import threading
import time

import pytest
from scapy.layers.l2 import Ether
from scapy.layers.sctp import SCTP, SCTPChunkSACK

from driver import SGE, CMEventType, InvalidArgument, OutOfResources, SendWR, WCStatus, WROpcode, open_fabric
from driver.backends.board import BoardError, BoardFabric, BoardMismatch, LinkMemory, board_memory_map
from driver.device import Fabric
from driver.ethernet import EthernetError, SocketPort, open_port
from abi.link import TxOutput
from abi.tx import TX_REGISTER_BASE
from abi.register_file import ID_OFFSET
from model.engine.sack import TICK_SECONDS
from model.net.frames import build_frame
from model.sctp.packet import PPID_DDP_SESSION_CONTROL, DataChunk, SctpPacket
from model.rnic.link import LinkConfig, Side
from model.rnic.pair import IPS, MACS
from scripts.driver_example import example
from tests.driver.harness import ALL_ACCESS, connected
from sim.board_model import ModelBoard
from sim.e2e_program import end_to_end_checked
from tests.driver.test_verbs import (callers_buffers, lists_stop_at_the_first_bad_request, two_listening_ports,
                                     two_protection_domains, unsignaled_sends)


#: What the example program prints of its completions and bytes, whatever the backend: the Send, the Write
#: and the Read complete with their lengths (RFC 5040 5), and the bytes are where each went.
EXAMPLE_LINES = ("completion: wr_id 10 SEND SUCCESS 21 bytes", "completion: wr_id 11 RDMA_WRITE SUCCESS 5 bytes",
                 "completion: wr_id 12 RDMA_READ SUCCESS 22 bytes", "completion: wr_id 1 RECV SUCCESS 21 bytes",
                 "server received b'hello over iWARP/SCTP', got written b'hello'; "
                 "client read b\"the server's own bytes\"")


def open_board(loss: float = 0.0, seed: int = 1, **options) -> tuple[ModelBoard, Fabric]:
    board = ModelBoard(MACS[Side.A], IPS[Side.A])
    return board, Fabric(BoardFabric(board.control, board.port, link=LinkConfig(loss=loss, seed=seed), **options))


@pytest.mark.parametrize("loss, engine_sacks", [(0.0, True), (0.01, True), (0.01, False)],
                         ids=["clean", "1%", "1%-host-sacks"])
def test_the_readme_example_runs_unchanged(loss, engine_sacks, capsys):
    """The board's receive engine SACKs by default; with ``engine_sacks=False`` its ack records go to the
    host, which SACKs (RFC 4960 6.2)."""
    board, fabric = open_board(loss, engine_sacks=engine_sacks)
    fabric.backend.run(lambda: example(fabric))
    out = capsys.readouterr().out
    assert all(line in out for line in EXAMPLE_LINES), out
    # The server is the board: what it received is in the board's memory, placed by its engine.
    assert b"hello over iWARP/SCTP" in board.memory.read(0, 32 * 1024)


def test_every_operation_both_ways_at_the_segment_edges():
    """RFC 5041 4.2, 4.3: payloads of 0, 1 and one segment's worth and a byte more, tagged and untagged."""
    board, fabric = open_board(0.01, seed=3)
    mulpdu = fabric.devices[0].query_device().mulpdu
    sizes = (0, 1, mulpdu - 18, mulpdu - 17, mulpdu - 14, mulpdu - 13)
    fabric.backend.run(lambda: end_to_end_checked(fabric, sizes))
    assert board.rx_frames and board.tx_frames


@pytest.mark.parametrize("segment_reports", [False, True], ids=["per-message", "per-segment"])
def test_reports_per_message_or_per_segment_as_the_register_says(segment_reports):
    """The backend opens the board with its reports per message (``segment_reports`` 0): the engine leaves out
    its accepted middle segments' records (abi.rx.report_withheld) and counts them; a host that sets the bit
    gets a record per segment and runs the same operations to the same completions (RFC 5041 5.4)."""
    board, fabric = open_board()
    if segment_reports:
        board.control.write_register(board.control.rx_map.config_offset("segment_reports"), 1)
    mulpdu = fabric.devices[0].query_device().mulpdu
    fabric.backend.run(lambda: end_to_end_checked(fabric, (1, 3 * mulpdu)))
    withheld = board.rx.reports_withheld
    # Into the board at least a Write, a Send and a Read Response of 3 MULPDU: 4 segments each (RFC 5041 5.2,
    # the header in the MULPDU), 3 middle ones.
    assert withheld == 0 if segment_reports else withheld >= 9


def test_the_device_reports_the_boards_tables():
    _, fabric = open_board()
    attr = fabric.devices[0].query_device()
    assert (attr.max_mr, attr.max_qp, attr.max_qp_rd_atom) == (15, 4, 4)   # IRD: the engine's Read Responses


def test_the_device_sizes_itself_from_the_boards_params_words():
    """A board built with 64 region rows and 12-bit STag keys says so in its PARAMS words (abi.rx.RX_PARAMS,
    RX_TABLES): the device offers 63 regions, one more is OutOfResources, each STag is row << 12 | key, and a
    Write to the last region registered lands."""
    board = ModelBoard(MACS[Side.A], IPS[Side.A], regions=64, key_bits=12)
    fabric = Fabric(BoardFabric(board.control, board.port))

    async def main(fabric):
        server, client = await connected(fabric, region=64)
        attr = server.device.query_device()
        regions = [server.pd.reg_mr(64, ALL_ACCESS) for _ in range(attr.max_mr - 1)]
        with pytest.raises(OutOfResources):
            server.pd.reg_mr(64, ALL_ACCESS)
        client.mr.write(b"to the 63rd row")
        client.qp.post_send([
            SendWR(1, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 15, client.mr.lkey)],
                   remote_addr=regions[-1].buf, rkey=regions[-1].rkey),
            SendWR(2, WROpcode.RDMA_READ, [SGE(client.mr.buf + 32, 15, client.mr.lkey)],
                   remote_addr=regions[-1].buf, rkey=regions[-1].rkey)])
        statuses = [wc.status for wc in await client.cq.wait(2)]
        return attr.max_mr, [server.mr.rkey] + [mr.rkey for mr in regions], statuses, regions[-1].read(15)

    max_mr, stags, statuses, landed = fabric.backend.run(lambda: main(fabric))
    assert max_mr == 63
    assert sorted(stag >> 12 for stag in stags) == list(range(1, 64))
    assert statuses == [WCStatus.SUCCESS, WCStatus.SUCCESS] and landed == b"to the 63rd row"


def test_leftover_records_are_popped_at_opening():
    board = ModelBoard(MACS[Side.A], IPS[Side.A])
    board.reports.append(b"\0" * 56)
    board.tx_records[TxOutput.COMPLETION].append(b"\0" * 6)
    BoardFabric(board.control, board.port)
    assert not board.reports and not board.tx_records[TxOutput.COMPLETION]


def test_a_completion_the_model_did_not_give_is_refused():
    board, fabric = open_board()
    original = board.send_engine_frames

    def tampered() -> None:
        original()
        queue = board.tx_records[TxOutput.COMPLETION]
        for index, record in enumerate(queue):
            queue[index] = bytes([record[0] ^ 1]) + record[1:]    # another wr_id
    board.send_engine_frames = tampered
    with pytest.raises(BoardMismatch, match="completion|Completion"):
        fabric.backend.run(lambda: example(fabric))


def test_a_board_without_an_rnic_core_is_refused():
    board = ModelBoard(MACS[Side.A], IPS[Side.A])
    board.control.read_register = lambda offset: 0 if offset == ID_OFFSET else 1
    with pytest.raises(BoardError, match="RNIC core"):
        BoardFabric(board.control, board.port)


def test_memory_bounds():
    with pytest.raises(BoardError, match="needs"):
        board_memory_map(32 * 1024)
    layout = board_memory_map(64 * 1024)
    assert layout.buffers_end <= layout.control_base < layout.scratch_base < layout.bounce_base < 64 * 1024
    assert layout.scratch_base + 1024 * layout.scratch_slots <= layout.bounce_base
    board = ModelBoard(MACS[Side.A], IPS[Side.A])
    memory = LinkMemory(board.control, 64 * 1024)
    with pytest.raises(BoardError, match="outside"):
        memory.write(64 * 1024 - 2, b"abc")
    _, fabric = open_board()
    pd = fabric.devices[0].alloc_pd()
    first = pd.reg_mr(16 * 1024, 0)
    with pytest.raises(OutOfResources, match="board's memory"):
        pd.reg_mr(16 * 1024, 0)
    first.dereg()
    pd.reg_mr(16 * 1024, 0)    # the freed buffer is taken again


def test_the_backend_needs_its_ports():
    with pytest.raises(InvalidArgument, match="serial"):
        open_fabric("board", ethernet="eth1")
    with pytest.raises(InvalidArgument, match="ethernet"):
        open_fabric("board", serial="/dev/ttyUSB1")
    with pytest.raises(EthernetError, match="tcp:HOST:PORT"):
        open_port("tcp:nowhere")


def test_socket_port_frames_both_ways():
    """Frames as a 4-byte big-endian length and the bytes, as sim/board_server.py sends them."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()[0]))
    thread.start()
    port = SocketPort("127.0.0.1", server.getsockname()[1])
    thread.join()
    peer = accepted[0]
    port.send(b"\x01" * 60)
    assert peer.recv(100) == b"\0\0\0\x3c" + b"\x01" * 60
    peer.sendall(b"\0\0\0\x02ab\0\0\0\x03c")
    received = []
    for _ in range(100):
        received += port.receive()
        if received:
            break
        time.sleep(0.01)
    peer.sendall(b"de")
    for _ in range(100):
        received += port.receive()
        if len(received) == 2:
            break
        time.sleep(0.01)
    assert received == [b"ab", b"cde"]
    peer.close()
    for _ in range(100):
        port.receive()
        if port.closed:
            break
        time.sleep(0.01)
    assert port.closed
    port.close()
    server.close()


def test_a_connect_nobody_listens_for_is_rejected_both_ways():
    """RFC 4960 8.4 rule 3 through the board: the board's host answers an INIT with nothing listening by an ABORT
    sent out of the board's MAC, and the ABORT answering the board's own INIT comes up through its receive engine
    (no association row yet); each connect is REJECTED within a round trip, and the board then connects."""
    _, fabric = open_board()
    board, peer = fabric.devices

    async def main():
        events = []
        pds = {device: device.alloc_pd() for device in fabric.devices}
        for device, other in ((peer, board), (board, peer)):
            cm_id = device.create_id()
            cm_id.create_qp(pds[device], device.create_cq())
            cm_id.connect(other.address)
            events.append((await cm_id.get_cm_event(timeout=5.0)).event_type)
        elapsed = fabric.now()
        listener = peer.create_id()
        listener.listen()
        cm_id = board.create_id()
        cm_id.create_qp(pds[board], board.create_cq())
        cm_id.connect(peer.address)
        request = await listener.get_cm_event(timeout=5.0)
        request.id.create_qp(pds[peer], peer.create_cq())
        request.id.accept()
        events.append((await cm_id.get_cm_event(timeout=5.0)).event_type)
        return events, elapsed

    events, elapsed = fabric.backend.run(main)
    assert events == [CMEventType.REJECTED, CMEventType.REJECTED, CMEventType.ESTABLISHED]
    assert elapsed < 3.0  # RTO.Initial: no INIT was retransmitted (RFC 4960 5.1 C)


@pytest.mark.parametrize("program", [unsignaled_sends, lists_stop_at_the_first_bad_request])
def test_lists_and_unsignaled_sends_on_the_board(program):
    """tests/driver/test_verbs.py's programs with the board posting: its transmit engine completes every request
    (the backend checks each completion against the model's), the host shows only the signaled ones."""
    _, fabric = open_board()
    fabric.backend.run(lambda: program(fabric))


def test_a_callers_buffer_mirrored_in_the_boards_memory():
    """tests/driver/test_verbs.py's program with the board registering the caller's bytearrays: the regions live
    in the board's memory, the peer's Writes and Sends are placed there by its engine and read back over the
    link into the caller's buffers, and what the caller writes in Python is written to the board."""
    board, fabric = open_board()
    fabric.backend.run(lambda: callers_buffers(fabric))
    assert b"written by the peer" in board.memory.read(0, 32 * 1024)


def test_two_protection_domains_in_the_boards_tables():
    """tests/driver/test_verbs.py's program with the board as device 0: its region and stream rows carry the PDs,
    and its engine refuses the other PD's STag (RFC 5041 8.2)."""
    _, fabric = open_board()
    fabric.backend.run(lambda: two_protection_domains(fabric))


def test_the_board_listens_on_two_ports():
    """tests/driver/test_verbs.py's program with the board listening: the INITs come up through its receive
    engine, and the association's row carries the port they came to."""
    _, fabric = open_board()
    fabric.backend.run(lambda: two_listening_ports(fabric))


def test_model_board_link_batches_pops_as_the_abi_says():
    """The model board's link, under the driver's SerialLink: a pop takes what waits and fits in its length
    (each record but the last padded to 8 bytes, abi), one at least; POLL flags what waits (the same
    scenario as the gateware's tests/hdl/link/test_link.py)."""
    import random

    from driver.link import Polled, SerialLink
    from abi.link import LinkQueue, tx_output_bytes
    from abi.register_file import DEVICE_ID
    from abi.rx import ExceptionSource, ack_bytes, report_bytes

    board = ModelBoard(MACS[Side.A], IPS[Side.A])
    rng = random.Random(5)
    reports = [rng.randbytes(report_bytes()) for _ in range(5)]
    acks = [rng.randbytes(ack_bytes()) for _ in range(10)]
    completions = [rng.randbytes(tx_output_bytes()[TxOutput.COMPLETION]) for _ in range(3)]
    board.reports.extend(reports)
    board.acks.extend(acks)
    board.tx_records[TxOutput.COMPLETION].extend(completions)
    link = SerialLink(board.serial, baud=3e6, latency=0.0)
    assert link.poll(ID_OFFSET) == Polled(LinkQueue.REPORT | LinkQueue.ACK | LinkQueue.COMPLETION, DEVICE_ID)
    # 56-byte strides: 0 bytes takes one, 56 + 55 two, 1000 the two left.
    assert [link.pop_reports(limit) for limit in (0, 111, 1000, 1000)] == [reports[:1], reports[1:3], reports[3:], []]
    # 8-byte strides: 8 x 3 + 7 bytes take four, 30 three, then the three left.
    assert [link.pop_acks(limit) for limit in (31, 30, 1000)] == [acks[:4], acks[4:7], acks[7:]]
    assert link.poll().waiting == LinkQueue.COMPLETION
    assert link.pop_records(TxOutput.COMPLETION, 14) == completions[:2]
    assert link.pop_record(TxOutput.COMPLETION) == completions[2]
    assert link.poll().waiting == LinkQueue(0)
    # Exception packets: the first whatever its length, then each that fits whole (8-byte header, padded
    # to 8 but the last): 8 + 30 -> 40, + 8 + 20 -> 72, + 8 + 100 = 180 <= 200; the 150-byte one would end at 342.
    packets = [rng.randbytes(size) for size in (30, 20, 100, 150)]
    board.exceptions.extend(board._exception(ExceptionSource.CHUNK, packet) for packet in packets)
    assert link.poll().waiting == LinkQueue.EXCEPTION
    assert [p.data for p in link.pop_exceptions(200)] == packets[:3]
    assert [p.data for p in link.pop_exceptions(0)] == packets[3:]
    assert link.pop_exceptions(1000) == []


def test_the_host_never_reads_the_payload_of_what_the_board_sends(monkeypatch):
    """Issue 29 item 4: the board's transmit engine reads a Write's, Send's or Read Response's payload from
    the board's memory itself; the host's own memory reads over the link stay in its own areas (the QN 1 and
    QN 2 buffers, scratch slots, bounce area: `board_memory_map`), never the driver's buffers below them,
    but for a gather list of several pieces, which the engine's one address makes the host copy into the
    bounce area (`EngineRnic._gathered`; the end-to-end program's Writes have two SGEs). The program's reads
    of its regions (`MR.read`, to check what arrived) are the program's, not the host's."""
    from driver.mr import MR
    from model.rnic.engine_host import EngineRnic

    board, fabric = open_board()
    host_reads, gathered, reader = [], [], {"who": None}
    original = board.control.read_memory

    def recorded(address: int, length: int) -> bytes:
        {None: host_reads, "gather": gathered, "program": []}[reader["who"]].append((address, length))
        return original(address, length)

    def as_reader(who: str, function):
        def call(*args, **kwargs):
            reader["who"] = who
            try:
                return function(*args, **kwargs)
            finally:
                reader["who"] = None
        return call
    board.control.read_memory = recorded
    monkeypatch.setattr(MR, "read", as_reader("program", MR.read))
    monkeypatch.setattr(EngineRnic, "_gathered", as_reader("gather", EngineRnic._gathered))
    mulpdu = fabric.devices[0].query_device().mulpdu
    sizes = (1, 3 * mulpdu)
    fabric.backend.run(lambda: end_to_end_checked(fabric, sizes))
    layout = board_memory_map(64 * 1024)
    assert board.tx_frames and host_reads
    assert all(address >= layout.buffers_end for address, _ in host_reads), sorted(host_reads)[:4]
    # Each Write of two non-empty halves: the halves, read once each (a 1-byte Write is one piece).
    assert sorted(length for _, length in gathered) == sorted(
        length for size in sizes if size >= 2 for length in (size // 2, size - size // 2))


def test_the_model_board_sacks_an_association_once_its_sack_row_is_enabled_rfc4960_6_2():
    """The model board as the gateware's: with the SACK row written enabled, DATA the peer sends is SACKed by
    the board itself (every second packet at once, the last on the delayed-SACK timer, RFC 4960 6.2), with
    the transmit row's ports and tag; no ack record waits for the host."""
    clock = [0.0]
    board = ModelBoard(MACS[Side.A], IPS[Side.A], clock=lambda: clock[0])
    control, tag = board.control, 0x600DF00D
    peer_mac, peer_ip = MACS[Side.B], IPS[Side.B]
    control.write_table(control.rx_map.tables["association"], {
        "index": 0, "valid": 1, "ddp": 1, "local_port": 5000, "peer_port": 6000,
        "peer_ip": int(ipaddress.IPv4Address(peer_ip)), "tag": 0x1110})
    control.write_table(control.tx_map.tables["tx_association"], {
        "index": 0, "peer_mac": int.from_bytes(peer_mac, "big"), "peer_ip": int(ipaddress.IPv4Address(peer_ip)),
        "local_port": 5000, "peer_port": 6000, "tag": tag, "udp": 0, "peer_udp_port": 0, "mulpdu": 1434,
        "next_tsn": 1}, base=TX_REGISTER_BASE)
    control.write_table(control.rx_map.tables["sack"], {
        "association": 0, "cumulative_tsn": 99, "delay": 5, "window": 30000, "held_bytes": 1434, "enabled": 1})

    def data(tsn: int) -> bytes:
        chunk = DataChunk(tsn, 0, 0, PPID_DDP_SESSION_CONTROL, b"\1\2\3\4", unordered=True)
        return build_frame(SctpPacket(6000, 5000, 0x1110, [chunk]).encode(), peer_mac, MACS[Side.A], peer_ip,
                           IPS[Side.A])

    def sacks() -> list:
        out = []
        for frame in board.port.receive():
            packet = Ether(frame)[SCTP]
            assert (packet.sport, packet.dport, packet.tag) == (5000, 6000, tag)
            out.append((packet[SCTPChunkSACK].cumul_tsn_ack, packet[SCTPChunkSACK].a_rwnd))
        return out

    board.port.send(data(100))
    assert sacks() == []
    board.port.send(data(101))
    assert sacks() == [(101, 30000)]                       # the second packet
    board.port.send(data(103))
    assert sacks() == [(101, 30000 - 1434)]                # a gap: at once, TSN 103 held past it
    board.port.send(data(102))
    assert sacks() == [(103, 30000)]                       # the gap closed: at once
    board.port.send(data(104))
    assert sacks() == []
    clock[0] += 6 * TICK_SECONDS                           # the delayed SACK (5 ticks)
    assert sacks() == [(104, 30000)]
    board.port.send(data(105))
    assert sacks() == []
    flush = {"association": 0, "flush": 1}                 # the host's flush: the owed SACK now, the row kept
    control.write_table(control.rx_map.tables["sack"], flush)
    assert sacks() == [(105, 30000)]
    control.write_table(control.rx_map.tables["sack"], flush)
    assert sacks() == []                                   # none owed
    board.port.send(data(106))
    board.port.send(data(107))
    assert sacks() == [(107, 30000)]                       # the row as before: every second packet
    assert not board.acks and len(board.exceptions) == 8   # the PPID 17 chunks still go to the host


def test_the_boards_stag_keys_come_from_the_system_generator_not_the_seed():
    """The board's STags cross a real wire, so their keys are hard to guess (RFC 5042 5.1): two fabrics opened with
    the same seed register alike but draw different keys, where the engine backend (a simulation) repeats its
    seeded keys."""
    def board_keys() -> list[int]:
        _, fabric = open_board(seed=5)
        pd = fabric.devices[0].alloc_pd()
        return [pd.reg_mr(64, 0x7).rkey for _ in range(8)]

    def engine_keys() -> list[int]:
        pd = open_fabric("engine", seed=5).devices[0].alloc_pd()
        return [pd.reg_mr(4096, 0x7).rkey for _ in range(8)]

    first, second = board_keys(), board_keys()
    assert [stag >> 8 for stag in first] == [stag >> 8 for stag in second] == list(range(1, 9))
    assert [stag & 0xFF for stag in first] != [stag & 0xFF for stag in second]
    assert engine_keys() == engine_keys()
