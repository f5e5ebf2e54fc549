"""hdl.rx.frame_receiver.FrameReceiver in Amaranth's simulator: frames built with the model in, checked out.

Each test frame carries the outcome it must have: delivered (the SCTP
packet's bytes and its pkt_meta), passed to the host (the whole frame and
the exception reason) or dropped (the counter it must bump). The bench sends
the frames with random gaps and random back-pressure on pkt/exc and their
meta streams, and checks that exactly the expected bytes come out, in order,
and that every counter matches.
"""

import ipaddress
import random
import struct

import pytest
from amaranth.sim import Simulator

from abi.rx import FRAME_COUNTERS, FrameDrop, FrameException
from hdl.rx.frame_receiver import FrameReceiver
from hdl.stream.packet import keep_mask
from hdl.stream.simulation import Pace, beats_of, collector, packet_collector
from model.net.checksum import internet_checksum
from model.net.frames import build_frame
from model.sctp.packet import (
    AbortChunk,
    DataChunk,
    InitChunk,
    SackChunk,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownCompleteChunk,
)

LOCAL_MAC = bytes.fromhex("02000000aa01")
PEER_MAC = bytes.fromhex("02000000bb02")
LOCAL_IP = "192.0.2.1"
PEER_IP = "192.0.2.2"
OTHER_IP = "192.0.2.77"
UDP_PORT = 9899
# (index, local_port, peer_port, peer_ip, tag, ddp): each tag names its row in its low 4 bits (abi.rx.association_row)
ASSOCIATIONS = [
    (0, 5000, 6000, PEER_IP, 0x11111110, 1),
    (3, 5001, 6001, PEER_IP, 0x22222223, 0),
    (7, 5000, 6000, OTHER_IP, 0x33333337, 1),
]
COUNTER_OF_DROP = {
    FrameDrop.IP_CHECKSUM: "ip_checksum_errors", FrameDrop.CRC: "crc_errors",
    FrameDrop.TAG: "tag_errors", FrameDrop.LENGTH: "length_errors", FrameDrop.OVERFLOW: "overflow",
}


def deliver(sctp: bytes, association: int, ddp: int, udp: bool, peer_ip=PEER_IP):
    meta = {"association": association, "ddp": ddp, "length": len(sctp),
            "peer_ip": int(ipaddress.IPv4Address(peer_ip)), "udp": int(udp)}
    return ("deliver", sctp, meta)


def exception(frame: bytes, reason: FrameException):
    return ("exc", frame, {"reason": int(reason), "length": len(frame)})


def drop(reason: FrameDrop):
    return ("drop", COUNTER_OF_DROP[reason])


def sctp_bytes(chunks, association=0, tag=None, ports=None) -> bytes:
    _, local_port, peer_port, _, expected_tag, _ = ASSOCIATIONS[association]
    src, dst = ports if ports else (peer_port, local_port)
    return SctpPacket(src, dst, expected_tag if tag is None else tag, chunks).encode()


def data_chunk(rng: random.Random, size: int, ppid: int = 16) -> DataChunk:
    return DataChunk(tsn=rng.getrandbits(32), stream_id=rng.getrandbits(4), ssn=0, ppid=ppid,
                     user_data=rng.randbytes(size), unordered=True)


def frame_of(sctp: bytes, udp: bool = False, *, dst_mac=LOCAL_MAC, src_ip=PEER_IP, dst_ip=LOCAL_IP,
             udp_port=UDP_PORT, pad_to: int = 60) -> bytes:
    frame = build_frame(sctp, PEER_MAC, dst_mac, src_ip, dst_ip, udp=udp, dst_port=udp_port,
                        identification=len(sctp) & 0xFFFF)
    return frame + bytes(max(0, pad_to - len(frame)))  # Ethernet minimum frame (no FCS): 60 bytes


def edit_ipv4(frame: bytes, edit, fix_checksum: bool = True) -> bytes:
    """Apply ``edit`` to the IPv4 header bytes (a bytearray, options may be added) and re-checksum."""
    header_length = (frame[14] & 0xF) * 4
    header = bytearray(frame[14:14 + header_length])
    edit(header)
    if fix_checksum:
        header[10:12] = b"\x00\x00"
        header[10:12] = struct.pack("!H", internet_checksum(bytes(header)))
    return frame[:14] + bytes(header) + frame[14 + header_length:]


def good_case(rng: random.Random, size: int, udp: bool):
    association = rng.choice([0, 1])
    chunks = [data_chunk(rng, size)]
    if rng.random() < 0.3:
        chunks.append(SackChunk(cumulative_tsn_ack=rng.getrandbits(32), a_rwnd=65536,
                                gap_blocks=((2, 3),), duplicate_tsns=(7,)))
    sctp = sctp_bytes(chunks, association)
    extra = rng.choice([0, 0, 0, rng.randrange(1, 80)])  # trailing bytes beyond IPv4 Total Length
    frame = frame_of(sctp, udp, pad_to=0) + rng.randbytes(extra)
    return frame, deliver(sctp, ASSOCIATIONS[association][0], ASSOCIATIONS[association][5], udp)


def malformed_cases(rng: random.Random, udp: bool):
    """One frame for each way the receiver must not deliver, with its expected outcome."""
    cases = []
    payload = sctp_bytes([data_chunk(rng, rng.randrange(1, 300))])

    bad_crc = bytearray(payload)
    bad_crc[rng.randrange(12, len(bad_crc))] ^= 1 << rng.randrange(8)
    cases.append((frame_of(bytes(bad_crc), udp), drop(FrameDrop.CRC)))
    stored = bytearray(payload)
    stored[8] ^= 0x80  # the checksum field itself
    cases.append((frame_of(bytes(stored), udp), drop(FrameDrop.CRC)))

    cases.append((edit_ipv4(frame_of(payload, udp), lambda h: h.__setitem__(11, h[11] ^ 0x40), False),
                  drop(FrameDrop.IP_CHECKSUM)))
    for mac in (bytes.fromhex("02000000aa02"), b"\xff" * 6, bytes.fromhex("01005e000001")):
        frame = frame_of(payload, udp, dst_mac=mac)
        cases.append((frame, exception(frame, FrameException.NOT_LOCAL_MAC)))
    frame = frame_of(payload, udp, dst_ip=OTHER_IP)
    cases.append((frame, exception(frame, FrameException.NOT_LOCAL_IP)))
    # RFC 4960 8.5: a tag naming the association's row, but not its tag, is dropped; one naming a row of other
    # transport addresses, or an empty row, finds no association, as a stranger's packet.
    cases.append((frame_of(sctp_bytes([data_chunk(rng, 40)], tag=0x12345670), udp), drop(FrameDrop.TAG)))
    for tag in (0x11111113, 0x11111117, 0x11111115):
        frame = frame_of(sctp_bytes([data_chunk(rng, 40)], tag=tag), udp)
        cases.append((frame, exception(frame, FrameException.NO_ASSOCIATION)))
    frame = frame_of(sctp_bytes([data_chunk(rng, 40)], ports=(6000, 5999)), udp)
    cases.append((frame, exception(frame, FrameException.NO_ASSOCIATION)))
    frame = frame_of(sctp_bytes([data_chunk(rng, 40)]), udp, src_ip="192.0.2.99")
    cases.append((frame, exception(frame, FrameException.NO_ASSOCIATION)))
    # Association 7 is this port pair from OTHER_IP, with its own tag.
    sctp = sctp_bytes([data_chunk(rng, 33)], association=2)
    cases.append((frame_of(sctp, udp, src_ip=OTHER_IP), deliver(sctp, 7, 1, udp, OTHER_IP)))
    # RFC 4960 8.5.1: INIT (tag 0) and T-bit ABORT / SHUTDOWN COMPLETE go to the host.
    init = SctpPacket(6000, 5000, 0, [InitChunk(initiate_tag=0x5555, a_rwnd=65536, outbound_streams=4,
                                                inbound_streams=4, initial_tsn=1)]).encode()
    frame = frame_of(init, udp)
    cases.append((frame, exception(frame, FrameException.INIT)))
    for chunk in (AbortChunk(tag_reflected=True), ShutdownCompleteChunk(tag_reflected=True)):
        frame = frame_of(sctp_bytes([chunk], tag=0x99999999), udp)
        cases.append((frame, exception(frame, FrameException.TAG_REFLECTED)))
    # Without the T bit they are ordinary packets, checked against the association's tag.
    sctp = sctp_bytes([AbortChunk(tag_reflected=False)])
    cases.append((frame_of(sctp, udp), deliver(sctp, 0, 1, udp)))
    # A small packet in a padded frame: the padding must not come out.
    sctp = sctp_bytes([ShutdownAckChunk()], association=1)
    cases.append((frame_of(sctp, udp), deliver(sctp, 3, 0, udp)))

    # IPv4 options (IHL 6) and fragments go to the host.
    def add_option(h):
        h[0] = 0x46
        h[2:4] = struct.pack("!H", struct.unpack("!H", h[2:4])[0] + 4)
        h.extend(b"\x01\x01\x01\x00")
    frame = edit_ipv4(frame_of(payload, udp), add_option)
    cases.append((frame, exception(frame, FrameException.IP_OPTIONS)))
    for flags in (b"\x20\x00", b"\x00\x10", b"\x40\x01"):
        frame = edit_ipv4(frame_of(payload, udp), lambda h, f=flags: h.__setitem__(slice(6, 8), f))
        cases.append((frame, exception(frame, FrameException.FRAGMENT)))
    # Truncations: Total Length past the frame, then headers cut short.
    full = frame_of(payload, udp, pad_to=0)
    cases.append((full[:len(full) - rng.randrange(1, 20)], drop(FrameDrop.LENGTH)))
    cases.append((full[:rng.randrange(14, 34)], drop(FrameDrop.LENGTH)))
    frame = full[:rng.randrange(1, 14)]
    cases.append((frame, exception(frame, FrameException.NOT_IPV4)))
    # An SCTP packet shorter than its common header (RFC 4960 3.1).
    cases.append((frame_of(payload[:rng.randrange(0, 12)], udp), drop(FrameDrop.LENGTH)))
    return cases


def protocol_cases(rng: random.Random):
    """Frames that are not SCTP for this engine, and UDP-specific length errors."""
    cases = []
    payload = sctp_bytes([data_chunk(rng, 20)])
    frame = frame_of(payload, True, udp_port=4789)
    cases.append((frame, exception(frame, FrameException.NOT_SCTP)))
    frame = edit_ipv4(frame_of(payload), lambda h: h.__setitem__(9, 1))  # ICMP
    cases.append((frame, exception(frame, FrameException.NOT_SCTP)))
    arp = (b"\xff" * 6 + PEER_MAC + b"\x08\x06" + bytes.fromhex("0001080006040001") + PEER_MAC
           + ipaddress.IPv4Address(PEER_IP).packed + bytes(6) + ipaddress.IPv4Address(LOCAL_IP).packed)
    arp += bytes(60 - len(arp))
    cases.append((arp, exception(arp, FrameException.NOT_LOCAL_MAC)))
    arp_unicast = LOCAL_MAC + arp[6:]
    cases.append((arp_unicast, exception(arp_unicast, FrameException.NOT_IPV4)))
    ipv6 = LOCAL_MAC + PEER_MAC + b"\x86\xdd" + bytes.fromhex("6000000000088440") + rng.randbytes(40) + payload
    cases.append((ipv6, exception(ipv6, FrameException.NOT_IPV4)))
    version6 = edit_ipv4(frame_of(payload), lambda h: h.__setitem__(0, 0x65))
    cases.append((version6, exception(version6, FrameException.NOT_IPV4)))
    # UDP length past the IPv4 payload, and too short for an SCTP common header.
    for udp_length in (len(payload) + 9, 8 + 11, 7):
        frame = bytearray(frame_of(payload, True))
        frame[38:40] = struct.pack("!H", udp_length)
        cases.append((bytes(frame), drop(FrameDrop.LENGTH)))
    # A shorter UDP length than the datagram is honoured: the packet ends where UDP says.
    frame = bytearray(frame_of(payload + rng.randbytes(5), True))
    frame[38:40] = struct.pack("!H", 8 + len(payload))
    frame[40:42] = b"\x00\x00"  # no UDP checksum (RFC 6951 5 allows it)
    cases.append((bytes(frame), deliver(payload, 0, 1, True)))
    return cases


class Bench:
    """Runs a FrameReceiver on a list of (frame, expected) cases and collects everything it emits."""

    def __init__(self, width, cases, *, seed=0, gap_chance=0.3, ready_chance=0.7, buffer_bytes=16384,
                 max_frames=64, drop_when_full=False, hold_outputs=False):
        self.width = width
        self.drop_when_full = drop_when_full
        self.hold_outputs = hold_outputs  # outputs not ready until every frame was sent
        self.sent = False
        self.cases = cases
        self.rng = random.Random(seed)
        self.gap_chance = gap_chance
        self.ready_chance = ready_chance
        self.dut = FrameReceiver(width, associations=8, buffer_bytes=buffer_bytes, max_frames=max_frames)
        self.packets, self.pkt_metas, self.frames, self.exc_metas = [], [], [], []
        self.refused = 0
        self.counters = {}

    async def source(self, ctx):
        dut = self.dut
        ctx.set(dut.local_mac, int.from_bytes(LOCAL_MAC, "big"))
        ctx.set(dut.local_ip, int(ipaddress.IPv4Address(LOCAL_IP)))
        ctx.set(dut.udp_port, UDP_PORT)
        ctx.set(dut.drop_when_full, self.drop_when_full)
        for index, local_port, peer_port, peer_ip, tag, ddp in ASSOCIATIONS:
            ctx.set(dut.assoc_write.valid, 1)
            ctx.set(dut.assoc_write.payload, {
                "index": index, "valid": 1, "ddp": ddp, "local_port": local_port, "peer_port": peer_port,
                "peer_ip": int(ipaddress.IPv4Address(peer_ip)), "tag": tag})
            await ctx.tick()
        ctx.set(dut.assoc_write.valid, 0)
        for frame, _ in self.cases:
            while self.rng.random() < self.gap_chance:
                ctx.set(dut.net.valid, 0)
                await ctx.tick()
            for beat in beats_of(frame, self.width, self.rng):  # lanes outside keep hold junk
                ctx.set(dut.net.valid, 1)
                ctx.set(dut.net.payload, beat)
                while True:
                    _, _, ready = await ctx.tick().sample(dut.net.ready)
                    if ready:
                        break
                    self.refused += 1
        ctx.set(dut.net.valid, 0)
        self.sent = True

    def run(self, probes=()):
        dut = self.dut
        expected_outputs = sum(1 for _, outcome in self.cases if outcome[0] != "drop")

        async def finish(ctx):
            await self.source(ctx)
            for _ in range(200 + 4 * sum(len(frame) for frame, _ in self.cases) // self.width):
                await ctx.tick()
                if (len(self.packets) + len(self.frames) == expected_outputs
                        and ctx.get(dut.frames) == len(self.cases)):
                    break
            for _ in range(50):  # nothing else may come out
                await ctx.tick()
            self.counters = {name: ctx.get(getattr(dut, name)) for name in FRAME_COUNTERS}

        simulator = Simulator(dut)
        simulator.add_clock(1e-8)
        simulator.add_testbench(finish)
        for probe in probes:
            simulator.add_testbench(probe, background=True)
        metas = {"pkt_meta": [], "exc_meta": []}

        def held(testbench):
            async def after_sending(ctx):
                while self.hold_outputs and not self.sent:
                    await ctx.tick()
                await testbench(ctx)
            return after_sending

        for port, sink in [(dut.pkt, self.packets), (dut.exc, self.frames)]:
            pace = Pace(1 - self.ready_chance, seed=self.rng.random())
            simulator.add_testbench(held(packet_collector(port, sink, pace=pace)), background=True)
        for name, sink in metas.items():
            pace = Pace(1 - self.ready_chance, seed=self.rng.random())
            simulator.add_testbench(held(collector(getattr(dut, name), sink, pace=pace)), background=True)
        simulator.run()
        self.pkt_metas, self.exc_metas = ([{name: int(getattr(meta, name)) for name in meta.shape().members}
                                           for meta in metas[key]] for key in ("pkt_meta", "exc_meta"))
        return self

    def check(self):
        delivered = [outcome for _, outcome in self.cases if outcome[0] == "deliver"]
        excepted = [outcome for _, outcome in self.cases if outcome[0] == "exc"]
        assert len(self.packets) == len(delivered)
        for index, (got, want) in enumerate(zip(self.packets, delivered)):
            assert got == want[1], f"packet {index}: {len(got)} bytes, expected {len(want[1])}"
        assert self.pkt_metas == [meta for _, _, meta in delivered]
        assert len(self.frames) == len(excepted)
        for index, (got, want) in enumerate(zip(self.frames, excepted)):
            assert got == want[1], f"exception frame {index} altered"
        assert self.exc_metas == [meta for _, _, meta in excepted]
        expected = {name: 0 for name in FRAME_COUNTERS}
        expected["frames"] = len(self.cases)
        expected["delivered"] = len(delivered)
        expected["exceptions"] = len(excepted)
        for _, outcome in self.cases:
            if outcome[0] == "drop":
                expected[outcome[1]] += 1
        assert self.counters == expected
        return self


@pytest.mark.parametrize("width", [8, 64])
def test_good_packets_over_ipv4_and_udp(width):
    """DATA (and DATA+SACK) packets, 1..9000 bytes of user data, come out byte-exact with their meta."""
    rng = random.Random(width)
    sizes = [1, 2, 3, 9000] + [rng.randrange(1, 1500) for _ in range(10)]
    cases = [good_case(rng, size, udp=index % 2 == 1) for index, size in enumerate(sizes)]
    Bench(width, cases, seed=width).run().check()


@pytest.mark.parametrize("width", [8, 64])
@pytest.mark.parametrize("udp", [False, True], ids=["ipv4", "udp"])
def test_malformed_frames(width, udp):
    """Every malformed or foreign frame is dropped and counted or passed to the host unchanged."""
    rng = random.Random(width + udp)
    cases = malformed_cases(rng, udp)
    mixed = cases + [good_case(rng, rng.randrange(1, 200), udp) for _ in range(6)]
    rng.shuffle(mixed)
    Bench(width, mixed, seed=width * 3 + udp).run().check()


@pytest.mark.parametrize("width", [8, 64])
def test_other_protocols_and_udp_lengths(width):
    """ARP, IPv6, ICMP, UDP to another port go to the host; bad UDP lengths are length errors."""
    rng = random.Random(100 + width)
    Bench(width, protocol_cases(rng), seed=width).run().check()


@pytest.mark.parametrize("width", [8, 64])
def test_back_to_back_without_bubbles(width):
    """With the outputs always ready, net takes one beat every cycle across back-to-back frames."""
    rng = random.Random(7 * width)
    cases = [good_case(rng, rng.choice([1, 4, 20, 100, 700]), udp=rng.random() < 0.5) for _ in range(40)]
    cases += [c for c in malformed_cases(rng, False)[:8]]
    rng.shuffle(cases)
    bench = Bench(width, cases, seed=1, gap_chance=0.0, ready_chance=1.0).run().check()
    assert bench.refused == 0


def test_buffer_full_back_pressure_and_overflow():
    """A small buffer fills: net.ready drops and nothing is lost; a frame bigger than the whole buffer is
    dropped and counted as overflow, and the receiver carries on."""
    rng = random.Random(5)
    cases = [good_case(rng, rng.randrange(200, 900), udp=False) for _ in range(6)]
    huge = frame_of(sctp_bytes([data_chunk(rng, 3000)]))
    cases.insert(3, (huge, drop(FrameDrop.OVERFLOW)))
    bench = Bench(8, cases, seed=5, gap_chance=0.0, ready_chance=0.2, buffer_bytes=2048).run().check()
    assert bench.refused > 0


def test_drop_when_full_drops_whole_frames_and_never_waits():
    """With drop_when_full and the outputs held: net never waits; the frames that fit the buffer
    (2048 bytes = 255 usable beats at W = 8, no frame released before it is read out whole) are
    delivered, each later one is dropped whole and counted as overflow."""
    rng = random.Random(11)
    sctp = [sctp_bytes([data_chunk(rng, 306)]) for _ in range(8)]
    frames = [frame_of(packet, pad_to=0) for packet in sctp]
    beats = -(-len(frames[0]) // 8)
    fitting = 255 // beats
    assert 0 < fitting < len(frames) and 255 - fitting * beats > 4  # a margin for the write lag
    cases = [(frame, deliver(packet, 0, 1, False) if i < fitting else drop(FrameDrop.OVERFLOW))
             for i, (frame, packet) in enumerate(zip(frames, sctp))]
    bench = Bench(8, cases, seed=3, gap_chance=0.0, ready_chance=1.0, buffer_bytes=2048,
                  drop_when_full=True, hold_outputs=True).run().check()
    assert bench.refused == 0


def test_drop_when_full_skips_frames_past_max_frames():
    """Past ``max_frames`` waiting frames a frame is not taken at all: dropped whole, counted; the
    frames taken are a prefix of those sent and come out intact."""
    rng = random.Random(12)
    sctp = [sctp_bytes([data_chunk(rng, 40)]) for _ in range(16)]
    frames = [frame_of(packet) for packet in sctp]
    bench = Bench(8, [(frame, deliver(packet, 0, 1, False)) for frame, packet in zip(frames, sctp)],
                  seed=4, gap_chance=0.0, ready_chance=1.0, max_frames=4, drop_when_full=True,
                  hold_outputs=True).run()
    taken = len(bench.packets)
    assert 4 <= taken < len(frames) and bench.refused == 0
    bench.cases = bench.cases[:taken] + [(frame, drop(FrameDrop.OVERFLOW)) for frame, _ in bench.cases[taken:]]
    bench.check()




def run_realigner(width, packets, *, ready_chance=1.0, gap_chance=0.0, seed=0):
    """Packets are (bytes, skip_beats, shift, length); returns the output packets and refused input cycles."""
    from hdl.rx.frame_receiver import Realigner
    dut = Realigner(width)
    rng = random.Random(seed)
    outputs, refused = [], [0]

    async def source(ctx):
        for frame, skip_beats, shift, length in packets:
            for index, offset in enumerate(range(0, len(frame), width)):
                while rng.random() < gap_chance:
                    ctx.set(dut.sink.valid, 0)
                    await ctx.tick()
                chunk = frame[offset:offset + width]
                ctx.set(dut.sink.valid, 1)
                ctx.set(dut.sink.payload, {
                    "data": int.from_bytes(chunk + rng.randbytes(width - len(chunk)), "little"),
                    "keep": keep_mask(len(chunk)), "last": offset + width >= len(frame),
                    "skip": index < skip_beats, "shift": shift, "length": length,
                    "length_mask": (1 << min(max(length, 1), width)) - 1, "length_big": length > width})
                while True:
                    _, _, ready = await ctx.tick().sample(dut.sink.ready)
                    if ready:
                        break
                    refused[0] += 1
        ctx.set(dut.sink.valid, 0)
        for _ in range(10):
            await ctx.tick()

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(source)
    simulator.add_testbench(packet_collector(dut.source, outputs, pace=Pace(1 - ready_chance, seed=rng)),
                            background=True)
    simulator.run()
    return outputs, refused[0]


@pytest.mark.parametrize("width", [8, 16])
def test_realigner_every_shift_and_length(width):
    """Each shift 0..W-1 and lengths around beat boundaries, back to back: exact bytes, never refused."""
    rng = random.Random(width)
    packets, expected = [], []
    for shift in range(width):
        for skip_beats in (0, 1):
            for length in sorted({1, 2, width - 1, width, width + 1, 2 * width - shift, 3 * width + 1}):
                if length < 1:
                    continue
                start = skip_beats * width + shift
                frame = rng.randbytes(start + length + rng.choice([0, 0, 1, width + 3]))
                packets.append((frame, skip_beats, shift, length))
                expected.append(frame[start:start + length])
    outputs, refused = run_realigner(width, packets)
    assert outputs == expected
    assert refused == 0


def test_realigner_short_input_and_back_pressure():
    """Input ending early truncates; no wanted byte gives one junk byte; length 0 counts as 1; stalls lose nothing."""
    rng = random.Random(3)
    frame = rng.randbytes(40)
    # W = 8, one skipped beat and shift 3: the wanted bytes start at byte 11.
    packets = [(frame, 1, 3, 100), (frame[:12], 1, 3, 20), (frame[:10], 1, 3, 20), (frame[:5], 1, 3, 20),
               (frame[:30], 1, 3, 0), (frame[:24], 1, 3, 13)]
    outputs, _ = run_realigner(8, packets * 3, ready_chance=0.5, gap_chance=0.3, seed=4)
    assert len(outputs) == 18
    for round_ in range(3):
        got = outputs[6 * round_:6 * round_ + 6]
        assert got[0] == frame[11:40]
        assert got[1] == frame[11:12]
        assert len(got[2]) == 1 and len(got[3]) == 1  # nothing wanted arrived: one junk byte
        assert got[4] == frame[11:12]
        assert got[5] == frame[11:24]


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_latency_to_first_packet_beat(width):
    """Documented latency (module docs): edges from the last beat in of a frame with a 300-byte chunk to its packet's first
    beat out, outputs ready."""
    rng = random.Random(width)
    bench = Bench(width, [good_case(rng, 300, udp=False)], gap_chance=0.0, ready_chance=1.0)
    dut, stamps = bench.dut, {}

    async def probe(ctx):
        cycle = 0
        while True:
            _, _, net_valid, net_ready, net_last, pkt_valid, pkt_ready = await ctx.tick().sample(
                dut.net.valid, dut.net.ready, dut.net.payload.last, dut.pkt.valid, dut.pkt.ready)
            cycle += 1
            if net_valid and net_ready and net_last:
                stamps.setdefault("in", cycle)
            if pkt_valid and pkt_ready:
                stamps.setdefault("out", cycle)

    bench.run(probes=[probe]).check()
    assert stamps["out"] - stamps["in"] == {8: 18, 16: 23, 32: 28, 64: 29}[width]
