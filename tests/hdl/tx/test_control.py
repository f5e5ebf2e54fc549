"""hdl.tx.engine.TxEngine sending the control plane's packets and session-control DATA chunks (s_axis_ctl).

Control packets: the packets of a whole association's life as the model's
SCTP sends them (``model.sctp.association``: INIT with tag 0, INIT ACK,
COOKIE ECHO, COOKIE ACK, DATA, SACK, HEARTBEAT and its ACK, SHUTDOWN,
SHUTDOWN ACK, SHUTDOWN COMPLETE) and ABORT / SHUTDOWN COMPLETE with the T bit
(RFC 4960 8.5.1), each given to the engine as its chunks in host memory and
its verification tag: the engine's frame must equal the model's encoding of
the same packet byte for byte (common header, CRC32c, IPv4/UDP, Ethernet),
and scapy and tshark must read it with a valid CRC32c and the same chunks.

Session control: messages of the model's DDP sessions (RFC 5043 5.2.3, 6)
interleaved with DDP work on the same association take consecutive TSNs
from the one counter (RFC 4960 6.1), as the model's association numbers its
DATA chunks, in DATA chunks with PPID 17; a control request goes ahead of
local work waiting for the segmenter.
"""

import random

import pytest

from abi.tx import ControlOpcode, WorkOpcode
from model.ddp.session import DdpSessions
from model.net.pcap import write_pcap
from model.sctp.packet import AbortChunk, ErrorCause, ErrorCauseCode, ShutdownCompleteChunk
from tests.conftest import Tshark
from tests.hdl.tx.harness import PAGE_END, Association, Control, Work, check, random_memory
from tests.model.sctp.test_association import CLIENT_PORT, SERVER_PORT, Link, established_link


def two_rows(rng: random.Random) -> list[Association]:
    """The two ends of the model's association: the client's packets on row 0 (IPv4), the server's on row 1
    (UDP, RFC 6951)."""
    return [
        Association(0, 1480, rng.getrandbits(32), local_port=CLIENT_PORT, peer_port=SERVER_PORT),
        Association(1, 1468, rng.getrandbits(32), udp=True, peer_udp_port=40000, peer_ip="10.0.0.9",
                    local_port=SERVER_PORT, peer_port=CLIENT_PORT, peer_mac=bytes.fromhex("02000000000c")),
    ]


def association_life() -> Link:
    """A model association set up, carrying data both ways (DATA, SACK), idle long enough for a HEARTBEAT,
    then shut down gracefully."""
    link = established_link(client_overrides={"heartbeat_interval": 1.0})
    link.client.send(1, 16, bytes(range(200)))
    link.server.send(2, 17, b"\x00\x00\x00\x01private")
    link.run(until=link.now + 10.0)
    link.client.shutdown(link.now)
    link.run()
    return link


def control_packets(rng: random.Random, link: Link) -> list[Control]:
    """Each packet the model sent as a PACKET request on its sender's row, from an address near a 4 KiB
    page end (some crossing it), one after another in memory; then ABORT and SHUTDOWN COMPLETE with the
    T bit, which carry the peer's own tag (RFC 4960 8.5.1 B, C)."""
    packets = [(0 if sent.direction == "a->b" else 1, sent.packet) for sent in link.log]
    reflected = link.server.local_tag
    packets += [(0, type(packets[0][1])(CLIENT_PORT, SERVER_PORT, reflected, (AbortChunk(True, (
                    ErrorCause(ErrorCauseCode.USER_INITIATED_ABORT, b"bye"),)),))),
                (0, type(packets[0][1])(CLIENT_PORT, SERVER_PORT, reflected, (ShutdownCompleteChunk(True),)))]
    controls, address = [], PAGE_END - 3000 - rng.randrange(64)
    for row, packet in packets:
        controls.append(Control(ControlOpcode.PACKET, row, address, chunks=packet.chunks,
                                tag=packet.verification_tag))
        address += len(controls[-1].body) + rng.randrange(8)
    return controls


def tshark_reads(tshark: Tshark, tmp_path, frames: list[bytes], controls: list[Control]) -> None:
    """tshark finds every CRC32c (and IPv4 header checksum) good and the chunks of each request."""
    capture = tmp_path / "control.pcap"
    capture.write_bytes(write_pcap((index * 1e-3, frame) for index, frame in enumerate(frames)))
    rows = tshark.fields(capture, "sctp.checksum.status", "ip.checksum.status", "sctp.chunk_type", "sctp.verification_tag")
    assert len(rows) == len(controls)
    for (crc, ip, types, tag), control in zip(rows, controls):
        assert (crc, ip) == ("1", "1")
        assert [int(t) for t in types.split(",")] == [int(chunk.CHUNK_TYPE) for chunk in control.chunks]
        assert int(tag, 16) == control.tag


def test_control_packets_match_the_model(tshark, tmp_path):
    """The default check at W = 8, with random AXI read latency and a stalling network."""
    rng = random.Random(5)
    link = association_life()
    kinds = {type(chunk).__name__ for sent in link.log for chunk in sent.packet.chunks}
    assert {"InitChunk", "InitAckChunk", "CookieEchoChunk", "CookieAckChunk", "DataChunk", "SackChunk",
            "HeartbeatChunk", "HeartbeatAckChunk", "ShutdownChunk", "ShutdownAckChunk",
            "ShutdownCompleteChunk"} <= kinds
    controls = control_packets(rng, link)
    memory = random_memory(rng, 8, ar_ready=0.6, latency=(1, 12), r_gap=0.3)
    run = check(8, two_rows(rng), {}, [], memory, controls=controls, out_stall=0.25, seed=5)
    tshark_reads(tshark, tmp_path, run.frames, controls)


@pytest.mark.slow
@pytest.mark.parametrize("width", [16, 32, 64])
def test_control_packets_match_the_model_at_width(width, tshark, tmp_path):
    rng = random.Random(width)
    controls = control_packets(rng, association_life())
    memory = random_memory(rng, width, ar_ready=0.6, latency=(1, 12), r_gap=0.3)
    run = check(width, two_rows(rng), {}, [], memory, controls=controls, out_stall=0.25, seed=width)
    tshark_reads(tshark, tmp_path, run.frames, controls)


def session_messages(rng: random.Random, association: int, stream_ids, address: int) -> list[Control]:
    """The DDP Stream Session Initiates (RFC 5043 6.2) of the model's session layer, private data of 0 to
    40 bytes, as SESSION_CONTROL requests laid out from ``address``."""
    sessions = DdpSessions()
    for stream_id in stream_ids:
        sessions.initiate(stream_id, rng.randbytes(rng.randrange(41)))
    controls = []
    for message in sessions.data_to_send():
        assert message.ppid == 17
        controls.append(Control(ControlOpcode.SESSION_CONTROL, association, address, message=message.payload,
                                stream_id=message.stream_id))
        address += len(message.payload) + rng.randrange(8)
    return controls


@pytest.mark.parametrize("width", [8, pytest.param(64, marks=pytest.mark.slow)])
def test_session_control_takes_the_next_tsn(width):
    """DDP work of every opcode and session-control messages on both rows (the first with its TSN about to
    wrap), one after another in a random interleaving: consecutive TSNs across both kinds."""
    rng = random.Random(17)
    associations = two_rows(rng)
    associations[0].next_tsn = 0xFFFFFFFE
    first_ssn = {(0, 1): 1, (1, 2): 1}
    works = [Work(opcode, *rng.choice(list(first_ssn)), PAGE_END - rng.randrange(3000), size, stag=7, to=size)
             for opcode in WorkOpcode for size in (0, 5, 1500)]
    controls = (session_messages(rng, 0, (1, 3), PAGE_END - 6000)
                + session_messages(rng, 1, (0, 2, 3), PAGE_END - 5000))
    order = works + controls
    rng.shuffle(order)
    works, controls = ([m for m in order if isinstance(m, kind)] for kind in (Work, Control))
    memory = random_memory(rng, width, ar_ready=0.7, latency=(1, 8))
    check(width, associations, first_ssn, works, memory, controls=controls, order=order, one_at_a_time=True,
          out_stall=0.1)


def test_control_requests_go_ahead_of_waiting_work():
    """Long Writes (32 segments at the smallest MULPDU) all waiting at once; a session-control message and a
    SACK offered during the first Write's third frame leave right after that Write, the session message
    with the TSN after its last segment."""
    rng = random.Random(3)
    associations = two_rows(rng)
    associations[0].mulpdu = 46
    writes = [Work(WorkOpcode.RDMA_WRITE, 0, 1, PAGE_END - 1200 * (index + 1), 1024, stag=9, to=index << 10)
              for index in range(3)]
    session = session_messages(rng, 0, (1,), PAGE_END - 5000)[0]
    sack = control_packets(rng, association_life())[5]
    order = [writes[0], session, sack, *writes[1:]]
    memory = random_memory(rng, 8)
    check(8, associations, {(0, 1): 1}, writes, memory, controls=[session, sack], order=order,
          control_after_frames=[2, 2], acknowledge_after=50)
