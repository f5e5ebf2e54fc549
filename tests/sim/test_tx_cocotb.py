"""The RNIC top level's transmit side under Verilator (sim/tb/tx_run.py), differential against the golden model.

At the narrowest and the widest datapath (W = 8 and 64; a Verilator build of the whole RNIC takes minutes
per width, and Amaranth's simulator runs the transmit engine's own differential at every width,
tests/hdl/tx/). In the slow set. The top is the `sim` backend's build (`rnic_driver_top`, one build for
both): the transport unit is in it and idle here, every row the host's.

For the same work requests (every opcode, sizes 0 B to a few KiB around
MULPDU and beat edges, TSNs and a DDP-SSN about to wrap, IPv4 and UDP
associations) and for a queue of inbound Read Requests, the frames the
gateware sends must be the model's (``sim.traffic.tx``: the model's data
source, responder, SCTP and frame encoders) byte for byte, under random
AXI read stalls (ARREADY, RVALID) and network back-pressure; scapy reads
every frame with its checksums, and tshark finds every CRC32c and IPv4
header checksum good. A Read Request past the stream's IRD is refused as
the model refuses it (its Terminate, RFC 5040 7.2). Every Write and Send
completes once the peer acknowledged its last chunk (RFC 5041 5.4).
"""

import json
import random
from dataclasses import asdict

import pytest

from abi.tx import CompletionStatus, WorkOpcode
from model.net.pcap import write_pcap
from sim.runner import default_build_root, run_cocotb
from sim.tb.rnic_tb import RNIC_IRD, rnic_driver_top
from sim.tb.tx_engine import LOCAL_IP, LOCAL_MAC, STREAM_IDS, Association, ReadResponse, Work
from sim.traffic.rx import EngineShape
from sim.traffic.tx import ModelResponder, model_messages
from tests.hdl.tx.harness import scapy_check

SHAPE = EngineShape()
MEMORY_BASE, MEMORY_BYTES = 0x0F_C000, 0x8000   # a 4 KiB page end every 4 KiB, the RAM's 1 MiB mark in the middle
IRD = RNIC_IRD   # the top the driver's `sim` backend runs: one build


class Memory:
    """The host memory the engine reads, as the model's builders take it: ``size`` random bytes from
    ``seed`` (sim/tb/tx_run.py draws the same bytes from the same seed)."""

    def __init__(self, seed: int, size: int = MEMORY_BYTES):
        self.base, self.seed = MEMORY_BASE, seed
        self.data = random.Random(seed).randbytes(size)


def association_row(a: Association) -> dict:
    return {"index": a.index, "peer_mac": int.from_bytes(a.peer_mac, "big"),
            "peer_ip": int.from_bytes(bytes(map(int, a.peer_ip.split("."))), "big"), "local_port": a.local_port,
            "peer_port": a.peer_port, "tag": a.tag, "udp": int(a.udp), "peer_udp_port": a.peer_udp_port,
            "mulpdu": a.mulpdu, "next_tsn": a.next_tsn}


def work_record(w: Work) -> dict:
    return {"opcode": int(w.opcode), "association": w.association, "stream_id": w.stream_id,
            "host_address": w.host_address, "length": w.length, "stag": w.stag, "to": w.to, "sink_stag": w.sink_stag,
            "sink_to": w.sink_to, "invalidate_stag": w.invalidate_stag, "wr_id": w.wr_id}


def run(width, associations, first_ssn, memory, *, works=(), responses=(), frames, refused=0, completions=0,
        name="transmit", requests_after=0, read_stall=0.3, network_stall=0.2):
    result_file = default_build_root() / f"tx_run_w{width}_{name}.json"
    run_cocotb(
        rnic_driver_top(width, SHAPE),   # the sim backend's build: the transport unit in it, idle here
        test_module="sim.tb.tx_run", toplevel=f"rnic_driver_w{width}", build_root=default_build_root() / "rnic_driver",
        waves_name=f"rnic_driver_w{width}-{name}",
        parameters={
            "width_bytes": width, "seed": width, "local_mac": LOCAL_MAC.hex(), "local_ip": str(LOCAL_IP),
            "memory_base": memory.base, "memory_seed": memory.seed, "memory_size": len(memory.data),
            "associations": [association_row(a) for a in associations],
            "streams": [{"index": a * STREAM_IDS + s, "first_ssn": ssn} for (a, s), ssn in first_ssn.items()],
            "works": [work_record(w) for w in works], "responses": [asdict(r) for r in responses],
            "frames": frames, "refused": refused, "completions": completions,
            "requests_after": requests_after, "read_stall": read_stall, "network_stall": network_stall,
            "output": str(result_file)})
    result = json.loads(result_file.read_text())
    return [bytes.fromhex(frame) for frame in result["frames"]], result["refused"], result["completions"]


def check_frames(got, expected, sources, associations, tshark, tmp_path):
    assert len(got) == len(expected)
    for index, (frame, model) in enumerate(zip(got, expected)):
        assert frame == model, f"frame {index}: {frame.hex()} != {model.hex()}"
    tsn = {a.index: a.next_tsn for a in associations}
    by_index = {a.index: a for a in associations}
    for frame, message in zip(got, sources):
        scapy_check(frame, by_index[message.association], tsn[message.association])
        tsn[message.association] = (tsn[message.association] + 1) & 0xFFFFFFFF
    capture = tmp_path / "transmit.pcap"
    capture.write_bytes(write_pcap((index * 1e-3, frame) for index, frame in enumerate(got)))
    rows = tshark.fields(capture, "sctp.checksum.status", "ip.checksum.status", "sctp.data_tsn")
    assert len(rows) == len(got) and all(row[:2] == ["1", "1"] for row in rows)


def scenario(rng: random.Random, width: int):
    """Two associations (IPv4 with its TSN about to wrap, UDP), a stream whose DDP-SSN is about to wrap, and
    every opcode at sizes around beats, MULPDU and 4 KiB pages, in random order."""
    associations = [
        Association(0, 1468, 0xFFFFFFFD, tag=rng.getrandbits(32)),
        Association(1, 536, rng.getrandbits(32), udp=True, peer_udp_port=40000, peer_ip="10.0.0.9",
                    local_port=5001, peer_port=6001, tag=rng.getrandbits(32), peer_mac=bytes.fromhex("02000000000c")),
    ]
    first_ssn = {(0, 0): 1, (0, 3): 0xFFFE, (1, 1): 1}
    sizes = (0, 1, 5, width - 1, width + 1, 61, 522, 523, 1454, 1455, 3000, rng.randrange(4096))
    works = []
    for opcode in WorkOpcode:
        for size in sizes:
            association, stream_id = rng.choice(list(first_ssn))
            works.append(Work(opcode, association, stream_id,
                              MEMORY_BASE + rng.randrange(MEMORY_BYTES - size), size, stag=rng.getrandbits(32),
                              to=rng.getrandbits(63), sink_stag=rng.getrandbits(32), sink_to=rng.getrandbits(64),
                              invalidate_stag=rng.getrandbits(32), wr_id=len(works)))
    rng.shuffle(works)
    return associations, first_ssn, works


@pytest.mark.cocotb
@pytest.mark.slow
@pytest.mark.parametrize("width", [8, 64])
def test_work_requests_match_the_model(width, tshark, tmp_path):
    rng = random.Random(width)
    memory = Memory(width)
    associations, first_ssn, works = scenario(rng, width)
    per_message = model_messages(associations, first_ssn, works, memory)
    expected = [frame for frames in per_message for frame in frames]
    sources = [work for work, frames in zip(works, per_message) for _ in frames]
    completing = [w for w in works if w.opcode is not WorkOpcode.RDMA_READ_REQUEST]
    got, refused, completions = run(width, associations, first_ssn, memory, works=works, frames=len(expected),
                                    completions=len(completing), name="work")
    check_frames(got, expected, sources, associations, tshark, tmp_path)
    assert refused == []
    # RFC 5041 5.4: one completion per Write and Send, after its last chunk's ACK; per row in TSN order.
    assert sorted(c["wr_id"] for c in completions) == sorted(w.wr_id for w in completing)
    assert all(c["status"] == CompletionStatus.SUCCESS for c in completions)
    for row in (0, 1):
        in_order = [w.wr_id for w in works if w.association == row and w in completing]
        assert [c["wr_id"] for c in completions if c["association"] == row] == in_order


@pytest.mark.cocotb
@pytest.mark.slow
@pytest.mark.parametrize("width", [8])
def test_read_responses_match_the_model_and_ird_overflow_is_refused(width, tshark, tmp_path):
    """The Read Requests arrive while a long Write (small MULPDU, on another association) is being segmented,
    so none of their responses is handed on before the last request: the one past the stream's IRD is
    refused, as the model's responder refuses it, whatever the timing; then the answers follow the Write."""
    rng = random.Random(100 + width)
    memory = Memory(100 + width)
    associations = [Association(0, 1468, 0xFFFFFFF0, tag=rng.getrandbits(32)),
                    Association(1, 200, rng.getrandbits(32), local_port=5001, peer_port=6001, tag=rng.getrandbits(32))]
    first_ssn = {(0, 0): 1, (0, 2): 1, (1, 0): 1}
    write = Work(WorkOpcode.RDMA_WRITE, 1, 0, MEMORY_BASE, 30000, stag=rng.getrandbits(32), to=rng.getrandbits(63),
                 wr_id=1)
    responses = []
    sizes_0 = (5000, 1455, 0, 1, 64, 2, 700, 9, 1456, 3, 17)[:IRD + 1]   # one past the IRD on stream 0
    assert len(sizes_0) == IRD + 1
    for stream_id, sizes in ((0, sizes_0), (2, (1454, 1, 0, rng.randrange(3000)))):
        for msn, size in enumerate(sizes, 1):
            responses.append(ReadResponse(0, stream_id, MEMORY_BASE + rng.randrange(MEMORY_BYTES - size), size,
                                          sink_stag=rng.getrandbits(32), sink_to=rng.getrandbits(64), msn=msn))
    # The model's responder per stream: the same Read Requests, its Terminate for the one past IRD.
    answered, refused_expected = [], []
    responders = {}
    for response in responses:
        responder = responders.setdefault(response.stream_id, ModelResponder(1468, response.stream_id, memory,
                                                                             ird=IRD))
        (refused_expected if responder.request(response) else answered).append(response)
    assert refused_expected == [responses[IRD]]
    order = [write, *answered]
    per_message = model_messages(associations, first_ssn, order, memory)
    expected = [frame for frames in per_message for frame in frames]
    sources = [message for message, frames in zip(order, per_message) for _ in frames]
    got, refused, completions = run(width, associations, first_ssn, memory, works=[write], responses=responses,
                                    frames=len(expected), refused=1, completions=1, name="read_responses",
                                    requests_after=100)
    check_frames(got, expected, sources, associations, tshark, tmp_path)
    assert refused == [asdict(refused_expected[0])]
    assert [c["wr_id"] for c in completions] == [1]


@pytest.mark.cocotb
@pytest.mark.slow
def test_large_write_send_and_read_response(tshark, tmp_path):
    """Large messages at W = 8: a 256 KiB RDMA Write and a 256 KiB Send from unaligned sources, and a
    256 KiB Read Response requested while the Write is being segmented, which goes out between the two
    (responses ahead of waiting local work): about 550 frames, the TSN and a DDP-SSN wrapping, the Write's TO
    reaching 2**64 - 1, each frame byte-exact with the model's."""
    width, size = 8, 1 << 18
    rng = random.Random(7)
    memory = Memory(7, size + 4096)
    associations = [Association(0, 1468, 0xFFFFFF00, tag=rng.getrandbits(32))]
    first_ssn = {(0, 0): 1, (0, 1): 0xFFFF}
    write = Work(WorkOpcode.RDMA_WRITE, 0, 0, MEMORY_BASE + 3, size, stag=rng.getrandbits(32),
                 to=(1 << 64) - size - 1, wr_id=1)
    send = Work(WorkOpcode.SEND_WITH_SE, 0, 0, MEMORY_BASE + 4093, size, wr_id=2)
    response = ReadResponse(0, 1, MEMORY_BASE + 1, size, sink_stag=rng.getrandbits(32),
                            sink_to=rng.getrandbits(64))
    order = [write, response, send]
    per_message = model_messages(associations, first_ssn, order, memory)
    expected = [frame for frames in per_message for frame in frames]
    sources = [message for message, frames in zip(order, per_message) for _ in frames]
    got, refused, completions = run(width, associations, first_ssn, memory, works=[write, send],
                                    responses=[response], frames=len(expected), completions=2, name="large",
                                    requests_after=100, read_stall=0.1, network_stall=0.05)
    check_frames(got, expected, sources, associations, tshark, tmp_path)
    assert refused == []
    assert [c["wr_id"] for c in completions] == [1, 2]
