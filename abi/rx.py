"""The receive engine's ABI (:class:`hdl.rx.engine.RxEngine`): what the host sees of it.

* the AXI4-Lite :func:`register_map`: configuration, counters and the tables
  the host writes (:func:`association_entry_layout`,
  :func:`region_write_layout`, :func:`stream_write_layout`,
  :func:`buffer_post_layout`, :func:`buffer_revoke_layout`,
  :func:`sack_row_layout`), and the :data:`RX_PARAMS` word;
* the records on the output streams: :func:`report_layout` on
  ``m_axis_report``, :func:`ack_layout` on ``m_axis_ack`` and
  :func:`exception_record_layout` as ``tuser`` of ``m_axis_exc``;
* the enums that give those records' fields their meaning.

Error numbers are (layer, type, code) as in an RDMAP Terminate (RFC 5040
7.2, RFC 5041 7.2), see :data:`ERROR_NUMBER`. STag = table index <<
:data:`STAG_KEY_BITS` | key (RFC 5041 8.2 leaves the STag's structure to the
implementation); the key width is a build parameter, ``key_bits``
(default :data:`STAG_KEY_BITS`, range :func:`check_key_bits`). The
association and stream index widths are shared with the
transmit engine (:mod:`abi.tx`).
"""

import enum

from abi.layout import Struct
from abi.register_file import RegisterMap

__all__ = [
    "ADDRESS_BITS", "MIN_ADDRESS_BITS", "check_address_bits", "ASSOCIATION_BITS", "association_row", "STREAM_BITS", "SEQUENCE_WINDOW", "STAG_BITS",
    "STAG_KEY_BITS", "MIN_STAG_KEY_BITS", "check_key_bits", "ERROR_NUMBER", "RX_PARAMS", "RX_TABLES",
    "FrameException", "FrameDrop", "ChunkException", "ChunkError", "SegmentStatus", "ReportKind", "ExceptionSource",
    "AckDisposition", "ack_layout", "ack_bytes", "buffer_revoke_layout", "DMA_ERROR",
    "association_entry_layout", "region_entry_layout", "region_write_layout", "stream_entry_layout",
    "SACK_DELAY_BITS", "SACK_TICK_CYCLES", "sack_row_layout",
    "stream_write_layout", "buffer_post_layout", "report_layout", "report_bytes", "report_withheld",
    "segment_report_fields",
    "exception_record_layout", "FRAME_COUNTERS", "SEGMENT_COUNTERS", "register_map",
]

#: A host address on the host's side of every record (rows, posts, requests, reports): 64 bits.
ADDRESS_BITS = 64
#: The fewest bits of host address the gateware keeps (`check_address_bits`): a burst of its DMA stays
#: within a 4 KiB boundary (AXI4, ARM IHI 0022 A3.4.1) by the address's low 12 bits.
MIN_ADDRESS_BITS = 12


def check_address_bits(address_bits: int) -> None:
    """Refuse (ValueError) a width of host memory addresses outside ``MIN_ADDRESS_BITS..ADDRESS_BITS``."""
    if not isinstance(address_bits, int) or not MIN_ADDRESS_BITS <= address_bits <= ADDRESS_BITS:
        raise ValueError(f"host addresses of {address_bits!r} bits: from {MIN_ADDRESS_BITS} to {ADDRESS_BITS}")


#: Association index width: up to 2**ASSOCIATION_BITS associations in the table.
ASSOCIATION_BITS = 4


def association_row(verification_tag: int) -> int:
    """The association row an inbound packet's verification tag names: its low ASSOCIATION_BITS bits. The host
    draws each association's Initiate Tag with its row there and the rest random (RFC 4960 5.3.1 asks only
    that it be random and not 0), so the receive engine compares one row's transport addresses, not every
    row's; a tag naming another row or an empty one finds no association (RFC 4960 8.5)."""
    return verification_tag & ((1 << ASSOCIATION_BITS) - 1)
#: SCTP stream identifier width (RFC 4960 3.3.1).
STREAM_BITS = 16

#: DDP-SSNs tracked per DDP stream (RFC 5043 10): a segment up to SEQUENCE_WINDOW - 1 after the
#: lowest DDP-SSN not yet received is placed on arrival and its record waits for the gap; one further
#: ahead is INVALID_SSN. The host keeps the peer within it through its SCTP receive window.
SEQUENCE_WINDOW = 32

#: An error number: layer (0 RDMAP, 1 DDP, 2 LLP), error type, error code.
#: ``valid`` = 0 means no error.
ERROR_NUMBER = Struct({
    "valid": 1,
    "layer": 4,
    "etype": 4,
    "code": 8,
})


class ReportKind(enum.IntEnum):
    """``report.kind``."""
    SEGMENT = 0      #: one DDP segment's verdict (after its payload is in host memory)
    CHUNK_ERROR = 1  #: a chunk that was neither placed nor passed to the host


def report_layout(address_bits: int = 64) -> Struct:
    """One record of the engine's report stream (the completion engine's output).

    A SEGMENT record is emitted after every byte of an accepted segment's
    payload was written and acknowledged on the bus: the host learns what was
    placed where, which message completed (``last``; untagged: ``qn``/``msn``,
    ``message_length``, RFC 5041 5.4) and every error with its RFC 5041 7.2 /
    RFC 5040 number. A CHUNK_ERROR record carries ``chunk_error`` and the
    chunk's TSN.

    Order (RFC 5041 5.3, 5.4; RFC 5043 6.1, 10): placement happens on
    arrival, but the ACCEPTED records of a DDP stream leave in DDP-SSN
    order, each DDP-SSN once: a record waits until every earlier DDP-SSN of
    its stream has been reported, so the record with ``last`` = 1 is the
    message's completion, after all its segments were placed, whatever
    order they came in. Every other record leaves in arrival order, and the
    records come out as if each segment were handled whole before the next:
    an arrival first, then the ACCEPTED records it releases. A segment whose
    DDP-SSN was seen before is DUPLICATE (dropped before placement, no
    error); one beyond the stream's window is INVALID_SSN and latches the
    stream like an error (RFC 5043 10: the host ends the DDP Stream
    Session); after a stream's error, its records still waiting are never
    released (RFC 5041 7.1), until the host rewrites the row.

    A write response that is not OKAY (SLVERR, DECERR) for an accepted
    segment's payload makes its record ``dma_error`` = 1, status ERROR and
    ``error`` :data:`DMA_ERROR` (some of its bytes may have been written),
    and latches the stream's error bit as any other error would, so later
    segments of the stream are DROPPED until the host re-arms it. Segments
    of that stream decided before the response came back (those already in
    the placement pipeline, a few dozen cycles' worth) keep their verdicts.

    Per-message reports (the ``segment_reports`` configuration bit at 0, its
    reset value) leave out, after the delivery order, the records of accepted
    middle segments (:func:`report_withheld`): a message costs one record,
    its last segment's; 1 emits a record for every segment.
    """
    return Struct({
        "kind": 1,
        "status": 3,          # SegmentStatus
        "chunk_error": 3,     # ChunkError
        "dma_error": 1,
        "error": ERROR_NUMBER,
        **segment_report_fields(address_bits),
    })


def segment_report_fields(address_bits: int = 64) -> dict:
    """What the engine reports of a DDP segment: carried from the placement
    check's verdict into the report record unchanged."""
    return {
        "association": ASSOCIATION_BITS,
        "stream_id": STREAM_BITS,
        "tsn": 32,
        "ddp_ssn": 16,
        "tagged": 1,
        "last": 1,
        "opcode": 4,
        "stag": 32,
        "to": 64,                      # tagged (RFC 5041 4.2): with stag, the header a Terminate quotes
        "qn": 32,
        "msn": 32,
        "mo": 32,
        "invalidate_stag": 32,
        "payload_length": 16,
        "host_address": address_bits,  # where the payload went (ACCEPTED, length > 0)
        "message_length": 33,          # untagged, L = 1: MO + payload length (RFC 5041 5.4)
    }


#: The error of a segment whose placement got a write response other than OKAY: DDP Local
#: Catastrophic Error (RFC 5041 7.2, layer 1, type 0x0, code 0x00).
DMA_ERROR = (1, 0x0, 0x00)


class AckDisposition(enum.IntEnum):
    """``ack.disposition``: where the DATA chunk went; its outcome follows on that path."""
    SEGMENT = 0  #: a DDP segment, to placement: its SEGMENT report carries the same TSN
    TO_HOST = 1  #: passed to the host on the exception stream (session control, other PPID, not DDP)
    REFUSED = 2  #: not placed nor passed on: its CHUNK_ERROR report carries the same TSN


def ack_layout() -> Struct:
    """One record of ``m_axis_ack`` per DATA chunk the engine takes (RFC 4960 6.2).

    Every DATA chunk of a delivered packet (CRC32c and verification tag
    passed) whose 16-byte DATA header lies whole in the packet (RFC 4960
    3.3.1) yields one record, in chunk order, however the chunk is handled
    (``disposition``), so that the host's SCTP builds its SACKs (cumulative
    TSN, gap blocks, duplicate TSNs) without seeing the payload. The record
    leaves when the chunk is parsed, before the chunk's outcome on its own
    stream. ``length`` is the chunk's user data in bytes (chunk length - 16).
    ``packet_end``: the chunk, padded, ends its packet (RFC 4960 3.2); DATA
    chunks come after a packet's control chunks (6.10), so this marks the
    packet's last DATA chunk, where the SACK decisions are made (6.2). A
    packet whose last chunk is not a whole DATA chunk has no such record.
    ``immediate``: the chunk's I bit (RFC 9260 3.3.1): its sender asks for
    the SACK without delay (6.2).
    A chunk shorter than its DATA header or running past the packet has no
    record (it has a CHUNK_ERROR report). No record is dropped: when
    ``m_axis_ack`` is not ready, the engine stops taking chunks, and
    ``s_axis`` waits.
    """
    return Struct({
        "association": ASSOCIATION_BITS,
        "disposition": 2,     # AckDisposition
        "tsn": 32,
        "length": 16,
        "packet_end": 1,
        "immediate": 1,
    })


def ack_bytes() -> int:
    """Bytes of one ``m_axis_ack`` beat: the ack record padded to whole bytes."""
    return (ack_layout().size + 7) // 8


class ExceptionSource(enum.IntEnum):
    """``exception_record.source``: what the exception stream's packet is."""
    FRAME = 0  #: a whole Ethernet frame (reason: FrameException)
    CHUNK = 1  #: one SCTP chunk of a checked packet (reason: ChunkException)


def exception_record_layout() -> Struct:
    """``tuser`` of every beat of a packet on the exception stream."""
    return Struct({
        "source": 1,
        "reason": 4,
        "association": ASSOCIATION_BITS,
        "length": 16,
    })


# Reasons and verdicts (RFC 4960 8.5, RFC 5043 9-10, RFC 5041 7.1).
class FrameException(enum.IntEnum):
    """Why a frame goes to the host (``exc_meta.reason``)."""
    NOT_LOCAL_MAC = 1   #: destination MAC is not ``local_mac`` (broadcast, multicast, other)
    NOT_IPV4 = 2        #: runt (< 14 bytes), ethertype not IPv4, or IP version not 4
    IP_OPTIONS = 3      #: IHL not 5: options (or an invalid IHL)
    FRAGMENT = 4        #: an IPv4 fragment (RFC 791 2.3), not reassembled here
    NOT_LOCAL_IP = 5    #: destination address not ``local_ip``
    NOT_SCTP = 6        #: neither IP protocol 132 nor UDP to ``udp_port``
    NO_ASSOCIATION = 7  #: SCTP, but no table entry for its ports and peer address
    INIT = 8            #: first chunk INIT with verification tag 0 (RFC 4960 8.5.1 A)
    TAG_REFLECTED = 9   #: first chunk ABORT / SHUTDOWN COMPLETE with T=1 (RFC 4960 8.5.1 B, C)


class FrameDrop(enum.IntEnum):
    """Why a frame was dropped; each has its own counter."""
    IP_CHECKSUM = 1  #: IPv4 header checksum (RFC 791 3.1)
    CRC = 2          #: SCTP CRC32c (RFC 4960 6.8)
    TAG = 3          #: verification tag mismatch on a known association (RFC 4960 8.5)
    LENGTH = 4       #: truncated headers, IPv4 / UDP length past the frame, SCTP < 12 bytes
    OVERFLOW = 5     #: the frame did not fit in the receive buffer


class ChunkException(enum.IntEnum):
    """``exc_meta.reason``: why a chunk went to the host."""
    CONTROL = 0          # not a DATA chunk
    SESSION_CONTROL = 1  # DATA with PPID 17 (RFC 5043 5.2.3)
    OTHER_PPID = 2       # DATA of a DDP association with another PPID
    NOT_DDP = 3          # DATA of an association without DDP


class ChunkError(enum.IntEnum):
    """``errors.kind``: why a chunk was not forwarded."""
    ORDERED = 1      # DDP Segment Chunk with U=0 (RFC 5043 10)
    FRAGMENTED = 2   # DDP Segment Chunk without both B and E (RFC 5043 9)
    TOO_SHORT = 3    # length < 4 (RFC 4960 3.2), or DATA shorter than its headers
    PAST_END = 4     # the chunk or its header runs past the end of the packet


class SegmentStatus(enum.Enum):
    """What happened to a segment."""
    ACCEPTED = 0     # checks passed: payload (if any) placed, message info valid
    ERROR = 1        # first error of the stream: reported, nothing placed (unless dma_error), stream latched
    DROPPED = 2      # the stream was already in error: dropped silently (RFC 5041 7.1)
    NO_STREAM = 3    # (association, stream id) is not an armed stream: dropped
    DUPLICATE = 4    # its DDP-SSN was seen before: dropped before placement, no second completion (RFC 5043 10)
    INVALID_SSN = 5  # DDP-SSN beyond the stream's window (RFC 5043 10): nothing placed, stream latched


# Tables the host writes over AXI4-Lite.
#: Cycles of the receive engine's timer tick (the delayed SACK's unit): 0.84 ms at 156.25 MHz.
SACK_TICK_CYCLES = 2 ** 17
#: Bits of a SACK row's delay in ticks of the engine's timer (2**17 cycles): up to 1023 ticks, past RFC 4960
#: 6.2's 500 ms bound (596 ticks at 156.25 MHz).
SACK_DELAY_BITS = 10


def sack_row_layout() -> Struct:
    """One write of the receive engine's acknowledgement unit (:mod:`hdl.rx.sack_unit`, RFC 4960 6.2): the
    association ``association`` starts with nothing received after ``cumulative_tsn`` (the peer's initial
    TSN - 1, RFC 4960 5.1, or the host SCTP's Cumulative TSN Ack when it hands the association over).

    With ``enabled`` the engine SACKs the association's DATA itself: its ack records (:func:`ack_layout`) go
    to the unit, not to ``m_axis_ack``, and each SACK leaves through the transmit engine (one packet of one
    SACK chunk, the row's verification tag) at once when a packet held a duplicate or left a gap (or the
    one before it did), after every second packet with DATA, else ``delay`` ticks after the first one
    unacknowledged (at least 1; 238 ticks are 199.7 ms, RFC 4960 6.2's 200 ms). The a_rwnd it advertises
    is ``window`` less ``held_bytes`` for each TSN received past a gap, down to 0 (RFC 4960 6.2). Without
    ``enabled`` the association's ack records go to the host as before and the unit sends nothing for it.
    Write a row while no DATA of the association is arriving (at set-up, before the peer's first DATA).
    With ``peer_sacks`` the peer's SACK chunks of the association go to the transmit engine's transport unit
    (``m_axis_peer_sack``, :mod:`hdl.rx.sack_reader`) instead of the host, from the next packet on; only in
    an RNIC built with the unit (``Rnic(transport=True)``), the field is ignored otherwise.

    With ``flush`` the write changes nothing of the row (its other fields are ignored): the SACK the
    association owes, if a packet waits for its delayed SACK, leaves now. A host writes it before a
    message whose receiver must see that SACK first (a Terminate after a refused Write, RFC 5040 5.5: the
    Write completes at the peer before the Terminate's error), as a host SCTP bundles its SACK ahead of
    the DATA (RFC 4960 6.10); the engine sends it as a packet of its own.
    """
    return Struct({
        "association": ASSOCIATION_BITS,
        "cumulative_tsn": 32,
        "delay": SACK_DELAY_BITS,
        "window": 32,
        "held_bytes": 16,
        "enabled": 1,
        "flush": 1,
        "peer_sacks": 1,
    })


def association_entry_layout() -> Struct:
    """One table write: entry ``index`` becomes the rest of the fields."""
    return Struct({
        "index": ASSOCIATION_BITS,
        "valid": 1,
        "ddp": 1,          # the association negotiated DDP (RFC 5043 11.1)
        "local_port": 16,  # our port: the inbound packet's destination port
        "peer_port": 16,   # the inbound packet's source port
        "peer_ip": 32,     # the inbound packet's IPv4 source address
        "tag": 32,         # expected verification tag (our Initiate Tag)
    })


#: An STag's width (RFC 5041 4.2).
STAG_BITS = 32
#: The default number of low STag bits that hold the key; the rest is the table index.
STAG_KEY_BITS = 8
#: The narrowest key: RFC 5042 5.1 asks that STags be hard to guess, and a key drawn afresh for every
#: registration of a row makes a deregistered region's STag miss the row's next region.
MIN_STAG_KEY_BITS = 8


def check_key_bits(key_bits: int, regions: int) -> None:
    """Refuse (ValueError) a key width outside ``MIN_STAG_KEY_BITS <= key_bits`` and
    ``index bits + key_bits <= STAG_BITS``, the index bits being those of ``regions - 1``."""
    index_bits = (regions - 1).bit_length()
    if key_bits < MIN_STAG_KEY_BITS:
        raise ValueError(f"STag key of {key_bits} bits: at least {MIN_STAG_KEY_BITS} (RFC 5042 5.1)")
    if index_bits + key_bits > STAG_BITS:
        raise ValueError(f"STag key of {key_bits} bits and {regions} regions ({index_bits} index bits): "
                         f"index bits + key bits must be at most {STAG_BITS}, the STag's width")


def region_entry_layout(pd_bits: int = 16, address_bits: int = 64, key_bits: int = STAG_KEY_BITS) -> Struct:
    """One registered memory region (RFC 5041 8.2, 8.3.1); ``key`` is the STag's low ``key_bits``."""
    return Struct({
        "valid": 1,
        "key": key_bits,
        "pd": pd_bits,
        "stream_bound": 1,           # usable by one DDP Stream only
        "association": ASSOCIATION_BITS,
        "stream_id": STREAM_BITS,
        "remote_read": 1,
        "remote_write": 1,
        "local_write": 1,
        "base_to": 64,
        "length": 64,
        "host_address": address_bits,
    })


def region_write_layout(entries: int, pd_bits: int = 16, address_bits: int = 64,
                        key_bits: int = STAG_KEY_BITS) -> Struct:
    """A host write of table row ``index`` (``entry.valid = 0`` revokes the STag)."""
    return Struct({
        "index": max(1, (entries - 1).bit_length()),
        "entry": region_entry_layout(pd_bits, address_bits, key_bits),
    })


def stream_entry_layout(pd_bits: int = 16) -> Struct:
    return Struct({"valid": 1, "pd": pd_bits})


def stream_write_layout(streams: int, pd_bits: int = 16) -> Struct:
    """A host write of a stream row; it also clears the row's error bit (re-arms the stream) and
    starts its DDP-SSN window at ``first_ssn``, the DDP-SSN of the session's first DDP segment
    (RFC 5043 6.1: a session's DDP-SSNs start at 0 with its Initiate or Accept, which the host
    handles, so 1, or 2 after an RTR the host consumed). Write a row only while no segment of
    the stream is in flight (before the session starts, or after its error was reported)."""
    return Struct({
        "index": max(1, (streams - 1).bit_length()),
        "entry": stream_entry_layout(pd_bits),
        "first_ssn": 16,
    })


def buffer_post_layout(streams: int, queues: int = 3, address_bits: int = 64) -> Struct:
    """A buffer posted by the host on queue ``qn`` of stream ``stream``."""
    return Struct({
        "stream": max(1, (streams - 1).bit_length()),
        "qn": max(1, (queues - 1).bit_length()),
        "address": address_bits,
        "length": 32,
    })


def buffer_revoke_layout(streams: int, queues: int = 3) -> Struct:
    """The host takes back posted buffers of queue ``qn`` of stream row ``stream``.

    ``whole_queue`` = 0: the buffer that took MSN ``msn`` stops being posted,
    if it still is (a message already completed, or an MSN never posted,
    leaves the queue as it is). ``whole_queue`` = 1: every buffer of the
    queue, and the queue's next post takes MSN 1 again (a new DDP stream on
    the row, RFC 5041 4.3). Later segments for a revoked MSN find no buffer:
    MSN range error (0x2/0x03) if the MSN was posted, no buffer (0x2/0x02)
    if it is ahead of the last post. A revocation takes effect when the
    table takes it; segments already decided against the buffer are still
    placed into it, so the host reuses the memory only after their reports
    (RFC 5041 leaves buffer management to the ULP). A queue is reset only
    while its stream is not receiving (row invalid).
    """
    return Struct({
        "stream": max(1, (streams - 1).bit_length()),
        "qn": max(1, (queues - 1).bit_length()),
        "msn": 32,
        "whole_queue": 1,
    })


def report_withheld(kind: int, status: int, tagged: bool, last: bool, qn: int, segment_reports: bool) -> bool:
    """Whether per-message reports leave this record out of ``m_axis_report`` (the ``segment_reports``
    configuration bit at 0, its reset value): a SEGMENT record of an ACCEPTED segment with ``last`` = 0
    that is not untagged QN 1 or QN 2. Every other record leaves: CHUNK_ERROR, every status but ACCEPTED
    (DUPLICATE, DROPPED, NO_STREAM, INVALID_SSN, ERROR, a ``dma_error``), every ``last`` = 1 (a Send's
    completion, RFC 5041 5.4; a Read Response's, a Write's end, RFC 5040 4.4, 4.5), and every segment
    of a Read Request or Terminate queue (RFC 5040 4.2). The accepted records of a stream leave in
    DDP-SSN order (:func:`report_layout`), so an ACCEPTED record at DDP-SSN n tells the host that every
    DDP-SSN of its stream before n was accepted and placed (RFC 5043 6.1, RFC 5041 5.3). The choice is
    made after the delivery order: ``reports_waiting`` and ``reports_discarded`` count the same records
    either way; the withheld ones are counted in ``reports_withheld``."""
    return (not segment_reports and kind == ReportKind.SEGMENT and status == SegmentStatus.ACCEPTED.value
            and not last and (tagged or qn not in (1, 2)))


def report_bytes() -> int:
    """Bytes of one ``m_axis_report`` beat: the report record padded to whole bytes."""
    return (report_layout(ADDRESS_BITS).size + 7) // 8


# Counters and the register map.
#: Counter outputs of the frame receiver, 32 bits each, wrapping.
FRAME_COUNTERS = ("frames", "delivered", "exceptions", "ip_checksum_errors", "crc_errors",
                  "tag_errors", "length_errors", "overflow")


#: Counters kept beside the frame receiver's: segment verdicts as placement decided them (a segment
#: whose write then failed counts as accepted, and in ``dma_errors``), chunk errors, ack records (those
#: on ``m_axis_ack``: not the ones of an association the acknowledgement unit SACKs).
SEGMENT_COUNTERS = ("segments_accepted", "segments_error", "segments_dropped", "segments_no_stream",
                    "segments_duplicate", "segments_invalid_ssn", "chunk_errors", "dma_errors", "acks",
                    "reports_waiting", "reports_discarded", "peer_sacks_malformed", "reports_withheld")
#: ``reports_waiting`` is a level, not a count: report records of accepted segments that wait for an
#: earlier DDP-SSN of their stream (their segments are placed; the records leave when the gap fills).
#: ``reports_discarded`` counts such records dropped when the host rewrote their stream's row (left
#: waiting by a session that ended in error, RFC 5041 7.1). ``reports_withheld`` counts the records of
#: accepted middle segments that per-message reports leave out (:func:`report_withheld`; 0 while the
#: ``segment_reports`` configuration bit is 1). Every segment counted, and every chunk error, leaves as a
#: report record, waits, is discarded or is withheld.


def register_map(associations: int = 2, stream_ids: int = 4, regions: int = 16,
                 key_bits: int = STAG_KEY_BITS) -> RegisterMap:
    """The engine's AXI4-Lite register map for these table sizes and STag key width (see
    :mod:`abi.register_file`; PARAMS: :data:`RX_PARAMS`)."""
    check_key_bits(key_bits, regions)
    streams = associations * stream_ids
    return RegisterMap(
        # drop_when_full = 1: a frame that meets a full receive buffer is dropped whole and counted
        # (``overflow``) and s_axis never waits, as a MAC that cannot pause needs; 0: s_axis waits.
        # segment_reports = 0: per-message reports (:func:`report_withheld`); 1: a record for every segment.
        config=[("local_mac_low", 32), ("local_mac_high", 16), ("local_ip", 32), ("udp_port", 16),
                ("drop_when_full", 1), ("segment_reports", 1)],
        counters=list(FRAME_COUNTERS) + list(SEGMENT_COUNTERS),
        tables=[
            ("association", association_entry_layout()),
            ("region", region_write_layout(regions, 16, ADDRESS_BITS, key_bits)),
            ("stream", stream_write_layout(streams, 16)),
            ("buffer", buffer_post_layout(streams, 3, ADDRESS_BITS)),
            ("revoke", buffer_revoke_layout(streams, 3)),
            ("sack", sack_row_layout()),
        ],
    )




#: The receive engine's PARAMS register (``0x004``): its build parameters, read by the driver to size its
#: tables. ``width_bytes`` is the datapath width W; the stream ids per association and the posted buffers per
#: queue are powers of two, given as their logarithms; ``key_bits`` is the STag key width
#: (:func:`check_key_bits`). The region rows are the next word, :data:`RX_TABLES`.
RX_PARAMS = Struct({
    "width_bytes": 8,
    "associations": 8,
    "stream_ids_log2": 5,
    "buffers_log2": 5,
    "key_bits": 6,
})

#: The receive engine's second PARAMS word (``0x008``): its region rows (STag indices ``0 .. regions - 1``),
#: up to the ``2**24`` a key of 8 bits leaves.
RX_TABLES = Struct({
    "regions": 32,
})
