"""hdl.tx.engine.TxEngine answering inbound RDMA Read Requests, differential against the model's responder.

For the same Read Requests the engine's Read Responses must equal, byte for
byte, what the model's ``RdmapEndpoint`` hands over for them (RFC 5040 4.5:
tagged, RDMAP opcode 2, to the Data Sink STag and TO; RFC 5041 5.2:
MULPDU - 14 bytes a segment, TO advancing) in the harness's DDP-SSN, DATA,
SCTP, IPv4/UDP and Ethernet framing, at sizes from 0 B to a few KiB (1 MiB
under Verilator, tests/sim/test_tx_cocotb.py), at MULPDU edges, at W = 8, 16, 32, 64, with random AXI read
latency and back-pressure and a stalling network; scapy reads every frame
and recomputes both checksums. Responses leave in the order of their
requests and ahead of local work waiting for the segmenter; a request
beyond IRD on its stream is refused, as the model refuses it (its
Terminate), and a stream takes requests again once its responses have been
handed on.
"""

import random

import pytest

from abi.tx import TX_MIN_MULPDU, WorkOpcode
from model.errors import RdmapError
from model.rdmap.endpoint import TerminateSent
from sim.tb.axi_read_memory import ReadMemory
from tests.hdl.tx.harness import (
    PAGE_END, STREAM_IDS, Association, ModelResponder, ReadResponse, Work, check, random_memory,
)

STREAMS = {(0, 0): 1, (0, 3): 0xFFFE, (1, 1): 1}   # first DDP-SSNs: one stream about to wrap


def two_associations(rng: random.Random, mulpdus=(1480, 1468)) -> list[Association]:
    """IPv4 with the TSN about to wrap, and UDP (RFC 6951)."""
    return [
        Association(0, mulpdus[0], 0xFFFFFFFE, tag=rng.getrandbits(32)),
        Association(1, mulpdus[1], rng.getrandbits(32), udp=True, peer_udp_port=40000, peer_ip="10.0.0.9",
                    local_port=5001, peer_port=6001, tag=rng.getrandbits(32), peer_mac=bytes.fromhex("02000000000c")),
    ]


def read_requests(rng: random.Random, sizes, streams=STREAMS) -> list[ReadResponse]:
    """One request per size, on the streams in turn, each stream's MSNs from 1, sources around a 4 KiB
    page end, random sinks."""
    msn = dict.fromkeys(streams, 1)
    keys = list(streams)
    requests = []
    for index, size in enumerate(sizes):
        key = keys[index % len(keys)]
        requests.append(ReadResponse(*key, PAGE_END - rng.randrange(-64, 64 + size) - size // 2, size,
                                     sink_stag=rng.getrandbits(32), sink_to=rng.getrandbits(63), msn=msn[key]))
        msn[key] += 1
    return requests


def tagged_edges(mulpdu: int) -> list[int]:
    """One byte short of, at and past one and two segments' payload (MULPDU - 14, RFC 5041 5.2)."""
    return [segments * (mulpdu - 14) + delta for segments in (1, 2) for delta in (-1, 0, 1)]


def test_read_responses_match_the_model():
    """The default check at W = 8: every size class, both associations, a peer that keeps to IRD."""
    rng = random.Random(5040)
    sizes = [0, 1, 5, 61, *tagged_edges(1480), rng.randrange(3000, 6000)]
    memory = random_memory(rng, 8, ar_ready=0.6, latency=(1, 12), r_gap=0.3)
    check(8, two_associations(rng), STREAMS, [], memory, responses=read_requests(rng, sizes), peer_window=4,
          out_stall=0.25, response_gap=0.2, seed=8)


@pytest.mark.slow
@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_read_responses_match_the_model_at_width(width):
    rng = random.Random(width + 5040)
    sizes = [0, 1, 3, 4, 5, width - 1, width, width + 1, 61, 64, *tagged_edges(1480), *tagged_edges(1468),
             rng.randrange(4096), rng.randrange(4096, 12000)]
    rng.shuffle(sizes)
    memory = random_memory(rng, width, ar_ready=0.6, latency=(1, 12), r_gap=0.3)
    check(width, two_associations(rng), STREAMS, [], memory, responses=read_requests(rng, sizes), peer_window=4,
          out_stall=0.25, response_gap=0.2, seed=width)


@pytest.mark.parametrize("mulpdus, width", [
    ((TX_MIN_MULPDU, 517), 8),
    pytest.param((516, 519), 64, marks=pytest.mark.slow),
    pytest.param((518, TX_MIN_MULPDU + 1), 16, marks=pytest.mark.slow),
])
def test_read_response_mulpdu_edges(mulpdus, width):
    """Responses one byte short of, at, and past one and two segments at the smallest MULPDU the engine
    takes, RFC 5043 9's smallest (516) and odd ones (padding)."""
    rng = random.Random(mulpdus[0])
    streams = {(0, 0): 1, (1, 1): 1}
    sizes = [size for pair in zip(tagged_edges(mulpdus[0]), tagged_edges(mulpdus[1])) for size in pair]
    memory = random_memory(rng, width, ar_ready=0.8, latency=(1, 4))
    check(width, two_associations(rng, mulpdus), streams, [], memory,
          responses=read_requests(rng, sizes, streams), peer_window=4, out_stall=0.1)


def responses_ahead_scenario(rng: random.Random):
    """While the network holds, a long local Write fills the path and three local requests wait behind it;
    then four Read Requests arrive on three streams. Responses are due right after the Write, in the
    order of their requests, and the waiting local requests after them."""
    associations = two_associations(rng, (516, 1468))
    first = Work(WorkOpcode.RDMA_WRITE, 0, 0, PAGE_END - 6000, 12000, stag=3, to=rng.getrandbits(40))
    waiting = [Work(WorkOpcode.SEND, 0, 3, PAGE_END - 100, 200),
               Work(WorkOpcode.RDMA_WRITE, 1, 1, PAGE_END - 3, 7, stag=4, to=9),
               Work(WorkOpcode.SEND_WITH_SE_AND_INVALIDATE, 0, 0, PAGE_END - 700, 0, invalidate_stag=0x55)]
    requests = read_requests(rng, [1500, 0, 64, 2000], {(0, 3): 0xFFFE, (1, 1): 1, (0, 0): 1})
    return associations, [first, *waiting], requests, [first, *requests, *waiting]


@pytest.mark.parametrize("width", [8, *(pytest.param(width, marks=pytest.mark.slow) for width in (16, 32, 64))])
def test_read_responses_go_ahead_of_waiting_local_work(width):
    """The arbitration: a waiting Read Response before a waiting local request, responses in order."""
    rng = random.Random(6 + width)
    associations, works, requests, order = responses_ahead_scenario(rng)
    memory = random_memory(rng, width, ar_ready=0.8, latency=(1, 6))
    check(width, associations, STREAMS, works, memory, responses=requests, order=order, network_hold=600,
          peer_delay=40, buffer_bytes=2048, out_stall=0.1)


# 33 bits: the engine narrowed to the fewest host address bits that reach past the 4 GiB page end; its
# refusals leave with the host's 64-bit addresses.
@pytest.mark.parametrize("address_bits", [64, 33])
def test_read_requests_beyond_ird_are_refused_as_the_model_refuses_them(address_bits):
    """IRD 2: with the network held, a stream's third request while two are unanswered is refused (the
    model's responder sends a Terminate, RDMAP 0x2/0x07, for it), and so are the two after it, each once,
    in order, through a slow reader of m_axis_rr_refused; another stream's two are answered (IRD is per
    stream), and once the first stream's responses are handed on it takes a request again."""
    rng = random.Random(11)
    memory = random_memory(rng, 8, ar_ready=0.9, latency=(1, 4))
    associations = two_associations(rng, (516, 1468))
    streams = {(0, 0): 1, (0, 3): 1}
    first, second, *beyond = read_requests(rng, [12000, 9000, 100, 0, 5], {(0, 0): 1})
    other = read_requests(rng, [700, 0], {(0, 3): 1})
    later = ReadResponse(0, 0, PAGE_END - 40, 80, sink_stag=7, sink_to=1 << 50, msn=6)

    overflowing = ModelResponder(516, 0, memory, ird=2)
    assert overflowing.request(first) == [] and overflowing.request(second) == []
    [terminate] = overflowing.request(beyond[0])
    assert isinstance(terminate, TerminateSent)
    assert terminate.terminate.number == RdmapError.CATASTROPHIC_STREAM.number
    handed_on = ModelResponder(516, 0, memory, ird=2)
    assert handed_on.request(first) == [] and handed_on.request(second) == []
    handed_on.handed_over()
    assert handed_on.request(later) == [], "the model takes a request once the responses are handed over"

    answered = [first, second, *other]
    requests = [first, second, *beyond, *other, later]
    frames_before_later = sum(-(-max(r.length, 1) // (516 - 14)) for r in answered)
    check(8, associations, streams, [], memory, responses=requests, order=[*answered, later], ird=2,
          refused=beyond, refused_ready=0.1, network_hold=400, buffer_bytes=2048,
          response_after_frames=[0] * (len(requests) - 1) + [frames_before_later], address_bits=address_bits)


@pytest.mark.parametrize("width, size, count", [
    (8, 64, 24), (8, 1500, 8),
    pytest.param(64, 0, 40, marks=pytest.mark.slow),
    pytest.param(64, 64, 40, marks=pytest.mark.slow),
    pytest.param(16, 1, 40, marks=pytest.mark.slow),
    pytest.param(32, 200, 40, marks=pytest.mark.slow),
])
def test_read_responses_one_beat_per_cycle(width, size, count):
    """A Read Response load from a peer that keeps IRD requests outstanding on each of eight streams (two
    associations), with always-ready memory and network: one beat every cycle from the first beat of the
    first frame to the last of the last. (Eight, not four: at W = 64 a 0 B response is a two-beat frame,
    and sixteen of them, 32 cycles, no longer cover the loop from a frame leaving through the peer's next
    request to that request's frame.)"""
    memory = ReadMemory(0x10000, bytes(range(256)) * (size * count // 256 + 2), width)
    streams = {(association, stream_id): 1 for association in (0, 1) for stream_id in range(STREAM_IDS)}
    keys = list(streams)
    requests = [ReadResponse(*keys[index % len(keys)], 0x10000 + index * size, size, sink_stag=index,
                             sink_to=index * size, msn=index // len(keys) + 1) for index in range(count)]
    associations = [Association(0, 1480, 1), Association(1, 1480, 77, local_port=5001, peer_port=6001)]
    run = check(width, associations, streams, [], memory, responses=requests, peer_window=4)
    cycles = run.beat_cycles
    assert cycles[-1] - cycles[0] + 1 == len(cycles), "a cycle without a beat"
