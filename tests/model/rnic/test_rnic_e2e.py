"""Two SoftRnics end to end over the impaired link: every RDMAP operation, both directions.

Each run sets up the association (RFC 4960 5.1, RFC 5043 5.1 / 11.1), an
enhanced DDP session with negotiated IRD/ORD and the zero-length RDMA Write
RTR (RFC 6581 7, 9), runs RDMA Write, RDMA Read and the four Send variants
(RFC 5040 5) with messages from 0 bytes to 1 MiB in both directions, checks
every byte, completion and invalidated STag exactly, checks that nothing was
written outside the registered and posted buffers, and closes gracefully
(RFC 5043 6.2, RFC 4960 9.2).  Lossy runs also lose, duplicate, reorder and
corrupt frames (seeded, so each run is the same every time); corrupted
frames must be dropped by the IPv4/UDP checksums or the CRC32c (RFC 4960
6.8) and never placed.  The captures are read back by `sim.commands.dissect`,
scapy and tshark, which must agree on which frames are damaged.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from model.net.checksum import internet_checksum
from sim.commands.dissect import dissect_capture
from model.net.frames import Frame, build_frame
from model.rnic.link import Link, LinkConfig, Side
from model.rnic.pair import IDLE_LIMIT, AssociationEnded, HostPair, Stalled, host_config
from model.sctp.events import RetransmissionLimit
from model.sctp.state import AssociationState
from tests.mulpdu import TAGGED_DDP_HEADER, UNTAGGED_DDP_HEADER, mulpdu
from model.ddp.memory import Access, SparseMemory
from model.ddp.negotiation import LocalResources, Role, RtrType
from model.net.pcap import write_pcap
from model.rdmap.messages import Opcode
from model.rdmap.endpoint import ReadLimitExceeded
from model.rnic.host import DdpForbidden, RnicConfig, SoftRnic
from model.rnic.events import (
    Aborted,
    CloseAborted,
    Closed,
    Connected,
    DdpUnavailable,
    Failed,
    RdmapTerminated,
    ReadCompletion,
    ReceiveCompletion,
    RtrArrived,
    SessionEstablished,
    SessionRejected,
    SessionRequested,
    StreamTerminated,
    WorkCompletion,
    WriteArrived,
)
from model.sctp.packet import (
    PPID_DDP_SEGMENT,
    PPID_DDP_SESSION_CONTROL,
    AbortChunk,
    Chunk,
    CookieAckChunk,
    CookieEchoChunk,
    DataChunk,
    ErrorCause,
    ErrorCauseCode,
    ErrorChunk,
    HeartbeatChunk,
    InitChunk,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownChunk,
    ShutdownCompleteChunk,
)

MIB = 1 << 20
MAC = {Side.A: bytes.fromhex("020000000001"), Side.B: bytes.fromhex("020000000002")}
IP = {Side.A: "10.0.0.1", Side.B: "10.0.0.2"}
PORT = {Side.A: 5001, Side.B: 5002}
STREAM = 3
SEND_VARIANTS = (  # (opcode, solicited, invalidate)
    (Opcode.SEND, False, False),
    (Opcode.SEND_WITH_INVALIDATE, False, True),
    (Opcode.SEND_WITH_SE, True, False),
    (Opcode.SEND_WITH_SE_AND_INVALIDATE, True, True),
)
MULPDU = mulpdu(host_config(Side.A).path_mtu)
"""The hosts' MULPDU over IPv4 (RFC 5043 5.2, 9): a Write carries MULPDU - 14 bytes per segment, a Send
MULPDU - 18 (RFC 5041 4.2, 4.3); the clean run tries each side of both boundaries."""
SIZES_CLEAN = (0, 1, MULPDU - UNTAGGED_DDP_HEADER, MULPDU - UNTAGGED_DDP_HEADER + 1, MULPDU - TAGGED_DDP_HEADER,
               MULPDU - TAGGED_DDP_HEADER + 1, 4096, 65537, MIB)
SIZES_LOSSY = (0, 1, 1417, 4096, 65537)
SIMULATED_LIMIT = 600.0


def create_pair(loss: float = 0.0, seed: int = 1, udp: bool = False, ddp_b: bool = True,
                resources: dict[Side, LocalResources] | None = None, policy_b="default",
                close_timeout: float | None = 30.0) -> HostPair:
    """Hosts A and B on a link impaired at `loss` (every kind), recording; B's DDP, resources and policy."""
    configs = {}
    for side in Side:
        options: dict = {"udp": udp, "close_timeout": close_timeout}
        if resources is not None:
            options["resources"] = resources[side]
        if side is Side.B:
            options["ddp"] = ddp_b
        configs[side] = host_config(side, **options)
    return HostPair.create(
        LinkConfig(loss=loss, duplication=loss, reordering=loss, corruption=loss, seed=seed),
        record=True, configs=configs,
        rngs={side: random.Random(seed * 10 + (side is Side.B)) for side in Side},
        policies=None if policy_b == "default" else {Side.B: policy_b},
    )


def open_stream(pair: HostPair, stream_id: int = STREAM) -> None:
    pair.open_stream(stream_id, b"hello from A")


def close_both(pair: HostPair) -> None:
    """A closes; both associations must end Closed (RFC 5043 6.2, RFC 4960 9.2)."""
    ended = pair.close(limit=SIMULATED_LIMIT)
    assert all(isinstance(event, Closed) for event in ended.values()), ended


def write_capture(pair: HostPair, path: Path) -> Path:
    path.write_bytes(pair.pcap())
    return path


@dataclass
class Plan:
    """One host's side of the exchange: what it sends and what it must find afterwards."""

    source: dict[int, int] = field(default_factory=dict)  # size -> address of this host's data
    data: dict[int, bytes] = field(default_factory=dict)
    source_stag: dict[int, int] = field(default_factory=dict)
    write_sink: dict[int, tuple[int, int]] = field(default_factory=dict)  # size -> (address, stag)
    read_sink: dict[int, tuple[int, int]] = field(default_factory=dict)
    receive_buffers: list[tuple[int, int]] = field(default_factory=list)  # (address, length) in MSN order
    targets: list[int] = field(default_factory=list)  # STags the peer's Sends with Invalidate revoke
    regions: list[tuple[int, int]] = field(default_factory=list)  # every range this host may see written


def _prepare(pair: HostPair, sizes: tuple[int, ...], rng: random.Random) -> dict[Side, Plan]:
    plans = {side: Plan() for side in Side}
    for side, plan in plans.items():
        host, memory = pair.hosts[side], pair.memory[side]
        address = 0x1000_0000

        def take(length: int) -> int:
            nonlocal address
            start = address
            address += max(length, 1) + 0x1000 + rng.randrange(64)  # unaligned, separated
            plan.regions.append((start, length))
            return start

        for size in sizes:
            plan.data[size] = rng.randbytes(size)
            plan.source[size] = take(size)
            memory.write(plan.source[size], plan.data[size])
            plan.source_stag[size] = host.register_memory(plan.source[size], size, Access.REMOTE_READ,
                                                          base_to=rng.randrange(1 << 40))
            sink = take(size)
            plan.write_sink[size] = (sink, host.register_memory(sink, size, Access.REMOTE_WRITE, base_to=0x1000))
            sink = take(size)
            plan.read_sink[size] = (sink, host.register_memory(sink, size, Access.LOCAL_WRITE, stream_id=STREAM))
            for _ in SEND_VARIANTS:
                buffer = take(size)
                plan.receive_buffers.append((buffer, size))
                host.post_recv(STREAM, buffer, size)
            plan.targets += [host.register_memory(take(0) + 0x100, 64, Access.REMOTE_WRITE) for _ in range(2)]
    return plans


def exchange(pair: HostPair, sizes: tuple[int, ...], seed: int) -> None:
    """Every RDMAP operation at every size in both directions at once; verify everything exactly."""
    plans = _prepare(pair, sizes, random.Random(seed))
    expected_work: dict[Side, list[tuple[int, Opcode, int]]] = {side: [] for side in Side}
    reads: dict[Side, list[tuple[int, int]]] = {side: [] for side in Side}  # (size, wr_id)
    pending_reads = {side: list(sizes) for side in Side}
    for side in Side:
        host, mine, peer = pair.hosts[side], plans[side], plans[side.peer]
        targets = iter(peer.targets)
        for size in sizes:
            _, stag = peer.write_sink[size]
            wr_id = host.post_write(STREAM, stag, 0x1000, mine.source[size], size)
            expected_work[side].append((wr_id, Opcode.RDMA_WRITE, size))
            for opcode, solicited, invalidate in SEND_VARIANTS:
                wr_id = host.post_send(STREAM, mine.source[size], size, solicited=solicited,
                                       invalidate_stag=next(targets) if invalidate else None)
                expected_work[side].append((wr_id, opcode, size))

    def issue_reads() -> None:
        """Keep ORD Reads outstanding per host (RFC 5040: never more)."""
        for side in Side:
            host, mine, peer = pair.hosts[side], plans[side], plans[side.peer]
            while pending_reads[side]:
                size = pending_reads[side][0]
                sink, stag = mine.read_sink[size]
                region = pair.hosts[side.peer].memory_table.lookup(peer.source_stag[size])
                try:
                    wr_id = host.post_read(STREAM, stag, 0, peer.source_stag[size], region.base_to, size)
                except ReadLimitExceeded:
                    break
                reads[side].append((size, wr_id))
                pending_reads[side].pop(0)

    def done() -> bool:
        issue_reads()
        return all(
            not pending_reads[side]
            and len(pair.of(side, ReadCompletion)) == len(sizes)
            and len(pair.of(side, WriteArrived)) == len(sizes)
            and len(pair.of(side, ReceiveCompletion)) == len(sizes) * len(SEND_VARIANTS)
            and len(pair.of(side, WorkCompletion)) == len(sizes) * (1 + len(SEND_VARIANTS))
            for side in Side
        )

    pair.run_until(done)
    for _ in range(50):  # anything late (a duplicate, a stray retransmission) would show up here
        pair.step()

    for side in Side:
        mine, peer, memory, host = plans[side], plans[side.peer], pair.memory[side], pair.hosts[side]
        for size in sizes:
            assert memory.read(mine.write_sink[size][0], size) == peer.data[size], f"Write {size} to {side}"
            assert memory.read(mine.read_sink[size][0], size) == peer.data[size], f"Read {size} by {side}"
        assert Counter((e.stag, e.length) for e in pair.of(side, WriteArrived)) == Counter(
            (mine.write_sink[size][1], size) for size in sizes)
        assert sorted((e.wr_id, e.length) for e in pair.of(side, ReadCompletion)) == sorted(
            (wr_id, size) for size, wr_id in reads[side])
        assert sorted((e.wr_id, e.opcode, e.length) for e in pair.of(side, WorkCompletion)) == sorted(
            expected_work[side])
        # RFC 5041 5.3 / RFC 5040 5.3: untagged messages complete in MSN order, into the buffers posted in order.
        receives = pair.of(side, ReceiveCompletion)
        targets = iter(mine.targets)
        expected = []
        for size in sizes:
            for opcode, solicited, invalidate in SEND_VARIANTS:
                expected.append((opcode, size, solicited, next(targets) if invalidate else None))
        assert [(e.opcode, e.length, e.solicited, e.invalidated_stag) for e in receives] == expected
        assert [(e.address, e.length) for e in receives] == mine.receive_buffers
        for event, (size, _) in zip(receives, [(s, v) for s in sizes for v in SEND_VARIANTS]):
            assert memory.read(event.address, size) == peer.data[size]
        for stag in mine.targets:
            assert not host.memory_table.lookup(stag).valid, "RFC 5040 5.3: Send with Invalidate revokes the STag"
        assert memory.written_outside(mine.regions) == []
        assert not pair.of(side, RdmapTerminated) and not pair.of(side, StreamTerminated)
        assert not pair.of(side, Failed) and not pair.of(side, Aborted)


def _check_session(pair: HostPair) -> None:
    a, b = pair.of(Side.A, SessionEstablished), pair.of(Side.B, SessionEstablished)
    assert [(e.role, e.ird, e.ord, e.peer_to_peer, e.rtr) for e in a] == [(Role.INITIATOR, 4, 4, True, RtrType.WRITE)]
    assert [(e.role, e.ird, e.ord, e.peer_to_peer) for e in b] == [(Role.RESPONDER, 4, 4, True)]
    assert b[0].peer_private_data == b"hello from A"
    assert [e.rtr for e in pair.of(Side.B, RtrArrived)] == [RtrType.WRITE]


def _corrupted_frames_dropped(pair: HostPair) -> tuple[list[bool], list[bool]]:
    """Every frame the link damaged was dropped on receipt; returns (damaged, ethernet-header-only) per frame.

    No checksum covers the Ethernet header (the capture has no FCS): a damaged
    MAC address or ethertype is not a checksum failure `rnic dissect` can see."""
    sent = {frame for _, _, frame in pair.sent}
    tails = {frame[14:] for frame in sent}
    damaged = [frame not in sent for _, frame in pair.link.recording]
    address_only = [d and frame[14:] in tails for d, (_, frame) in zip(damaged, pair.link.recording)]
    drops = sum(s.dropped_bad_checksum + s.dropped_malformed + s.dropped_misaddressed
                for s in (pair.a.statistics, pair.b.statistics))
    assert drops == sum(damaged)
    return damaged, address_only


def _dissect_agrees(pair: HostPair, capture: Path) -> list[dict]:
    damaged, address_only = _corrupted_frames_dropped(pair)
    frames = list(dissect_capture(capture.read_bytes()))
    assert len(frames) == len(damaged)
    for frame, bad, no_checksum_covers_it in zip(frames, damaged, address_only):
        if bad and not no_checksum_covers_it:
            assert frame["errors"], f"frame {frame['index']}: damage not flagged"
        else:  # intact, or only the Ethernet header damaged (no FCS in the capture): dropped as misaddressed
            assert not frame["errors"], frame["errors"]
            # a damaged ethertype makes it other traffic, which rnic dissect lists but does not dissect
            assert frame["sctp"]["checksum_ok"] if "sctp" in frame else bad and "not_dissected" in frame
    return frames


def _tshark_statuses(capture: Path) -> list[list[str]]:
    tshark = shutil.which("tshark")
    if tshark is None:
        if os.environ.get("RNIC_REQUIRE_TSHARK") == "1":
            pytest.fail("tshark is required (RNIC_REQUIRE_TSHARK=1) but not installed")
        pytest.skip("tshark not installed (apt-get install tshark)")
    command = [tshark, "-n", "-r", str(capture), "-o", "sctp.checksum:CRC-32C", "-o", "ip.check_checksum:TRUE",
               "-o", "udp.check_checksum:TRUE", "-T", "fields", "-e", "sctp.checksum.status",
               "-e", "ip.checksum.status", "-e", "udp.checksum.status", "-e", "_ws.malformed"]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return [line.split("\t") for line in result.stdout.splitlines()]


def _tshark_agrees(frames: list[dict], capture: Path) -> None:
    """tshark's verdict on the SCTP CRC32c (and IPv4/UDP checksums) matches the model's, frame by frame."""
    rows = _tshark_statuses(capture)
    assert len(rows) == len(frames)
    for (sctp, ip, udp, malformed), frame in zip(rows, frames):
        if not frame["errors"]:
            if "sctp" in frame:  # else a damaged ethertype: other traffic to both
                assert (sctp, ip, malformed) == ("1", "1", ""), f"frame {frame['index']}: tshark {sctp, ip, udp}"
            continue
        if "sctp" in frame and sctp:
            assert (sctp == "1") == frame["sctp"]["checksum_ok"], f"frame {frame['index']}"
        tshark_bad = sctp in ("0", "") or ip == "0" or udp == "0" or malformed != ""
        assert tshark_bad, f"frame {frame['index']}: model flags {frame['errors']}, tshark finds nothing"


def _scapy_agrees(pair: HostPair, frames: list[dict], udp: bool, intact_limit: int | None = None) -> None:
    """scapy reads ports and tag like the model and its CRC32c agrees on which packets are damaged.

    Every damaged frame is checked, and the first `intact_limit` intact ones (scapy is slow)."""
    from scapy.layers.inet import UDP
    from scapy.layers.l2 import Ether
    from scapy.layers.sctp import SCTP

    checked_damage = checked_intact = 0
    for (_, raw), frame in zip(pair.link.recording, frames):
        if not frame["errors"] and intact_limit is not None and checked_intact >= intact_limit:
            continue
        layers = {error["layer"] for error in frame["errors"]}
        if layers - {"sctp", "udp"}:
            continue  # damage below SCTP: scapy would dissect something else
        ether = Ether(raw)
        wire = bytes(ether[UDP].payload) if udp else bytes(ether[SCTP])
        sctp = SCTP(wire)
        ours = frame.get("sctp")
        if ours is None and "udp" in layers:
            continue  # a damaged UDP header kept the model from reaching SCTP
        intact = ours is not None and ours["checksum_ok"]
        if ours is not None:
            assert (sctp.sport, sctp.dport, sctp.tag) == (ours["src_port"], ours["dst_port"],
                                                           ours["verification_tag"])
        sctp.chksum = None
        assert (bytes(sctp)[8:12] == wire[8:12]) == intact, f"frame {frame['index']}"
        checked_damage += not intact
        checked_intact += intact
    assert checked_damage, "the run should include packets damaged inside SCTP"


# -- tests ------------------------------------------------------------------------------


@pytest.mark.slow
def test_clean_link_every_operation_up_to_one_mib(tmp_path: Path) -> None:
    """RFC 5040 5.1-5.3 over RFC 5043: all six operations both ways, 0 B to 1 MiB, then a graceful close."""
    pair = create_pair()
    pair.connect()
    connected = {side: pair.of(side, Connected)[0] for side in Side}
    assert all(e.ddp_enabled and e.peer_adaptation_code_point == 1 and e.mulpdu == MULPDU for e in connected.values())
    open_stream(pair)
    _check_session(pair)
    exchange(pair, SIZES_CLEAN, seed=7)
    close_both(pair)
    assert [type(e) for e in pair.of(Side.B, StreamTerminated)] == [StreamTerminated]  # A's Terminate (6.2)
    assert pair.a.closed and pair.b.closed
    assert sum(s.association.retransmitted_by_timeout for s in (pair.a.statistics, pair.b.statistics)) == 0
    frames = _dissect_agrees(pair, write_capture(pair, tmp_path / "clean.pcap"))
    assert not any(frame["errors"] for frame in frames)


@pytest.mark.slow
@pytest.mark.parametrize("loss, seed", [(0.01, 11), (0.05, 12)], ids=["1pct", "5pct"])
def test_lossy_link_nothing_lost_duplicated_or_misplaced(loss: float, seed: int, tmp_path: Path) -> None:
    """Loss, duplication, reordering and corruption at `loss`: SCTP recovers (RFC 4960 6.3, 7.2.4), damaged
    frames are dropped by their checksums (RFC 4960 6.8) and never placed, every byte lands exactly once."""
    pair = create_pair(loss=loss, seed=seed)
    pair.connect()
    open_stream(pair)
    _check_session(pair)
    exchange(pair, SIZES_LOSSY + (MIB,), seed=seed)
    close_both(pair)
    stats = pair.link.stats
    assert stats.lost and stats.duplicated and stats.reordered and stats.corrupted
    retransmitted = sum(s.association.retransmitted_by_timeout + s.association.fast_retransmitted
                        for s in (pair.a.statistics, pair.b.statistics))
    assert retransmitted > 0
    capture = write_capture(pair, tmp_path / "lossy.pcap")
    frames = _dissect_agrees(pair, capture)
    assert any(frame["errors"] for frame in frames)
    _tshark_agrees(frames, capture)
    _scapy_agrees(pair, frames, udp=False, intact_limit=300)


def test_udp_9899_encapsulation_end_to_end(tmp_path: Path) -> None:
    """RFC 6951: the same exchange over UDP port 9899, MULPDU 8 bytes smaller, at 3% impairment."""
    pair = create_pair(loss=0.03, seed=21, udp=True)
    pair.connect()
    assert pair.of(Side.A, Connected)[0].mulpdu == mulpdu(pair.a.config.path_mtu, udp=True)  # 8 bytes of UDP less
    open_stream(pair)
    exchange(pair, (0, 1, 1409, 1410, 65537), seed=21)
    close_both(pair)
    capture = write_capture(pair, tmp_path / "udp.pcap")
    frames = _dissect_agrees(pair, capture)
    assert all(frame["udp"]["dst_port"] == 9899 for frame in frames if not frame["errors"])
    _tshark_agrees(frames, capture)
    _scapy_agrees(pair, frames, udp=True)


def test_same_seed_same_capture() -> None:
    """The whole run is deterministic for a seed: the same frames at the same simulated times."""
    captures = []
    for _ in range(2):
        pair = create_pair(loss=0.05, seed=5)
        pair.connect()
        open_stream(pair)
        exchange(pair, (0, 3000), seed=5)
        close_both(pair)
        captures.append(write_pcap(pair.link.recording))
    assert captures[0] == captures[1]


def test_rfc5043_11_1_peer_without_ddp_indication_gets_no_ddp() -> None:
    """RFC 5043 11.1: a peer that sends no Adaptation Layer Indication: the association is up,
    DDP procedures are forbidden, and no Initiate is sent."""
    pair = create_pair(ddp_b=False)
    pair.connect()
    assert [(e.ddp_enabled, e.peer_adaptation_code_point) for e in pair.of(Side.A, Connected)] == [(False, None)]
    assert [e.peer_adaptation_code_point for e in pair.of(Side.A, DdpUnavailable)] == [None]
    assert not pair.a.ddp_enabled
    frames_before = pair.link.stats.sent
    with pytest.raises(DdpForbidden):
        pair.a.open_stream(STREAM)
    assert pair.a.data_to_send(pair.now) == [] and pair.link.stats.sent == frames_before


def test_rfc6581_9_asymmetric_resources_negotiate_and_ord_is_enforced() -> None:
    """RFC 6581 9: responder IRD = min(local IRD, initiator ORD), responder ORD = min(local ORD, initiator
    IRD), initiator ORD lowered to the responder IRD; both RDMAP endpoints then enforce their ORD."""
    write_rtr = (RtrType.WRITE,)
    resources = {
        Side.A: LocalResources(ird=2, ord=6, peer_to_peer=True, rtr_types=write_rtr),
        Side.B: LocalResources(ird=3, ord=1, peer_to_peer=True, rtr_types=write_rtr),
    }
    pair = create_pair(resources=resources)
    pair.connect()
    open_stream(pair)
    a, b = pair.of(Side.A, SessionEstablished)[0], pair.of(Side.B, SessionEstablished)[0]
    assert (a.ird, a.ord) == (2, 3)
    assert (b.ird, b.ord) == (3, 1)
    assert (a.negotiated.peer.ird, a.negotiated.peer.ord) == (3, 1)  # the peer's values go to the ULP
    source = pair.b.register_memory(0x1000, 64, Access.REMOTE_READ)
    sink = pair.a.register_memory(0x9000, 64 * 4, Access.LOCAL_WRITE)
    for i in range(3):
        pair.a.post_read(STREAM, sink, 64 * i, source, 0, 64)
    with pytest.raises(ReadLimitExceeded):
        pair.a.post_read(STREAM, sink, 192, source, 0, 64)
    pair.run_until(lambda: len(pair.of(Side.A, ReadCompletion)) == 3)
    assert not pair.of(Side.B, RdmapTerminated)  # three inbound Reads fit B's IRD of 3


def test_user_decides_sessions_reject_then_accept() -> None:
    """RFC 5043 6.2, 6.3: without a policy the Initiate waits for the user; a Reject carries private
    data back; a later Initiate on another stream is accepted with the user's private data."""
    pair = create_pair(policy_b=None)
    pair.connect()
    pair.a.open_stream(1, b"first")
    pair.run_until(lambda: pair.of(Side.B, SessionRequested))
    request = pair.of(Side.B, SessionRequested)[0]
    assert (request.stream_id, request.private_data) == (1, b"first")
    assert request.proposal is not None and request.proposal.rtr_accepted == frozenset({RtrType.WRITE})
    pair.b.reject_session(1, b"not this one")
    pair.run_until(lambda: pair.of(Side.A, SessionRejected))
    assert [(e.stream_id, e.private_data, e.by_user) for e in pair.of(Side.A, SessionRejected)] == [
        (1, b"not this one", True)]
    pair.a.open_stream(2, b"second")
    pair.run_until(lambda: len(pair.of(Side.B, SessionRequested)) == 2)
    pair.b.accept_session(2, b"welcome")
    pair.run_until(lambda: pair.of(Side.A, SessionEstablished) and pair.of(Side.B, RtrArrived))
    assert [(e.stream_id, e.peer_private_data) for e in pair.of(Side.A, SessionEstablished)] == [(2, b"welcome")]
    pair.b.post_recv(2, 0x5000, 16)
    pair.memory[Side.A].write(0x100, b"sixteen bytes!!!")
    pair.a.post_send(2, 0x100, 16)
    pair.run_until(lambda: pair.of(Side.B, ReceiveCompletion))
    assert pair.memory[Side.B].read(0x5000, 16) == b"sixteen bytes!!!"
    close_both(pair)
    assert pair.a.closed and pair.b.closed


def test_rfc5040_send_with_invalidate_of_unknown_stag_terminates_the_stream() -> None:
    """RFC 5040 5.3 / 7: invalidating an STag the responder does not have is a Remote Operation Error
    (0x2/0x09); the responder sends a Terminate, both RDMAP streams are in error, nothing is delivered."""
    pair = create_pair()
    pair.connect()
    open_stream(pair)
    pair.b.post_recv(STREAM, 0x5000, 64)
    pair.a.post_send(STREAM, 0x100, 8, invalidate_stag=0xDEAD00)
    pair.run_until(lambda: pair.of(Side.A, RdmapTerminated))
    sent, received = pair.of(Side.B, RdmapTerminated), pair.of(Side.A, RdmapTerminated)
    assert [(e.sent, e.terminate.number) for e in sent] == [(True, (0, 2, 0x09))]
    assert [(e.sent, e.terminate.number) for e in received] == [(False, (0, 2, 0x09))]
    assert not pair.of(Side.B, ReceiveCompletion)
    assert pair.memory[Side.B].written_outside([(0x5000, 64)]) == []  # placed into the posted buffer only


def test_frames_for_another_host_are_dropped_unread() -> None:
    """Only frames to this host's MAC and IPv4 address, from its peer, reach SCTP."""
    pair = create_pair()
    pair.connect()
    open_stream(pair)
    stag = pair.b.register_memory(0x1000, 8, Access.REMOTE_WRITE)
    pair.memory[Side.A].write(0x100, b"12345678")
    pair.a.post_write(STREAM, stag, 0, 0x100, 8)
    (frame,) = pair.a.data_to_send(pair.now)
    for offset, value in ((0, 0x04), (6, 0x04), (29, 0x09), (33, 0x09)):  # dst MAC, src MAC, src IP, dst IP
        forged = bytearray(frame)
        forged[offset] ^= value
        if offset >= 14:  # keep the IPv4 header checksum right: the address check must catch it
            forged[24:26] = b"\x00\x00"
            forged[24:26] = internet_checksum(bytes(forged[14:34])).to_bytes(2, "big")
        pair.b.receive(bytes(forged), pair.now)
    assert pair.b.statistics.dropped_misaddressed == 4
    assert pair.memory[Side.B].writes == []
    pair.b.receive(frame, pair.now)
    assert pair.memory[Side.B].read(0x1000, 8) == b"12345678"


# -- teardown: out-of-the-blue packets (RFC 4960 8.4) and the close() deadline -----------------------

PEER_MAC, PEER_IP, PEER_PORT = bytes.fromhex("02000000000e"), "10.0.0.14", 6000
OOTB_TAG = 0x5EED_F00D


def _chunks(frame: bytes) -> tuple[Chunk, ...]:
    return SctpPacket.decode(Frame.decode(frame).sctp).chunks


def _lone_host(udp: bool = False) -> SoftRnic:
    """A host that never listened and never connected."""
    return SoftRnic(RnicConfig(MAC[Side.A], IP[Side.A], PORT[Side.A], udp=udp), SparseMemory(), random.Random(3))


def _ootb_frame(*chunks: Chunk, tag: int = OOTB_TAG, dst_port: int = PORT[Side.A], src_ip: str = PEER_IP,
                udp: bool = False) -> bytes:
    packet = SctpPacket(PEER_PORT, dst_port, tag, chunks).encode()
    return build_frame(packet, PEER_MAC, MAC[Side.A], src_ip, IP[Side.A], udp=udp)


def test_rfc4960_8_4_rule_5_lost_final_shutdown_complete_both_sides_close() -> None:
    """RFC 4960 8.4 rule 5 (with 9.2, 8.5.1 C): A's only SHUTDOWN COMPLETE is lost on an otherwise clean link.
    A, the active opener, has closed its association and has no Listener; B retransmits its SHUTDOWN ACK on
    T2-shutdown, and A answers that out-of-the-blue SHUTDOWN ACK with a SHUTDOWN COMPLETE carrying the SHUTDOWN
    ACK's own verification tag with the T bit set, which B accepts: both sides end Closed, none Failed."""
    pair = create_pair()
    pair.connect()
    open_stream(pair)
    lost: list[float] = []

    def lose_first_shutdown_complete(side: Side, frame: bytes) -> bool:
        if side is Side.A and not lost and any(isinstance(c, ShutdownCompleteChunk) for c in _chunks(frame)):
            lost.append(pair.now)
            return True
        return False

    pair.tap = lambda side, frame: not lose_first_shutdown_complete(side, frame)
    close_both(pair)
    assert lost and pair.a.closed and pair.b.closed
    assert [type(e) for e in pair.events[Side.A] + pair.events[Side.B] if isinstance(e, (Closed, Aborted, Failed))] \
        == [Closed, Closed]
    frames = [Frame.decode(f) for _, f in pair.link.recording or []]
    from_a = [SctpPacket.decode(f.sctp) for f in frames if f.ip.src == pair.a.config.ip]
    from_b = [SctpPacket.decode(f.sctp) for f in frames if f.ip.src == pair.b.config.ip]
    shutdown_acks = [p for p in from_b if isinstance(p.chunks[0], ShutdownAckChunk)]
    assert len(shutdown_acks) == 2  # the first, answered by the lost SHUTDOWN COMPLETE, and one retransmission
    (answer,) = [p for p in from_a if isinstance(p.chunks[0], ShutdownCompleteChunk)]  # only the OOTB one arrived
    assert answer.chunks == (ShutdownCompleteChunk(tag_reflected=True),)
    assert answer.verification_tag == shutdown_acks[-1].verification_tag
    assert (answer.src_port, answer.dst_port) == (PORT[Side.A], PORT[Side.B])
    assert pair.now - lost[0] < 10.0  # one T2-shutdown (RTO), not Association.Max.Retrans of them


@pytest.mark.parametrize("udp", [False, True], ids=["ipv4", "udp"])
def test_rfc4960_8_4_rule_5_ootb_shutdown_ack_to_a_never_connected_host(udp: bool) -> None:
    """RFC 4960 8.4 rule 5: a SHUTDOWN ACK to a host with no association and no Listener is answered with a
    SHUTDOWN COMPLETE, T bit set, verification tag copied from the SHUTDOWN ACK, to the sender's addresses."""
    host = _lone_host(udp)
    host.receive(_ootb_frame(ShutdownAckChunk(), udp=udp), 1.0)
    assert host.next_events() == []
    (frame,) = host.data_to_send(1.0)
    decoded = Frame.decode(frame)
    assert (decoded.eth.dst, str(decoded.ip.dst)) == (PEER_MAC, PEER_IP)
    assert (decoded.udp is not None) == udp
    packet = SctpPacket.decode(decoded.sctp)
    assert (packet.src_port, packet.dst_port, packet.verification_tag) == (PORT[Side.A], PEER_PORT, OOTB_TAG)
    assert packet.chunks == (ShutdownCompleteChunk(tag_reflected=True),)
    assert host.next_timeout() is None and not host.closed  # stateless: nothing opened, nothing pending


@pytest.mark.parametrize("chunk", [
    DataChunk(tsn=77, stream_id=0, ssn=0, ppid=PPID_DDP_SEGMENT, user_data=b"stale", unordered=True),
    HeartbeatChunk(info=b"are you there"),
    ShutdownChunk(cumulative_tsn_ack=5),
], ids=["DATA", "HEARTBEAT", "SHUTDOWN"])
def test_rfc4960_8_4_rule_8_ootb_packet_gets_abort_with_t_bit(chunk: Chunk) -> None:
    """RFC 4960 8.4 rule 8: any other out-of-the-blue packet gets an ABORT with the T bit set and the OOTB
    packet's verification tag; one ABORT per such packet (no rate limit), nothing else happens."""
    host = _lone_host()
    host.receive(_ootb_frame(chunk), 2.0)
    (frame,) = host.data_to_send(2.0)
    packet = SctpPacket.decode(Frame.decode(frame).sctp)
    assert (packet.src_port, packet.dst_port, packet.verification_tag) == (PORT[Side.A], PEER_PORT, OOTB_TAG)
    assert packet.chunks == (AbortChunk(tag_reflected=True),)
    host.receive(_ootb_frame(chunk), 2.5)
    assert len(host.data_to_send(2.5)) == 1


@pytest.mark.parametrize("frame", [
    _ootb_frame(AbortChunk()),  # rule 2
    _ootb_frame(DataChunk(tsn=1, stream_id=0, ssn=0, ppid=PPID_DDP_SEGMENT, user_data=b"x"),
                AbortChunk(tag_reflected=True)),  # rule 2: an ABORT anywhere in the packet
    _ootb_frame(InitChunk(initiate_tag=9, a_rwnd=65536, outbound_streams=8, inbound_streams=8, initial_tsn=1),
                tag=5),  # 8.5.1 A: an INIT with a tag is discarded
    _ootb_frame(CookieEchoChunk(cookie=b"not ours")),  # rule 4: no listener, no cookie of ours
    _ootb_frame(ShutdownCompleteChunk()),  # rule 6
    _ootb_frame(CookieAckChunk()),  # rule 7
    _ootb_frame(ErrorChunk(causes=(ErrorCause(ErrorCauseCode.STALE_COOKIE, b"\0\0\0\1"),))),  # rule 7
    _ootb_frame(ShutdownAckChunk(), src_ip="224.0.0.18"),  # rule 1: from a multicast address
    _ootb_frame(ShutdownAckChunk(), dst_port=PORT[Side.A] + 1),  # no endpoint on that port
], ids=["ABORT", "ABORT-bundled", "INIT-with-a-tag", "COOKIE-ECHO", "SHUTDOWN-COMPLETE", "COOKIE-ACK",
        "stale-cookie-ERROR", "multicast-source", "other-port"])
def test_rfc4960_8_4_ootb_packets_discarded_silently(frame: bytes) -> None:
    """RFC 4960 8.4 rules 1, 2, 4 (no listener), 6 and 7, and 8.5.1 A: no answer at all."""
    host = _lone_host()
    host.receive(frame, 1.0)
    assert host.next_events() == []
    assert host.data_to_send(1.0) == []


def test_rfc4960_8_4_rule_3_an_init_to_a_host_that_does_not_listen_gets_an_abort() -> None:
    """RFC 4960 8.4 rule 3 with 5.1: the INIT cannot be processed (nothing listens), so it is answered with an
    ABORT whose Verification Tag is the INIT's Initiate Tag and whose T bit is 0, to the sender's addresses."""
    host = _lone_host()
    init = InitChunk(initiate_tag=0xC0FFEE, a_rwnd=65536, outbound_streams=8, inbound_streams=8, initial_tsn=1)
    host.receive(_ootb_frame(init, tag=0), 1.0)
    (frame,) = host.data_to_send(1.0)
    decoded = Frame.decode(frame)
    assert (decoded.eth.dst, str(decoded.ip.dst)) == (PEER_MAC, PEER_IP)
    packet = SctpPacket.decode(decoded.sctp)
    assert (packet.src_port, packet.dst_port, packet.verification_tag) == (PORT[Side.A], PEER_PORT, 0xC0FFEE)
    assert packet.chunks == (AbortChunk(tag_reflected=False),)
    assert host.next_events() == [] and host.next_timeout() is None


def test_a_connect_to_a_host_that_does_not_listen_is_aborted_within_a_round_trip() -> None:
    """RFC 4960 8.4 rule 3: the initiator's association ends Aborted one round trip after its INIT, in
    COOKIE-WAIT, instead of failing after Max.Init.Retransmits (5.1 C)."""
    pair = create_pair()
    pair.a.connect(pair.now, MAC[Side.B], IP[Side.B], PORT[Side.B])  # B never listened
    pair.run_until(lambda: pair.a.closed)
    assert [type(e) for e in pair.events[Side.A] if isinstance(e, (Closed, Aborted, Failed))] == [Aborted]
    assert pair.now < 0.01 and not pair.b.closed and pair.b.association is None


def test_closed_active_opener_aborts_a_stale_data_chunk() -> None:
    """RFC 4960 8.4 rule 8 after a graceful close: the old peer's DATA (T=0, the old tag) gets ABORT with T=1
    and that tag, which the peer, closed too, discards by rule 2: no exchange follows."""
    pair = create_pair()
    pair.connect()
    open_stream(pair)
    old_tag = pair.b.association.peer_tag
    close_both(pair)
    stale = SctpPacket(PORT[Side.B], PORT[Side.A], old_tag,
                       (DataChunk(tsn=1, stream_id=0, ssn=0, ppid=PPID_DDP_SEGMENT, user_data=b"late"),)).encode()
    pair.a.receive(build_frame(stale, MAC[Side.B], MAC[Side.A], IP[Side.B], IP[Side.A]), pair.now)
    (frame,) = pair.a.data_to_send(pair.now)
    packet = SctpPacket.decode(Frame.decode(frame).sctp)
    assert (packet.verification_tag, packet.chunks) == (old_tag, (AbortChunk(tag_reflected=True),))
    pair.b.receive(frame, pair.now)
    assert pair.b.data_to_send(pair.now) == [] and not pair.of(Side.B, Aborted)


@pytest.mark.parametrize("timeout", [30.0, 5.0], ids=["default-30s", "configured-5s"])
def test_close_aborts_when_the_peer_never_answers_the_terminate(timeout: float) -> None:
    """RFC 5043 6.2 / 6.6 with RFC 4960 9.1: B acknowledges A's Terminate in SCTP but its DDP layer never
    answers it, so the stream is never released; `close_timeout` (default 30 s of `now`) after `close()`, A
    ABORTs the association and reports CloseAborted with the stream; B sees the ABORT (User-Initiated Abort)."""
    pair = create_pair(close_timeout=timeout)
    pair.connect()
    open_stream(pair)
    receive = pair.b._sessions.receive  # test double: B's session layer ignores every session control message
    pair.b._sessions.receive = lambda message: (
        None if message.ppid == PPID_DDP_SESSION_CONTROL else receive(message))
    closed_at = pair.now
    pair.a.close(pair.now)
    pair.run_until(lambda: pair.of(Side.A, CloseAborted) and pair.of(Side.B, Aborted))
    (event,) = pair.of(Side.A, CloseAborted)
    assert event.streams == (STREAM,) and event.timeout == timeout
    assert "not released" in event.reason and "RFC 4960 9.1" in event.reason
    assert timeout <= pair.now - closed_at < timeout + 1.0
    assert pair.a.closed and pair.b.closed and not pair.of(Side.A, Closed)
    (aborted,) = pair.of(Side.B, Aborted)
    assert [cause.code for cause in aborted.causes] == [ErrorCauseCode.USER_INITIATED_ABORT]
    assert pair.a.next_timeout() is None


def test_close_deadline_is_dropped_once_shutdown_starts() -> None:
    """A peer that answers the Terminate releases the stream well within the deadline; SHUTDOWN starts
    (RFC 4960 9.2), the close deadline is dropped and no CloseAborted is reported, nor any timer left."""
    pair = create_pair(close_timeout=5.0)
    pair.connect()
    open_stream(pair)
    close_both(pair)
    assert not pair.of(Side.A, CloseAborted) and pair.a.next_timeout() is None and pair.b.next_timeout() is None


# -- liveness: a run ends in a reported failure, never in silence ---------------------------------


def test_a_dead_link_ends_connect_with_the_max_init_retransmits_failure() -> None:
    """Every frame lost: A sends INIT 1 + 8 times with T1-init doubling from RTO.Initial 3 s to RTO.Max 60 s
    (RFC 4960 5.1 C, 6.3.3, 15) and gives up at 3+6+12+24+48+60+60+60+60 = 333 s; the pair then has nothing
    left to do and says which host's association ended, how and in which state."""
    pair = HostPair.create(LinkConfig(loss=1.0))
    with pytest.raises(AssociationEnded) as ended:
        pair.connect()
    failed = ended.value.finished[Side.A]
    assert isinstance(failed, Failed)
    assert (failed.limit, failed.limit_value, failed.state) == (
        RetransmissionLimit.MAX_INIT_RETRANSMITS, 8, AssociationState.COOKIE_WAIT)
    assert ended.value.finished[Side.B] is None
    assert pair.now == pytest.approx(333.0)
    assert pair.link.stats.sent == 9


def test_a_run_is_not_cut_off_at_an_absolute_time_while_it_makes_progress() -> None:
    """The stall guard counts simulated time without progress, not time since zero: a pair whose clock
    already reads past `IDLE_LIMIT` still connects and opens its session."""
    pair = HostPair.create(LinkConfig())
    pair.now = 2 * IDLE_LIMIT
    pair.connect()
    pair.open_stream(0)
    assert pair.seen(Side.A, SessionEstablished)


def test_a_run_without_progress_stalls_after_the_idle_limit() -> None:
    """Connected hosts keep their heartbeat timers running (RFC 4960 8.3) but nothing new arrives: waiting
    for something that never comes ends in `Stalled` once `idle_limit` passes without progress."""
    pair = HostPair.create(LinkConfig())
    pair.connect()
    start = pair.now
    with pytest.raises(Stalled, match="no progress for 100 s") as stalled:
        pair.run_until(lambda: False, idle_limit=100.0)
    assert not isinstance(stalled.value, AssociationEnded)
    assert start + 30.0 < pair.now <= start + 100.0  # heartbeats went by (HB.interval 30 s), no progress


# -- memory: a window at a time, whatever the message size ---------------------------------------


def test_a_large_write_is_held_a_send_buffer_and_a_window_at_a_time_not_whole() -> None:
    """A 4 MiB RDMA Write is some 2,900 DDP segments.  At every step host A's association holds at most its
    send buffer of unsent data (plus the segment that crossed it) and no more sent-unacknowledged data than
    B's window of 64 KiB allows (RFC 4960 6.1, plus the one chunk 6.1 A lets go when nothing is in flight);
    its DDP session holds nothing back.  The Write completes only once its last segment went to SCTP (RFC
    5041 5.4), and every byte arrives."""
    pair = HostPair.create(LinkConfig())
    pair.connect()
    pair.open_stream(STREAM)
    length = 4 * MIB
    data = random.Random(7).randbytes(length)
    pair.memory[Side.A].write(0x10_0000, data)
    sink = pair.b.register_memory(0x100_0000, length, Access.REMOTE_WRITE)
    association = pair.a.association
    chunk = association.mulpdu + 2  # a DDP segment and its DDP-SSN (RFC 5043 5.2.1)
    segments = -(-length // (association.mulpdu - TAGGED_DDP_HEADER))  # RFC 5041 5.2
    window = host_config(Side.B).receive_buffer
    send_buffer = pair.a.config.send_buffer
    most_chunks = (send_buffer + window) // chunk + 2
    peak = [0]

    def held_within_bounds() -> None:
        assert association.queued_bytes <= send_buffer + chunk
        assert pair.a._sessions.queued(STREAM) == 0
        assert association.outstanding_chunks <= most_chunks
        peak[0] = max(peak[0], association.outstanding_chunks)

    pair.a.post_write(STREAM, sink, 0, 0x10_0000, length)
    pair.collect()
    assert not pair.seen(Side.A, WorkCompletion)  # nothing like the whole message went to SCTP at post time
    held_within_bounds()
    pair.run_until(lambda: pair.seen(Side.B, WriteArrived), held_within_bounds)
    assert pair.seen(Side.A, WorkCompletion)
    assert segments > 2900 and most_chunks < 100 and 40 <= peak[0] <= most_chunks
    assert pair.memory[Side.B].read(0x100_0000, length) == data


@pytest.mark.parametrize("udp", [False, True])
def test_a_pair_nobody_watches_sends_its_packets_unframed_with_the_same_run(udp: bool) -> None:
    """Without a tap, a recording or corruption, the pair's hosts hand each other SCTP packets without their
    frames (`HostPair.send_due`): the run is the recorded run (frames) to the event, the statistic and the
    simulated second, over a lossy, reordering link."""
    def run(record: bool) -> tuple:
        pair = HostPair.create(LinkConfig(loss=0.02, duplication=0.01, reordering=0.05, rate=1e9, seed=11),
                               seed=4, record=record, udp=udp)
        pair.connect()
        pair.open_stream(0)
        pair.a.memory.write(0x10000, bytes(range(256)) * 1024)
        stag = pair.b.register_memory(0x200000, 1 << 18, Access.REMOTE_WRITE | Access.REMOTE_READ)
        for offset in (0, 100_000):
            pair.a.post_write(0, stag, offset, 0x10000 + offset, 100_000)
        pair.run_until(lambda: pair.count(Side.B, WriteArrived) >= 2)
        finished = pair.close()
        return (pair.events, [pair.hosts[side].statistics for side in Side], pair.link.stats, pair.now, finished,
                pair.b.memory.read(0x200000, 200_000))
    assert run(record=False) == run(record=True)


class _AlwaysAsked(SoftRnic):
    """A host the pair asks for packets after every step: never `quiet`, as no subclass is."""


@pytest.mark.parametrize("udp", [False, True])
def test_hosts_left_unasked_while_quiet_make_the_same_run(udp: bool) -> None:
    """`HostPair.send_due` skips a host that had nothing more to send when last asked and was given nothing since
    (`SoftRnic.quiet`, `Association.sends_nothing`), and takes its next timeout as that call found it: the run is
    the run of hosts asked after every step, to the event, the statistic and the simulated second, over a lossy,
    duplicating, reordering link (fast retransmits, T3-rtx, delayed SACKs); and a quiet host asked all the same
    sends nothing."""
    def run(host_class: type[SoftRnic], check: bool = False) -> tuple:
        hosts = {side: host_class(host_config(side, udp=udp), SparseMemory(), random.Random(9 + (side is Side.B)))
                 for side in Side}
        pair = HostPair(hosts, Link(LinkConfig(loss=0.03, duplication=0.01, reordering=0.05, rate=1e9, seed=12)))
        quiet_seen = [0]

        def quiet_hosts_send_nothing() -> None:
            for host in pair.hosts.values():
                if host.quiet:
                    quiet_seen[0] += 1
                    deadline = host.next_timeout()
                    assert host.data_to_send(pair.now) == [] and host.quiet and host.next_timeout() == deadline

        pair.connect()
        pair.open_stream(0)
        pair.a.memory.write(0x10000, bytes(range(256)) * 1024)
        stag = pair.b.register_memory(0x200000, 1 << 18, Access.REMOTE_WRITE | Access.REMOTE_READ)
        local = pair.a.register_memory(0x80000, 1 << 16, Access.LOCAL_WRITE)
        pair.b.post_recv(0, 0x300000, 1 << 16)
        for offset in (0, 100_000):
            pair.a.post_write(0, stag, offset, 0x10000 + offset, 100_000)
        pair.a.post_read(0, local, 0, stag, 1000, 40_000)
        pair.a.post_send(0, 0x10000, 30_000)
        pair.run_until(lambda: pair.count(Side.B, WriteArrived) >= 2 and pair.seen(Side.A, ReadCompletion)
                       and pair.seen(Side.B, ReceiveCompletion), quiet_hosts_send_nothing if check else None)
        finished = pair.close()
        assert quiet_seen[0] > 0 or not check
        return (pair.events, [pair.hosts[side].statistics for side in Side], pair.link.stats, pair.now, finished,
                pair.b.memory.read(0x200000, 200_000), pair.a.memory.read(0x80000, 40_000))
    skipping = run(SoftRnic)
    assert skipping == run(_AlwaysAsked)
    assert skipping == run(SoftRnic, check=True)
