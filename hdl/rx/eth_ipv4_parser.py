"""Ethernet II / IPv4 / UDP / SCTP common header parser and classifier.

Watches a packet stream (a passive tap: it never stalls it), keeps the first
56 bytes of each frame (Ethernet 14 + IPv4 20 + UDP 8 + SCTP common header 12
+ first chunk's type and flags), and a few cycles after each frame's last
beat gives one verdict: deliver to the SCTP engine, pass to the host as an
exception, or drop, with the reason. The CRC32c is checked elsewhere: for a
packet that reaches the SCTP checks the verdict carries ``sctp = 1`` and the
expected checksum, and a CRC failure overrides everything decided after it.

Rules, in priority order (the first that applies decides):

1. frame shorter than an Ethernet header (14 bytes): exception ``NOT_IPV4``;
2. destination MAC not ``local_mac`` (broadcast and multicast included):
   exception ``NOT_LOCAL_MAC``;
3. ethertype not 0x0800: exception ``NOT_IPV4``;
4. frame too short for a 20-byte IPv4 header: drop ``LENGTH``;
5. IPv4 version not 4: exception ``NOT_IPV4``; IHL not 5 (options, or an
   invalid IHL; RFC 791 3.1): exception ``IP_OPTIONS``;
6. header checksum wrong (RFC 791 3.1, RFC 1071): drop ``IP_CHECKSUM``;
7. MF set or fragment offset non-zero (RFC 791 2.3): exception ``FRAGMENT``;
8. destination address not ``local_ip``: exception ``NOT_LOCAL_IP``;
   Total Length below 20 or past the frame's end: drop ``LENGTH``;
   neither protocol 132 nor UDP (RFC 768) to ``udp_port`` (RFC 6951 5):
   exception ``NOT_SCTP`` (in that order);
9. UDP length below 8 or past the IPv4 payload, or an SCTP packet shorter
   than its 12-byte common header (RFC 4960 3.1): drop ``LENGTH``;
10. (after the CRC32c check, RFC 4960 6.8) first chunk INIT with
    verification tag 0 (RFC 4960 8.5.1 A): exception ``INIT``;
11. first chunk ABORT or SHUTDOWN COMPLETE with the T bit (tag reflected,
    RFC 4960 8.5.1 B, C): exception ``TAG_REFLECTED``;
12. no association for (destination port, source port, source address) in
    the row the verification tag's low bits name (:class:`AssociationTable`):
    exception ``NO_ASSOCIATION``;
13. verification tag not that association's (RFC 4960 8.5): drop ``TAG``;
14. otherwise deliver.

Only the first chunk is examined for rules 10 and 11. The UDP checksum is
not verified: the SCTP CRC32c covers the whole SCTP packet (RFC 6951 5
lets senders leave it 0).

Latency: the verdict transfers 5 clock edges after the frame's last beat.
Throughput: one beat per cycle, one frame per cycle (frames of one beat).
"""


from amaranth.hdl import Cat, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ASSOCIATION_BITS, FrameDrop, FrameException, association_entry_layout
from hdl.layout import struct_layout
from hdl.rx.association_table import AssociationTable
from hdl.stream.bits import big_endian, index_bits, keep_count
from hdl.stream.packet import packet_signature

__all__ = [
    "Action", "EthIpv4Parser", "header_verdict_layout", "ETH_IPV4_SCTP_OFFSET",
    "ETH_IPV4_UDP_SCTP_OFFSET",
]

ETHERTYPE_IPV4 = 0x0800
IP_PROTOCOL_SCTP = 132
IP_PROTOCOL_UDP = 17
#: Frame offset of the SCTP common header directly over IPv4 (no options).
ETH_IPV4_SCTP_OFFSET = 14 + 20
#: Frame offset of the SCTP common header over UDP (RFC 6951).
ETH_IPV4_UDP_SCTP_OFFSET = 14 + 20 + 8
_CAPTURED_BYTES = ETH_IPV4_UDP_SCTP_OFFSET + 14
_CHUNK_INIT, _CHUNK_ABORT, _CHUNK_SHUTDOWN_COMPLETE = 1, 6, 14


class Action(enum.Enum, shape=2):
    """What happens to a frame."""
    DELIVER = 0    #: its SCTP packet leaves on ``pkt``
    EXCEPTION = 1  #: the whole frame leaves on ``exc``, for the host
    DROP = 2       #: discarded and counted



def header_verdict_layout(width_bytes: int) -> data.StructLayout:
    """The parser's verdict on one frame."""
    return data.StructLayout({
        "action": Action,
        "reason": unsigned(4),         # FrameException or FrameDrop, by action
        "sctp": unsigned(1),           # the CRC32c check applies (and overrides on failure)
        "expected_crc": unsigned(32),  # the checksum field, as the CRC value it encodes
        "frame_length": unsigned(16),  # bytes in the frame (saturates at 65535)
        "udp": unsigned(1),
        "sctp_length": unsigned(16),
        "association": unsigned(ASSOCIATION_BITS),
        "ddp": unsigned(1),
        "peer_ip": unsigned(32),
        # Where the SCTP packet sits in the stored frame, in beats.
        "skip": unsigned(16),
        "count": unsigned(16),
        "shift": unsigned(index_bits(width_bytes)),
    })


class EthIpv4Parser(wiring.Component):
    """Classifies each frame on ``sink`` from its first 56 bytes (see the module docs).

    Parameters
    ----------
    width_bytes : int
        Beat width ``W``.
    associations : int
        Entries in the :class:`AssociationTable`.

    Ports
    -----
    sink : ``In(packet_signature(W))``
        The frames (Ethernet II, no FCS); always ready.
    local_mac, local_ip, udp_port : ``In``
        Configuration; sampled on the cycle after a frame's last beat.
    assoc_write : ``In(stream.Signature(association_entry_layout()))``
        The association table's write port.
    over_udp, sctp_length : ``Out``
        From the bytes received so far of the current frame (registered: a
        field in the beat transferred on edge ``t`` shows from ``t``):
        protocol is UDP, and the SCTP packet length it announces (IPv4
        Total Length - 20, or UDP length - 8).
    verdict : ``Out(stream.Signature(header_verdict_layout(W), always_ready=True))``
        One per frame, in order, 5 clock edges after its last beat.
    """

    def __init__(self, width_bytes: int, associations: int = 8):
        self._width = width_bytes
        self._associations = associations
        super().__init__({
            "sink": In(packet_signature(width_bytes)),
            "local_mac": In(48),
            "local_ip": In(32),
            "udp_port": In(16),
            "assoc_write": In(stream.Signature(struct_layout(association_entry_layout()))),
            "over_udp": Out(1),
            "sctp_length": Out(16),
            "verdict": Out(stream.Signature(header_verdict_layout(width_bytes), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        table = m.submodules.associations = AssociationTable(self._associations)
        wiring.connect(m, wiring.flipped(self.assoc_write), table.write)

        # Capture: byte `o` of the frame is taken from lane o % W of beat o // W.
        last_beat = (_CAPTURED_BYTES - 1) // width
        beat = Signal(range(last_beat + 2))
        captured = [Signal(8, name=f"byte_{o}") for o in range(_CAPTURED_BYTES)]
        length = Signal(17)  # saturates at 2**16: any longer frame reports 65535
        beat_bytes = keep_count(self.sink.payload.keep, width)
        accepted = self.sink.valid
        m.d.comb += self.sink.ready.eq(1)
        with m.If(accepted):
            for o, byte in enumerate(captured):
                with m.If((beat == o // width) & self.sink.payload.keep[o % width]):
                    m.d.sync += byte.eq(self.sink.payload.data.word_select(o % width, 8))
            with m.If(self.sink.payload.last):
                m.d.sync += [beat.eq(0), length.eq(0)]
            with m.Else():
                with m.If(beat != last_beat + 1):
                    m.d.sync += beat.eq(beat + 1)
                with m.If(~length[16]):
                    m.d.sync += length.eq(length + beat_bytes)
        frame_length = Signal(18)
        m.d.comb += frame_length.eq(length + beat_bytes)

        total = big_endian(captured[16:18])
        udp_length = big_endian(captured[38:40])
        protocol = captured[23]
        m.d.comb += [
            self.over_udp.eq(protocol == IP_PROTOCOL_UDP),
            self.sctp_length.eq(Mux(self.over_udp, udp_length - 8, total - 20)),
        ]

        def stage(value, name, shape=None):
            register = Signal(shape if shape is not None else Value.cast(value).shape(), name=name)
            m.d.sync += register.eq(value)
            return register

        # E0: the cycle after the last beat; every captured byte is this frame's.
        e0_valid = stage(accepted & self.sink.payload.last, "e0_valid")
        e0_length = stage(Mux(frame_length > 0xFFFF, 0xFFFF, frame_length), "e0_length", 16)
        udp = protocol == IP_PROTOCOL_UDP

        def sctp_field(offset, size):
            over_udp, direct = ETH_IPV4_UDP_SCTP_OFFSET + offset, ETH_IPV4_SCTP_OFFSET + offset
            return Mux(udp, big_endian(captured[over_udp:over_udp + size]), big_endian(captured[direct:direct + size]))

        src_ip = big_endian(captured[26:30])
        words = [big_endian(captured[14 + 2 * i:16 + 2 * i]) for i in range(10)]

        # E1: field compares and the first adder level of the header checksum.
        e1 = {
            "valid": stage(e0_valid, "e1_valid"),
            "length": stage(e0_length, "e1_length"),
            "mac_ok": stage(Cat(*captured[0:6]) == Cat(*(self.local_mac.word_select(5 - i, 8) for i in range(6))),
                            "e1_mac_ok"),
            "ethertype_ok": stage(big_endian(captured[12:14]) == ETHERTYPE_IPV4, "e1_ethertype_ok"),
            "version_ok": stage(captured[14][4:8] == 4, "e1_version_ok"),
            "ihl_ok": stage(captured[14][0:4] == 5, "e1_ihl_ok"),
            "fragment": stage((captured[20][0:6] != 0) | (captured[21] != 0), "e1_fragment"),
            "ip_local": stage(big_endian(captured[30:34]) == self.local_ip, "e1_ip_local"),
            "total": stage(total, "e1_total"),
            "sctp": stage(protocol == IP_PROTOCOL_SCTP, "e1_sctp"),
            "udp": stage(udp, "e1_udp"),
            "udp_port_ok": stage(big_endian(captured[36:38]) == self.udp_port, "e1_udp_port_ok"),
            "udp_length": stage(udp_length, "e1_udp_length"),
            "tag": stage(sctp_field(4, 4), "e1_tag"),
            # RFC 4960 6.8: the CRC is stored least significant byte first.
            "crc": stage(Mux(udp, Cat(*captured[50:54]), Cat(*captured[42:46])), "e1_crc"),
            "chunk_type": stage(sctp_field(12, 1), "e1_chunk_type"),
            "chunk_flags": stage(sctp_field(13, 1), "e1_chunk_flags"),
            "peer_ip": stage(src_ip, "e1_peer_ip"),
            "src_port": stage(sctp_field(0, 2), "e1_src_port"),
            "dst_port": stage(sctp_field(2, 2), "e1_dst_port"),
            "sums": [stage(words[2 * i] + words[2 * i + 1], f"e1_sum_{i}", 17) for i in range(5)],
        }

        # The association lookup: key from E1, result in E3.
        m.d.comb += [
            table.verification_tag.eq(e1["tag"]),
            table.local_port.eq(e1["dst_port"]),
            table.peer_port.eq(e1["src_port"]),
            table.peer_ip.eq(e1["peer_ip"]),
        ]

        # E2: lengths, the checksum sum.
        e2 = {key: stage(value, f"e2_{key}") for key, value in e1.items() if key != "sums"}
        e2_sum = stage(sum(e1["sums"]), "e2_sum", 20)
        e2["runt"] = stage(e1["length"] < 14, "e2_runt")
        e2["ip_short"] = stage(e1["length"] < 34, "e2_ip_short")
        e2["total_bad"] = stage((e1["total"] < 20) | (e1["total"] + 14 > e1["length"]), "e2_total_bad")
        e2["over_udp"] = stage(e1["udp"] & (e1["total"] >= 28) & e1["udp_port_ok"], "e2_over_udp")
        e2["udp_bad"] = stage((e1["udp_length"] < 8) | (e1["udp_length"] + 20 > e1["total"]), "e2_udp_bad")
        e2["sctp_length"] = stage(Mux(e1["udp"], e1["udp_length"] - 8, e1["total"] - 20), "e2_sctp_length", 16)

        # E3: first fold of the checksum, chunk checks, where the packet ends.
        e3 = {key: stage(value, f"e3_{key}") for key, value in e2.items()}
        e3_fold = stage(e2_sum[:16] + e2_sum[16:], "e3_fold", 17)
        e3["short"] = stage(e2["sctp_length"] < 12, "e3_short")
        has_type = e2["sctp_length"] >= 14
        e3["init"] = stage(has_type & (e2["chunk_type"] == _CHUNK_INIT) & (e2["tag"] == 0), "e3_init")
        e3["reflected"] = stage(
            has_type & e2["chunk_flags"][0]
            & ((e2["chunk_type"] == _CHUNK_ABORT) | (e2["chunk_type"] == _CHUNK_SHUTDOWN_COMPLETE)),
            "e3_reflected")
        offset = Mux(e2["over_udp"], ETH_IPV4_UDP_SCTP_OFFSET, ETH_IPV4_SCTP_OFFSET)
        e3["end"] = stage(offset + e2["sctp_length"] - 1, "e3_end", 17)

        # E4: second fold and compare: a correct header sums to 0xFFFF (RFC 1071).
        e4 = {key: stage(value, f"e4_{key}") for key, value in e3.items()}
        e4["hit"] = stage(table.hit, "e4_hit")
        e4["association"] = stage(table.index, "e4_association")
        e4["ddp"] = stage(table.ddp, "e4_ddp")
        e4["tag_ok"] = stage(table.tag == e3["tag"], "e4_tag_ok")
        e4["ip_checksum_ok"] = stage((e3_fold[:16] + e3_fold[16]).as_unsigned()[:16] == 0xFFFF, "e4_ip_ok")

        # E5 (output registers): the decision.
        action, reason, sctp = Signal(Action), Signal(4), Signal()
        m.d.comb += [action.eq(Action.DELIVER), reason.eq(0), sctp.eq(0)]

        def exception(why):
            m.d.comb += [action.eq(Action.EXCEPTION), reason.eq(why)]

        def drop(why):
            m.d.comb += [action.eq(Action.DROP), reason.eq(why)]

        with m.If(e4["runt"]):
            exception(FrameException.NOT_IPV4)
        with m.Elif(~e4["mac_ok"]):
            exception(FrameException.NOT_LOCAL_MAC)
        with m.Elif(~e4["ethertype_ok"]):
            exception(FrameException.NOT_IPV4)
        with m.Elif(e4["ip_short"]):
            drop(FrameDrop.LENGTH)
        with m.Elif(~e4["version_ok"]):
            exception(FrameException.NOT_IPV4)
        with m.Elif(~e4["ihl_ok"]):
            exception(FrameException.IP_OPTIONS)
        with m.Elif(~e4["ip_checksum_ok"]):
            drop(FrameDrop.IP_CHECKSUM)
        with m.Elif(e4["fragment"]):
            exception(FrameException.FRAGMENT)
        with m.Elif(~e4["ip_local"]):
            exception(FrameException.NOT_LOCAL_IP)
        with m.Elif(e4["total_bad"]):
            drop(FrameDrop.LENGTH)
        with m.Elif(~e4["sctp"] & ~e4["over_udp"]):
            exception(FrameException.NOT_SCTP)
        with m.Elif((e4["over_udp"] & e4["udp_bad"]) | e4["short"]):
            drop(FrameDrop.LENGTH)
        with m.Else():
            m.d.comb += sctp.eq(1)
            with m.If(e4["init"]):
                exception(FrameException.INIT)
            with m.Elif(e4["reflected"]):
                exception(FrameException.TAG_REFLECTED)
            with m.Elif(~e4["hit"]):
                exception(FrameException.NO_ASSOCIATION)
            with m.Elif(~e4["tag_ok"]):
                drop(FrameDrop.TAG)

        shift_bits = (width - 1).bit_length()
        skip = Mux(e4["over_udp"], ETH_IPV4_UDP_SCTP_OFFSET // width, ETH_IPV4_SCTP_OFFSET // width)
        verdict = self.verdict.payload
        m.d.sync += [
            self.verdict.valid.eq(e4["valid"]),
            verdict.action.eq(action),
            verdict.reason.eq(reason),
            verdict.sctp.eq(sctp),
            verdict.expected_crc.eq(e4["crc"]),
            verdict.frame_length.eq(e4["length"]),
            verdict.udp.eq(e4["over_udp"]),
            verdict.sctp_length.eq(e4["sctp_length"]),
            verdict.association.eq(e4["association"]),
            verdict.ddp.eq(e4["ddp"]),
            verdict.peer_ip.eq(e4["peer_ip"]),
            verdict.skip.eq(skip),
            verdict.count.eq((e4["end"] >> shift_bits) - skip + 1),
            verdict.shift.eq(Mux(e4["over_udp"], ETH_IPV4_UDP_SCTP_OFFSET % width,
                                 ETH_IPV4_SCTP_OFFSET % width)),
        ]
        return m
