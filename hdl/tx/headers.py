"""Per-segment header bytes: the SCTP packet's headers and the Ethernet/IPv4/UDP prefix.

For each segment record two headers leave, in the same cycle, for the two
:class:`~hdl.stream.prepend.Prepend` stages of the engine:

* ``sctp_header`` (12, 28, 44, 48 or 76 bytes): the SCTP common header with its
  checksum field 0 (RFC 4960 3.1; the CRC32c is inserted on the way out) and
  the verification tag of the association's row, or for a control packet
  (:attr:`~abi.tx.ControlOpcode.PACKET`) the request's (the row's for the
  engine's own SACK) and nothing more (its chunks are the body); for a session-control message one DATA chunk header
  (U = B = E = 1, PPID 17, RFC 5043 5.2.3) before the message; else one
  DATA chunk header (RFC 4960 3.3.1: U = B = E = 1, I = 1 on the last segment of
  a work request's message (RFC 9260 3.3.1), stream sequence number 0,
  PPID 16, RFC 5043 5.2, 9, 10; length without padding), the DDP-SSN (RFC 5043
  5.2.1) and the DDP header with the RDMAP control field in its RsvdULP:
  tagged (RFC 5041 4.2, RFC 5040 4.1: 14 bytes; RDMA Write and Read Response,
  RFC 5040 4.3, 4.5: no RDMAP header of their own), untagged (RFC 5041 4.3,
  Invalidate STag for the Send with Invalidate variants: 18 bytes), or, for a
  Read Request, untagged followed by the 28-byte Read Request header (RFC 5040
  4.4). ``body`` says whether payload follows.
* ``prefix`` (34 or 42 bytes): Ethernet II (peer MAC, local MAC, 0x0800), IPv4
  (RFC 791: 20 bytes, DF, TTL 64, identification 0 as RFC 6864 4.1 allows for
  atomic datagrams, protocol 132, or 17 over UDP, header checksum RFC 1071),
  and for SCTP over UDP the UDP header (RFC 6951 5: port ``udp_port`` to the
  peer's, checksum 0).

Lengths count the padding of the DATA chunk to 4 bytes (RFC 4960 3.2) in IPv4
and UDP, not in the chunk. The IPv4 checksum of an association's fixed words is
summed continuously from its row (a few cycles after a row write), so a
segment adds only its total length: one carry chain per stage.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ADDRESS_BITS
from abi.tx import READ_RESPONSE_OPCODE, ControlOpcode, WorkOpcode, tx_association_write_layout
from hdl.layout import struct_layout
from hdl.stream.bits import index_bits
from hdl.stream.prepend import prepend_header_layout
from hdl.stream.queue import Queue
from hdl.tx.layouts import segment_layout

__all__ = ["HeaderBuilder", "SCTP_HEADER_LENGTHS", "PREFIX_LENGTHS", "user_data_bytes"]

ETHERTYPE_IPV4 = 0x0800
IP_PROTOCOL_SCTP, IP_PROTOCOL_UDP = 132, 17
TTL = 64
PPID_DDP_SEGMENT = 16                 # RFC 5043 5.2
PPID_DDP_SESSION_CONTROL = 17
DATA_FLAGS = 0b0111                   # U, B, E (RFC 4960 3.3.1)
FLAG_I_BIT = 3                        # I (RFC 9260 3.3.1): on a work request's last segment
RDMAP_VERSION = 1                     # RFC 5040 4.1
DDP_VERSION = 1                       # RFC 5041 4.1
QN_READ_REQUEST = 1                   # RFC 5040 4.2
QN_TERMINATE = 2

SCTP_COMMON_HEADER, DATA_CHUNK_HEADER, DDP_SSN = 12, 16, 2
#: SCTP header bytes before the payload: control packet, session control, tagged, untagged, Read Request.
PACKET_SCTP_HEADER = SCTP_COMMON_HEADER
SESSION_SCTP_HEADER = SCTP_COMMON_HEADER + DATA_CHUNK_HEADER
TAGGED_SCTP_HEADER = SCTP_COMMON_HEADER + DATA_CHUNK_HEADER + DDP_SSN + 14
UNTAGGED_SCTP_HEADER = SCTP_COMMON_HEADER + DATA_CHUNK_HEADER + DDP_SSN + 18
READ_REQUEST_SCTP_HEADER = UNTAGGED_SCTP_HEADER + 28
SCTP_HEADER_LENGTHS = (PACKET_SCTP_HEADER, SESSION_SCTP_HEADER, TAGGED_SCTP_HEADER, UNTAGGED_SCTP_HEADER,
                       READ_REQUEST_SCTP_HEADER)
ETHERNET_HEADER, IPV4_HEADER, UDP_HEADER = 14, 20, 8
PREFIX_LENGTHS = (ETHERNET_HEADER + IPV4_HEADER, ETHERNET_HEADER + IPV4_HEADER + UDP_HEADER)

_STAGES = 2      # registered stages between taking a segment and the output queues' sink


def user_data_bytes(segment):
    """A numbered segment's DATA chunk user data (RFC 4960 3.3.1): its payload behind the DDP-SSN and DDP
    header (RFC 5043 5.2.1), or the session-control message."""
    tagged = (segment.opcode == WorkOpcode.RDMA_WRITE) | (segment.opcode == READ_RESPONSE_OPCODE)
    header = Mux(segment.opcode == ControlOpcode.SESSION_CONTROL, SESSION_SCTP_HEADER,
                 Mux(tagged, TAGGED_SCTP_HEADER,
                     Mux(segment.opcode == WorkOpcode.RDMA_READ_REQUEST, READ_REQUEST_SCTP_HEADER,
                         UNTAGGED_SCTP_HEADER)))
    return segment.payload_length + header - SESSION_SCTP_HEADER


def _wire(value, size: int) -> list:
    """``value`` as ``size`` bytes in network order (RFC 791 appendix B), first on the wire first."""
    value = Const(value, 8 * size) if isinstance(value, int) else value.as_unsigned()
    value = Cat(value, Const(0, max(0, 8 * size - len(value))))
    return [value.word_select(size - 1 - index, 8) for index in range(size)]


class HeaderBuilder(wiring.Component):
    """The headers of every segment of ``associations`` associations.

    Ports
    -----
    segments : ``In(stream.Signature(segment_layout()))``
        ``ready`` is a flip-flop, loaded from the output queues' levels.
    association_write : ``In(stream.Signature(tx_association_write_layout()))``
        Always ready.
    local_mac, local_ip, udp_port : ``In``
        This end's addresses (MAC as written in text: first wire byte in bits 47:40).
    sctp_header, prefix : ``Out(stream.Signature(prepend_header_layout(...)))``
        From queues; one of each per segment, in segment order. A prefix waits for its
        packet's CRC32c, so ``prefix_depth`` bounds the packets between the two Prepends:
        enough to cover the CRC's latency with the shortest packets at W = 64.
    """

    def __init__(self, *, associations: int = 2, sctp_depth: int = 6, prefix_depth: int = 16,
                 address_bits: int = ADDRESS_BITS, block_ram: bool = True):
        self.associations, self._address_bits, self._block_ram = associations, address_bits, block_ram
        self._sctp_depth, self._prefix_depth = sctp_depth, prefix_depth
        super().__init__({
            "segments": In(stream.Signature(segment_layout(address_bits))),
            "association_write": In(stream.Signature(struct_layout(tx_association_write_layout()))),
            "local_mac": In(48),
            "local_ip": In(32),
            "udp_port": In(16),
            "sctp_header": Out(stream.Signature(prepend_header_layout(READ_REQUEST_SCTP_HEADER))),
            "prefix": Out(stream.Signature(prepend_header_layout(PREFIX_LENGTHS[-1]))),
        })

    def elaborate(self, platform):
        m = Module()
        associations = self.associations
        rows = Array(Signal(struct_layout(tx_association_write_layout()), name=f"row_{i}") for i in range(associations))
        m.d.comb += self.association_write.ready.eq(1)
        # A row write is decoded into one registered enable per row, so each row's wide load hangs
        # off a flip-flop of its own.
        write = self.association_write.payload
        staged_write = Signal(struct_layout(tx_association_write_layout()))
        row_enables = Signal(associations)
        m.d.sync += [staged_write.eq(write),
                     row_enables.eq(Cat(*(self.association_write.valid & (write.index == index)
                                          for index in range(associations))))]
        for index in range(associations):
            with m.If(row_enables[index]):
                m.d.sync += rows[index].eq(staged_write)

        # Each row's fixed IPv4 header words, summed with end-around carry (RFC 1071), one adder a stage.
        local_words = Signal(17)
        m.d.sync += local_words.eq(self.local_ip[16:] + self.local_ip[:16])
        fixed_sums = []
        for index in range(associations):
            row = rows[index]
            peer_words, words, constant, total, folded, fixed = (
                Signal(17, name=f"peer_words_{index}"), Signal(18, name=f"words_{index}"),
                Signal(16, name=f"constant_{index}"), Signal(19, name=f"total_{index}"),
                Signal(17, name=f"folded_{index}"), Signal(16, name=f"fixed_sum_{index}"))
            m.d.sync += [
                peer_words.eq(row.peer_ip[16:] + row.peer_ip[:16]),
                constant.eq(Mux(row.udp, 0x4500 + 0x4000 + (TTL << 8 | IP_PROTOCOL_UDP),
                                0x4500 + 0x4000 + (TTL << 8 | IP_PROTOCOL_SCTP))),
                words.eq(local_words + peer_words),
                total.eq(words + constant),
                folded.eq(total[:16] + total[16:]),
                fixed.eq(folded[:16] + folded[16]),
            ]
            fixed_sums.append(fixed)
        fixed_sums = Array(fixed_sums)

        # Output queues, with room for every segment in flight.
        sctp_queue = m.submodules.sctp_queue = Queue(self.sctp_header.payload.shape(), self._sctp_depth,
                                                     block_ram=self._block_ram)
        prefix_queue = m.submodules.prefix_queue = Queue(self.prefix.payload.shape(), self._prefix_depth,
                                                         block_ram=self._block_ram)
        wiring.connect(m, sctp_queue.source, wiring.flipped(self.sctp_header))
        wiring.connect(m, prefix_queue.source, wiring.flipped(self.prefix))
        # Room is registered from the levels a cycle old, with one place more kept free for the payload
        # that may have entered since: `ready` is a flip-flop, not an adder after the queues' counters.
        room = Signal()
        m.d.sync += room.eq((sctp_queue.level <= self._sctp_depth - _STAGES - 2)
                            & (prefix_queue.level <= self._prefix_depth - _STAGES - 2))
        m.d.comb += self.segments.ready.eq(room)
        taken = self.segments.valid & self.segments.ready

        # Stage 1: the segment, its association's row and its lengths.
        incoming = self.segments.payload
        incoming_row = rows[incoming.association[:index_bits(associations)]]
        incoming_tagged = (incoming.opcode == WorkOpcode.RDMA_WRITE) | (incoming.opcode == READ_RESPONSE_OPCODE)
        incoming_read_request = incoming.opcode == WorkOpcode.RDMA_READ_REQUEST
        incoming_packet = incoming.opcode == ControlOpcode.PACKET
        incoming_session = incoming.opcode == ControlOpcode.SESSION_CONTROL
        def by_header(length_of):
            """A constant chosen by the segment's SCTP header length ``h``: ``length_of(h)`` for each,
            folded here, so the adders below take a decoded constant, not a sum of decoded lengths."""
            return Mux(incoming_packet, length_of(PACKET_SCTP_HEADER),
                       Mux(incoming_session, length_of(SESSION_SCTP_HEADER),
                           Mux(incoming_tagged, length_of(TAGGED_SCTP_HEADER),
                               Mux(incoming_read_request, length_of(READ_REQUEST_SCTP_HEADER),
                                   length_of(UNTAGGED_SCTP_HEADER)))))
        header_length = by_header(lambda h: h)
        ip_offset = Mux(incoming_row.udp, by_header(lambda h: h + 3 + PREFIX_LENGTHS[1] - ETHERNET_HEADER),
                        by_header(lambda h: h + 3 + PREFIX_LENGTHS[0] - ETHERNET_HEADER))
        segment, row = Signal(segment_layout(self._address_bits)), Signal(struct_layout(tx_association_write_layout()))
        valid_1, tagged, read_request, packet, session = Signal(), Signal(), Signal(), Signal(), Signal()
        terminate, terminate_2 = Signal(), Signal()
        immediate, immediate_2 = Signal(), Signal()
        sctp_length = Signal(range(READ_REQUEST_SCTP_HEADER + 1))
        chunk_length, ip_length, udp_length, fixed_sum = Signal(16), Signal(16), Signal(16), Signal(16)
        m.d.sync += [
            valid_1.eq(taken),
            segment.eq(incoming), row.eq(incoming_row),
            tagged.eq(incoming_tagged), read_request.eq(incoming_read_request),
            terminate.eq(incoming.opcode == WorkOpcode.TERMINATE),
            # RFC 9260 3.3.1 (RFC 7053 4): the last DATA chunk of a work request's message asks for its SACK
            # without delay (its completion waits for it); a Read Response's and session control's do not.
            immediate.eq(incoming.last & ~incoming_packet & ~incoming_session
                         & (incoming.opcode != READ_RESPONSE_OPCODE)),
            packet.eq(incoming_packet), session.eq(incoming_session), sctp_length.eq(header_length),
            # The chunk without padding; IPv4 and UDP with it (RFC 4960 3.2): header lengths are
            # multiples of 4, so rounding the sum rounds the payload.
            chunk_length.eq(incoming.payload_length + by_header(lambda h: h - SCTP_COMMON_HEADER)),
            ip_length.eq((incoming.payload_length + ip_offset) & ~3),
            udp_length.eq((incoming.payload_length + by_header(lambda h: h + 3 + UDP_HEADER)) & ~3),
            fixed_sum.eq(fixed_sums[incoming.association[:index_bits(associations)]]),
        ]

        # Stage 2: the checksum sum; the header bytes are wires from these registers.
        segment_2, row_2 = (Signal(segment_layout(self._address_bits)),
                            Signal(struct_layout(tx_association_write_layout())))
        valid_2, tagged_2, read_request_2, packet_2, session_2 = Signal(), Signal(), Signal(), Signal(), Signal()
        sctp_length_2 = Signal.like(sctp_length)
        chunk_length_2, ip_length_2, udp_length_2 = Signal(16), Signal(16), Signal(16)
        ip_sum = Signal(17)
        m.d.sync += [
            valid_2.eq(valid_1), segment_2.eq(segment), row_2.eq(row),
            tagged_2.eq(tagged), read_request_2.eq(read_request), terminate_2.eq(terminate),
            immediate_2.eq(immediate),
            packet_2.eq(packet), session_2.eq(session), sctp_length_2.eq(sctp_length),
            chunk_length_2.eq(chunk_length), ip_length_2.eq(ip_length), udp_length_2.eq(udp_length),
            ip_sum.eq(fixed_sum + ip_length),
        ]
        checksum = ~(ip_sum[:16] + ip_sum[16])[:16]
        segment, row = segment_2, row_2

        rdmap_control = _wire(Cat(segment.opcode, Const(0, 2), Const(RDMAP_VERSION, 2)), 1)
        common = (_wire(row.local_port, 2) + _wire(row.peer_port, 2)
                  + _wire(Mux(packet_2 & ~segment.sack, segment.tag, row.tag), 4) + _wire(0, 4))
        flags = Cat(Const(DATA_FLAGS, FLAG_I_BIT), immediate_2, Const(0, 7 - FLAG_I_BIT))
        data_chunk = (_wire(0, 1) + _wire(flags, 1) + _wire(chunk_length_2, 2) + _wire(segment.tsn, 4)
                      + _wire(segment.stream_id, 2) + _wire(0, 2)
                      + _wire(Mux(session_2, PPID_DDP_SESSION_CONTROL, PPID_DDP_SEGMENT), 4))
        ddp = ~packet_2 & ~session_2
        tagged_bytes = (_wire(Cat(Const(DDP_VERSION, 2), Const(0, 4), segment.last, Const(1, 1)), 1)
                        + rdmap_control + _wire(segment.stag, 4) + _wire(segment.to, 8))
        untagged_bytes = (_wire(Cat(Const(DDP_VERSION, 2), Const(0, 4), segment.last, Const(0, 1)), 1)
                          + rdmap_control + _wire(segment.invalidate_stag, 4)
                          + _wire(Mux(read_request_2, QN_READ_REQUEST, Mux(terminate_2, QN_TERMINATE, 0)), 4)
                          + _wire(segment.msn, 4)
                          + _wire(segment.mo, 4))
        read_request_bytes = (_wire(segment.sink_stag, 4) + _wire(segment.sink_to, 8) + _wire(segment.size, 4)
                              + _wire(segment.stag, 4) + _wire(segment.to, 8))
        ddp_bytes = [Mux(tagged_2, t, u) for t, u in zip(tagged_bytes + _wire(0, 4), untagged_bytes)]
        sctp = sctp_queue.sink.payload
        m.d.comb += [
            # Zero past the header's length (Prepend ORs the body into it).
            sctp.data.eq(Cat(*common, *(Mux(packet_2, 0, b) for b in data_chunk),
                             *(Mux(ddp, b, 0) for b in _wire(segment.ddp_ssn, 2) + ddp_bytes),
                             *(Mux(read_request_2, b, 0) for b in read_request_bytes))),
            sctp.length.eq(sctp_length_2),
            sctp.body.eq(segment.payload_length != 0),
            sctp_queue.sink.valid.eq(valid_2),
        ]

        ethernet = _wire(row.peer_mac, 6) + _wire(self.local_mac, 6) + _wire(ETHERTYPE_IPV4, 2)
        ipv4 = (_wire(0x45, 1) + _wire(0, 1) + _wire(ip_length_2, 2) + _wire(0, 2) + _wire(0x4000, 2)
                + _wire(TTL, 1) + _wire(Mux(row.udp, IP_PROTOCOL_UDP, IP_PROTOCOL_SCTP), 1) + _wire(checksum, 2)
                + _wire(self.local_ip, 4) + _wire(row.peer_ip, 4))
        udp = _wire(self.udp_port, 2) + _wire(row.peer_udp_port, 2) + _wire(udp_length_2, 2) + _wire(0, 2)
        prefix = prefix_queue.sink.payload
        m.d.comb += [
            prefix.data.eq(Cat(*ethernet, *ipv4, *(Mux(row.udp, b, 0) for b in udp))),
            prefix.length.eq(Mux(row.udp, PREFIX_LENGTHS[1], PREFIX_LENGTHS[0])),
            prefix.body.eq(1),
            prefix_queue.sink.valid.eq(valid_2),
        ]
        return m
