"""The engine ABI: everything the host sees of the receive engine, defined once.

Gateware, scoreboard model, testbenches and host driver import this module
(it imports nothing of the project but the register-file bus definition):

* the AXI4-Lite :func:`register_map`: configuration, counters and the tables
  the host writes (:func:`association_entry_layout`,
  :func:`region_write_layout`, :func:`stream_write_layout`,
  :func:`buffer_post_layout`);
* the records on the output streams: :func:`report_layout` on
  ``m_axis_report``, :func:`ack_layout` on ``m_axis_ack`` and
  :func:`exception_record_layout` as ``tuser`` of ``m_axis_exc``;
* the host's commands besides table rows: :func:`buffer_revoke_layout`;
* the enums that give those records' fields their meaning;
* the transmit engine's work requests on ``s_axis_wr``
  (:func:`work_request_layout`, :class:`WorkOpcode`), the inbound RDMA Read
  Requests it answers on ``s_axis_rr`` (:func:`read_response_layout`, refused
  ones back on ``m_axis_rr_refused``), the control plane's own packets and
  session-control DATA chunks on ``s_axis_ctl`` (:func:`control_request_layout`,
  :class:`ControlOpcode`), the host SCTP's acknowledgements and
  retransmissions on ``s_axis_tsn`` (:func:`tsn_request_layout`, refused
  resends back on ``m_axis_tsn_refused``), the completions on
  ``m_axis_completion`` (:func:`completion_layout`) and the rows the host
  writes into its tables (:func:`tx_association_write_layout`,
  :func:`tx_stream_write_layout`).

Error numbers are (layer, type, code) as in an RDMAP Terminate (RFC 5040
7.2, RFC 5041 7.2), see :data:`ERROR_NUMBER`. STag = table index <<
:data:`STAG_KEY_BITS` | key (RFC 5041 8.2 leaves the STag's structure to the
implementation).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from hdl.bus.register_file import DEVICE_ID, ID_OFFSET, PARAMS_OFFSET, RegisterMap

__all__ = [
    "ADDRESS_BITS", "ASSOCIATION_BITS", "STREAM_BITS", "SEQUENCE_WINDOW", "STAG_KEY_BITS", "ERROR_NUMBER",
    "FrameException", "FrameDrop", "ChunkException", "ChunkError", "SegmentStatus", "ReportKind", "ExceptionSource",
    "AckDisposition", "ack_layout", "ack_bytes", "buffer_revoke_layout", "DMA_ERROR",
    "association_entry_layout", "region_entry_layout", "region_write_layout", "stream_entry_layout",
    "SACK_DELAY_BITS", "SACK_TICK_CYCLES", "sack_row_layout",
    "stream_write_layout", "buffer_post_layout", "report_layout", "report_bytes", "segment_report_fields",
    "exception_record_layout", "FRAME_COUNTERS", "SEGMENT_COUNTERS", "register_map",
    "WorkOpcode", "work_request_layout", "work_request_bytes", "READ_RESPONSE_OPCODE", "read_response_layout",
    "read_response_bytes", "ControlOpcode", "control_request_layout", "control_request_bytes",
    "TsnOpcode", "tsn_request_layout", "tsn_request_bytes", "CompletionStatus", "completion_layout",
    "completion_bytes", "TransportOpcode", "RetransmitCause", "transport_write_layout", "transport_write_bytes",
    "peer_sack_layout", "peer_sack_bytes", "transport_record_layout", "transport_record_bytes",
    "tx_association_write_layout", "tx_stream_write_layout", "TX_MIN_MULPDU", "TX_REGISTER_BASE", "tx_register_map",
    "MAC_RX_EVENTS", "MAC_TX_EVENTS", "DEVICE_ID", "ID_OFFSET", "PARAMS_OFFSET",
    "END", "ESC", "ESC_END", "ESC_ESC", "Op", "TxInput", "TxOutput", "tx_input_bytes", "tx_output_bytes", "Status",
    "REQUEST_HEADER_BYTES", "RESPONSE_HEADER_BYTES",
    "CRC_BYTES", "REQUEST_DATA_BYTES", "LINK_MAGIC", "LINK_VERSION", "PING_BODY_BYTES",
    "EXCEPTION_HEADER_BYTES", "MAX_READ_BYTES", "REPLAYED_OPS", "RESPONSE_FLAG", "LinkQueue", "POLL_BODY_BYTES", "HOLD_BYTES",
    "pop_body_bytes",
]

#: Host (DMA) address width of ``m_axi`` and of every address in a table or record.
ADDRESS_BITS = 64

#: Association index width: up to 2**ASSOCIATION_BITS associations in the table.
ASSOCIATION_BITS = 4
#: SCTP stream identifier width (RFC 4960 3.3.1).
STREAM_BITS = 16

#: DDP-SSNs tracked per DDP stream (RFC 5043 10): a segment up to SEQUENCE_WINDOW - 1 after the
#: lowest DDP-SSN not yet received is placed on arrival and its record waits for the gap; one further
#: ahead is INVALID_SSN. The host keeps the peer within it through its SCTP receive window.
SEQUENCE_WINDOW = 32

#: An error number: layer (0 RDMAP, 1 DDP, 2 LLP), error type, error code.
#: ``valid`` = 0 means no error.
ERROR_NUMBER = data.StructLayout({
    "valid": unsigned(1),
    "layer": unsigned(4),
    "etype": unsigned(4),
    "code": unsigned(8),
})


class ReportKind(enum.IntEnum, shape=1):
    """``report.kind``."""
    SEGMENT = 0      #: one DDP segment's verdict (after its payload is in host memory)
    CHUNK_ERROR = 1  #: a chunk that was neither placed nor passed to the host


def report_layout(address_bits: int = 64) -> data.StructLayout:
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
    """
    return data.StructLayout({
        "kind": unsigned(1),
        "status": unsigned(3),          # SegmentStatus
        "chunk_error": unsigned(3),     # ChunkError
        "dma_error": unsigned(1),
        "error": ERROR_NUMBER,
        **segment_report_fields(address_bits),
    })


def segment_report_fields(address_bits: int = 64) -> dict:
    """What the engine reports of a DDP segment: carried from the placement
    check's verdict into the report record unchanged."""
    return {
        "association": unsigned(ASSOCIATION_BITS),
        "stream_id": unsigned(STREAM_BITS),
        "tsn": unsigned(32),
        "ddp_ssn": unsigned(16),
        "tagged": unsigned(1),
        "last": unsigned(1),
        "opcode": unsigned(4),
        "stag": unsigned(32),
        "to": unsigned(64),                      # tagged (RFC 5041 4.2): with stag, the header a Terminate quotes
        "qn": unsigned(32),
        "msn": unsigned(32),
        "mo": unsigned(32),
        "invalidate_stag": unsigned(32),
        "payload_length": unsigned(16),
        "host_address": unsigned(address_bits),  # where the payload went (ACCEPTED, length > 0)
        "message_length": unsigned(33),          # untagged, L = 1: MO + payload length (RFC 5041 5.4)
    }


#: The error of a segment whose placement got a write response other than OKAY: DDP Local
#: Catastrophic Error (RFC 5041 7.2, layer 1, type 0x0, code 0x00).
DMA_ERROR = (1, 0x0, 0x00)


class AckDisposition(enum.IntEnum, shape=2):
    """``ack.disposition``: where the DATA chunk went; its outcome follows on that path."""
    SEGMENT = 0  #: a DDP segment, to placement: its SEGMENT report carries the same TSN
    TO_HOST = 1  #: passed to the host on the exception stream (session control, other PPID, not DDP)
    REFUSED = 2  #: not placed nor passed on: its CHUNK_ERROR report carries the same TSN


def ack_layout() -> data.StructLayout:
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
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "disposition": unsigned(2),     # AckDisposition
        "tsn": unsigned(32),
        "length": unsigned(16),
        "packet_end": unsigned(1),
        "immediate": unsigned(1),
    })


def ack_bytes() -> int:
    """Bytes of one ``m_axis_ack`` beat: the ack record padded to whole bytes."""
    return (ack_layout().size + 7) // 8


class ExceptionSource(enum.IntEnum, shape=1):
    """``exception_record.source``: what the exception stream's packet is."""
    FRAME = 0  #: a whole Ethernet frame (reason: FrameException)
    CHUNK = 1  #: one SCTP chunk of a checked packet (reason: ChunkException)


def exception_record_layout() -> data.StructLayout:
    """``tuser`` of every beat of a packet on the exception stream."""
    return data.StructLayout({
        "source": unsigned(1),
        "reason": unsigned(4),
        "association": unsigned(ASSOCIATION_BITS),
        "length": unsigned(16),
    })


# Reasons and verdicts (RFC 4960 8.5, RFC 5043 9-10, RFC 5041 7.1).
class FrameException(enum.IntEnum, shape=4):
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


class FrameDrop(enum.IntEnum, shape=4):
    """Why a frame was dropped; each has its own counter."""
    IP_CHECKSUM = 1  #: IPv4 header checksum (RFC 791 3.1)
    CRC = 2          #: SCTP CRC32c (RFC 4960 6.8)
    TAG = 3          #: verification tag mismatch on a known association (RFC 4960 8.5)
    LENGTH = 4       #: truncated headers, IPv4 / UDP length past the frame, SCTP < 12 bytes
    OVERFLOW = 5     #: the frame did not fit in the receive buffer


class ChunkException(enum.IntEnum, shape=2):
    """``exc_meta.reason``: why a chunk went to the host."""
    CONTROL = 0          # not a DATA chunk
    SESSION_CONTROL = 1  # DATA with PPID 17 (RFC 5043 5.2.3)
    OTHER_PPID = 2       # DATA of a DDP association with another PPID
    NOT_DDP = 3          # DATA of an association without DDP


class ChunkError(enum.IntEnum, shape=3):
    """``errors.kind``: why a chunk was not forwarded."""
    ORDERED = 1      # DDP Segment Chunk with U=0 (RFC 5043 10)
    FRAGMENTED = 2   # DDP Segment Chunk without both B and E (RFC 5043 9)
    TOO_SHORT = 3    # length < 4 (RFC 4960 3.2), or DATA shorter than its headers
    PAST_END = 4     # the chunk or its header runs past the end of the packet


class SegmentStatus(enum.Enum, shape=3):
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


def sack_row_layout() -> data.StructLayout:
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
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "cumulative_tsn": unsigned(32),
        "delay": unsigned(SACK_DELAY_BITS),
        "window": unsigned(32),
        "held_bytes": unsigned(16),
        "enabled": unsigned(1),
        "flush": unsigned(1),
        "peer_sacks": unsigned(1),
    })


def association_entry_layout() -> data.StructLayout:
    """One table write: entry ``index`` becomes the rest of the fields."""
    return data.StructLayout({
        "index": unsigned(ASSOCIATION_BITS),
        "valid": unsigned(1),
        "ddp": unsigned(1),          # the association negotiated DDP (RFC 5043 11.1)
        "local_port": unsigned(16),  # our port: the inbound packet's destination port
        "peer_port": unsigned(16),   # the inbound packet's source port
        "peer_ip": unsigned(32),     # the inbound packet's IPv4 source address
        "tag": unsigned(32),         # expected verification tag (our Initiate Tag)
    })


#: The low STag bits that hold the key; the rest is the table index.
STAG_KEY_BITS = 8


def region_entry_layout(pd_bits: int = 16, address_bits: int = 64) -> data.StructLayout:
    """One registered memory region (RFC 5041 8.2, 8.3.1)."""
    return data.StructLayout({
        "valid": unsigned(1),
        "key": unsigned(STAG_KEY_BITS),
        "pd": unsigned(pd_bits),
        "stream_bound": unsigned(1),           # usable by one DDP Stream only
        "association": unsigned(ASSOCIATION_BITS),
        "stream_id": unsigned(STREAM_BITS),
        "remote_read": unsigned(1),
        "remote_write": unsigned(1),
        "local_write": unsigned(1),
        "base_to": unsigned(64),
        "length": unsigned(64),
        "host_address": unsigned(address_bits),
    })


def region_write_layout(entries: int, pd_bits: int = 16, address_bits: int = 64) -> data.StructLayout:
    """A host write of table row ``index`` (``entry.valid = 0`` revokes the STag)."""
    return data.StructLayout({
        "index": unsigned(max(1, (entries - 1).bit_length())),
        "entry": region_entry_layout(pd_bits, address_bits),
    })


def stream_entry_layout(pd_bits: int = 16) -> data.StructLayout:
    return data.StructLayout({"valid": unsigned(1), "pd": unsigned(pd_bits)})


def stream_write_layout(streams: int, pd_bits: int = 16) -> data.StructLayout:
    """A host write of a stream row; it also clears the row's error bit (re-arms the stream) and
    starts its DDP-SSN window at ``first_ssn``, the DDP-SSN of the session's first DDP segment
    (RFC 5043 6.1: a session's DDP-SSNs start at 0 with its Initiate or Accept, which the host
    handles, so 1, or 2 after an RTR the host consumed). Write a row only while no segment of
    the stream is in flight (before the session starts, or after its error was reported)."""
    return data.StructLayout({
        "index": unsigned(max(1, (streams - 1).bit_length())),
        "entry": stream_entry_layout(pd_bits),
        "first_ssn": unsigned(16),
    })


def buffer_post_layout(streams: int, queues: int = 3, address_bits: int = 64) -> data.StructLayout:
    """A buffer posted by the host on queue ``qn`` of stream ``stream``."""
    return data.StructLayout({
        "stream": unsigned(max(1, (streams - 1).bit_length())),
        "qn": unsigned(max(1, (queues - 1).bit_length())),
        "address": unsigned(address_bits),
        "length": unsigned(32),
    })


def buffer_revoke_layout(streams: int, queues: int = 3) -> data.StructLayout:
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
    return data.StructLayout({
        "stream": unsigned(max(1, (streams - 1).bit_length())),
        "qn": unsigned(max(1, (queues - 1).bit_length())),
        "msn": unsigned(32),
        "whole_queue": unsigned(1),
    })


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
                    "reports_waiting", "reports_discarded", "peer_sacks_malformed")
#: ``reports_waiting`` is a level, not a count: report records of accepted segments that wait for an
#: earlier DDP-SSN of their stream (their segments are placed; the records leave when the gap fills).
#: ``reports_discarded`` counts such records dropped when the host rewrote their stream's row (left
#: waiting by a session that ended in error, RFC 5041 7.1). Every segment counted leaves as a report
#: record, waits, or is discarded.


def register_map(associations: int = 2, stream_ids: int = 4, regions: int = 16) -> RegisterMap:
    """The engine's AXI4-Lite register map for these table sizes (see :mod:`hdl.bus.register_file`)."""
    streams = associations * stream_ids
    return RegisterMap(
        # drop_when_full = 1: a frame that meets a full receive buffer is dropped whole and counted
        # (``overflow``) and s_axis never waits, as a MAC that cannot pause needs; 0: s_axis waits.
        config=[("local_mac_low", 32), ("local_mac_high", 16), ("local_ip", 32), ("udp_port", 16),
                ("drop_when_full", 1)],
        counters=list(FRAME_COUNTERS) + list(SEGMENT_COUNTERS),
        tables=[
            ("association", association_entry_layout()),
            ("region", region_write_layout(regions, 16, ADDRESS_BITS)),
            ("stream", stream_write_layout(streams, 16)),
            ("buffer", buffer_post_layout(streams, 3, ADDRESS_BITS)),
            ("revoke", buffer_revoke_layout(streams, 3)),
            ("sack", sack_row_layout()),
        ],
    )


# The transmit engine.
class WorkOpcode(enum.IntEnum, shape=4):
    """``work_request.opcode``: the RDMAP opcode of the message (RFC 5040 4.2), the ones a host posts."""
    RDMA_WRITE = 0                   #: tagged (RFC 5040 4.3): ``stag``/``to`` name the remote buffer
    RDMA_READ_REQUEST = 1            #: untagged QN 1; its payload is the 28-byte Read Request header (4.4)
    SEND = 3                         #: untagged QN 0
    SEND_WITH_INVALIDATE = 4         #: untagged QN 0, carries ``invalidate_stag`` (RFC 5040 4.1)
    SEND_WITH_SE = 5
    SEND_WITH_SE_AND_INVALIDATE = 6
    TERMINATE = 7                    #: untagged QN 2 (RFC 5040 4.8): the Terminate's header and the bytes it
    #: carries, read from ``host_address`` (RFC 5040 7: the host builds it; sent as the Sends are)


#: The smallest MULPDU the transmit engine segments to: a Read Request (18-byte untagged header and its
#: 28 bytes) fits one segment. RFC 5043 9 never lets a MULPDU fall below 516.
TX_MIN_MULPDU = 46


def work_request_layout(address_bits: int = 64) -> data.StructLayout:
    """One work request on the transmit engine's ``s_axis_wr``: one AXI4-Stream beat, ``tdata`` =
    the record's bits (padded to whole bytes, :func:`work_request_bytes`), ``tlast`` = 1.

    The engine turns it into DDP segments of at most the association's MULPDU (RFC 5041 5.2),
    each in one DATA chunk (U = B = E = 1, PPID 16, RFC 5043 5.2, 9, 10) of one SCTP packet in one
    Ethernet frame. It numbers them: TSN from the association's counter (RFC 4960 6.1), DDP-SSN
    from the stream's (RFC 5043 5.2.1), MSN from the stream's queue (QN 0 Sends, QN 1 Read
    Requests; RFC 5041 4.3), and reads the payload from ``host_address`` segment by segment.

    * ``association``: the row of the association table (ports, peer, verification tag, MULPDU);
    * ``stream_id``: the SCTP stream (below the engine's ``stream_ids``); the stream row is
      ``association * stream_ids + stream_id``;
    * ``host_address``, ``length``: the local payload (RDMA Write, Sends), any byte alignment,
      length below 2**32 (RFC 5041 5.2), 0 allowed (one segment without payload). For an RDMA
      Read Request ``length`` is the RDMA Read Message Size and nothing is read from memory;
    * ``stag``, ``to``: RDMA Write: the Data Sink's STag and Tagged Offset of the first byte
      (each segment's TO advances by its payload, RFC 5041 5.2); RDMA Read Request: the Data
      Source STag and TO (RFC 5040 4.4);
    * ``sink_stag``, ``sink_to``: RDMA Read Request: the local Data Sink STag and TO (RFC 5040 4.4);
    * ``invalidate_stag``: Send with Invalidate variants (RFC 5040 4.1); ignored otherwise (sent as 0);
    * ``wr_id``: the host's name for the request, returned in its completion (:func:`completion_layout`):
      an RDMA Write, a Send or a Terminate completes once the peer's SCTP has acknowledged its last DATA chunk, so
      its payload stays in host memory until then (RFC 5041 5.4, Data Source); an RDMA Read Request
      has no completion here (the Read completes with its Read Response, on the receive side).
    """
    return data.StructLayout({
        "opcode": unsigned(4),             # WorkOpcode
        "wr_id": unsigned(32),
        "association": unsigned(ASSOCIATION_BITS),
        "stream_id": unsigned(STREAM_BITS),
        "host_address": unsigned(address_bits),
        "length": unsigned(32),
        "stag": unsigned(32),
        "to": unsigned(64),
        "sink_stag": unsigned(32),
        "sink_to": unsigned(64),
        "invalidate_stag": unsigned(32),
    })


def work_request_bytes() -> int:
    """Bytes of one ``s_axis_wr`` beat: the work request padded to whole bytes."""
    return (work_request_layout(ADDRESS_BITS).size + 7) // 8


#: The RDMAP opcode of an RDMA Read Response (RFC 5040 4.2: tagged). Not a :class:`WorkOpcode`: the host
#: does not post Read Responses, the engine sends them for the records on ``s_axis_rr``.
READ_RESPONSE_OPCODE = 2


def read_response_layout(address_bits: int = 64) -> data.StructLayout:
    """One inbound RDMA Read Request to answer, on the transmit engine's ``s_axis_rr``: one
    AXI4-Stream beat, ``tdata`` = the record's bits (padded to whole bytes,
    :func:`read_response_bytes`), ``tlast`` = 1.

    The engine answers it with one RDMA Read Response (RFC 5040 4.5: tagged, RDMAP opcode
    :data:`READ_RESPONSE_OPCODE`, no RDMAP header of its own) of ``length`` bytes, segmented like an
    RDMA Write (RFC 5041 5.2: MULPDU - 14 bytes a segment, the TO advancing from ``sink_to``), on
    the stream the request came on, with that stream's DDP-SSNs and the association's TSNs.

    * ``association``, ``stream_id``: where the Read Request arrived (below the engine's tables,
      as for a work request); the response goes back on the same DDP stream (RFC 5043 5.2);
    * ``sink_stag``, ``sink_to``: the request's Data Sink STag and TO (RFC 5040 4.4), copied into
      the response's tagged DDP headers;
    * ``length``: the RDMA Read Message Size (RFC 5040 4.4), 0 allowed (one segment, no payload);
    * ``host_address``: where the request's Data Source STag and TO point in host memory, already
      translated and checked by whoever writes the record: the RNIC top level from the receive
      engine's region table, the driver's software path from its own; the check is RFC 5040 5.2 /
      RFC 5041 8.3.1's (STag valid, same PD, the stream allowed, REMOTE_READ, [TO, TO + size)
      inside the region, no 64-bit wrap). A request that fails it never reaches ``s_axis_rr``: its
      writer sends the Terminate. The engine reads exactly ``length`` bytes from ``host_address``
      and checks nothing of it;
    * ``msn``: the Read Request's MSN on queue 1 (RFC 5041 4.3); not sent, carried so that a
      refused record names its request.

    IRD (RFC 6581 3, 4.1): the engine holds at most ``ird`` (its parameter) requests per stream
    row, not per association: IRD is negotiated per DDP Stream Session (RFC 6581 7, 9; one
    RdmapEndpoint in the model), and a stream row holds one. The driver advertises at most
    ``ird``. A request counts from its record's acceptance until its response's last segment has
    been handed to the packet path (as the model's responder counts them). A record beyond
    ``ird`` is refused: it is not answered and leaves whole on ``m_axis_rr_refused``, in the
    order of refusal, and the driver sends the Terminate the model sends (RDMAP Remote Operation
    Error, catastrophic to the stream, 0x2/0x07). Nothing is dropped: while ``m_axis_rr_refused``
    is not read, ``s_axis_rr`` waits. Responses leave in the order their records were accepted
    (RFC 5040 5.5), ahead of local work requests waiting on ``s_axis_wr``.
    """
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "stream_id": unsigned(STREAM_BITS),
        "host_address": unsigned(address_bits),
        "length": unsigned(32),
        "sink_stag": unsigned(32),
        "sink_to": unsigned(64),
        "msn": unsigned(32),
    })


def read_response_bytes() -> int:
    """Bytes of one ``s_axis_rr`` or ``m_axis_rr_refused`` beat: the record padded to whole bytes."""
    return (read_response_layout(ADDRESS_BITS).size + 7) // 8


class ControlOpcode(enum.IntEnum, shape=4):
    """``control_request.opcode``: what the control plane sends through the transmit engine besides RDMA
    messages. The values follow :class:`WorkOpcode` and :data:`READ_RESPONSE_OPCODE` without meeting them,
    so one 4-bit opcode names any message the engine sends."""
    SESSION_CONTROL = 8  #: one DATA chunk of PPID 17 (RFC 5043 5.2.3) with the association's next TSN
    PACKET = 9           #: one SCTP packet of the host's chunks (INIT, SACK, HEARTBEAT, ABORT...)


def control_request_layout(address_bits: int = 64) -> data.StructLayout:
    """One request on the transmit engine's ``s_axis_ctl``: one AXI4-Stream beat, ``tdata`` = the record's
    bits (padded to whole bytes, :func:`control_request_bytes`), ``tlast`` = 1. The bytes it sends are read
    from host memory, ``length`` bytes at ``host_address`` (any alignment), over the same AXI4 read path as
    the payloads; the host keeps them there until the frame has left.

    * :attr:`ControlOpcode.PACKET`: the bytes are an SCTP packet's chunks, each padded to 4 bytes as
      bundled (RFC 4960 3.2; the last one's padding may be left out, the engine pads), ``length`` at least
      4. The engine puts the SCTP common header in front (the association row's ports, verification tag
      ``tag``: the request names it, since an INIT carries 0, RFC 4960 8.5.1 A, and an ABORT or SHUTDOWN
      COMPLETE with the T bit the peer's own, 8.5.1 B, C), fills in the CRC32c (6.8) and sends it in an
      IPv4 (or UDP) and Ethernet frame like a DDP segment's. No TSN is taken: a DATA chunk among the
      chunks keeps the TSN the host wrote into it.
    * :attr:`ControlOpcode.SESSION_CONTROL`: the bytes are one DDP Stream Session Control message
      (RFC 5043 5.2.3), at least 1 byte (RFC 4960 6.2). The engine sends it as one DATA chunk: U = B =
      E = 1, stream ``stream_id``, stream sequence number 0, PPID 17, as DDP does every chunk (RFC 5043
      9, 10), with the association's next TSN from the same counter as its DDP segments (RFC 4960 6.1:
      one TSN space), in a packet of its own with the row's verification tag. ``tag`` is ignored.

    ``wr_id``: a SESSION_CONTROL message completes like a Send (:func:`completion_layout`), once its
    DATA chunk is acknowledged, and its bytes stay in host memory until then (a retransmission reads them
    again). A PACKET has no completion of its own: its bytes are read once, before those of any request
    accepted after it (control requests in order, ahead of local work), so the host may reuse them once a
    request it posted after the PACKET was accepted has completed.

    Each SCTP packet is at most as long as a full DDP segment's (MULPDU + 30 bytes): ``length`` at most
    the row's MULPDU + 18 for a PACKET, MULPDU + 2 for a SESSION_CONTROL message.

    Order: a control request goes to the segmenter ahead of Read Responses and local work requests
    waiting for it, between messages (a message under way is finished first).
    """
    return data.StructLayout({
        "opcode": unsigned(4),             # ControlOpcode
        "wr_id": unsigned(32),
        "association": unsigned(ASSOCIATION_BITS),
        "stream_id": unsigned(STREAM_BITS),
        "tag": unsigned(32),
        "host_address": unsigned(address_bits),
        "length": unsigned(16),
    })


def control_request_bytes() -> int:
    """Bytes of one ``s_axis_ctl`` beat: the control request padded to whole bytes."""
    return (control_request_layout(ADDRESS_BITS).size + 7) // 8


class TsnOpcode(enum.IntEnum, shape=2):
    """``tsn_request.opcode``."""
    ACK = 0     #: the Cumulative TSN Ack the host's SCTP processed (RFC 4960 6.2.1 D): ``tsn`` and all before
    RESEND = 1  #: send the DATA chunk of ``tsn`` again (T3-rtx, RFC 4960 6.3.3; fast retransmit, 7.2.4)
    LIMIT = 2   #: new DATA chunks may carry TSNs up to ``tsn`` and no further (rwnd and cwnd, RFC 4960 6.1 A, B)


def tsn_request_layout() -> data.StructLayout:
    """One request on the transmit engine's ``s_axis_tsn``: one AXI4-Stream beat, ``tdata`` = the record's
    bits (padded, :func:`tsn_request_bytes`), ``tlast`` = 1. The host's SCTP decides what is acknowledged
    and what to retransmit; the engine keeps what it needs to send a DATA chunk again.

    The retransmission ring: for each association row the engine keeps the segment record (every header
    field, the host address and length of its payload, the work request's ``wr_id``) of each DATA chunk
    it sent and whose TSN is not yet acknowledged, in a block RAM indexed by TSN mod ``ring_tsns`` (an
    engine parameter, 64 by default: the most DATA chunks of a row in flight). A row write
    (:func:`tx_association_write_layout`) empties the row's ring: nothing is acknowledged below its
    ``next_tsn``. When a row's ring is full, the next DATA chunk of that row waits (and every message
    behind it) until an ACK retires one.

    Requests are handled one at a time, in order:

    * ACK: every DATA chunk from the last acknowledged TSN up to ``tsn`` (serial arithmetic, RFC 1982,
      as RFC 4960 1.6) leaves the ring, in TSN order, two cycles each; for each one that is the last
      chunk of an RDMA Write, a Send or a session-control message, the engine emits its completion
      (:func:`completion_layout`). An ACK at or below the last one changes nothing; one past the highest
      TSN sent retires up to that one.
    * RESEND: the DATA chunk of ``tsn`` leaves again, byte for byte as before (same TSN, stream,
      DDP-SSN, MSN/MO or STag/TO, payload read again from host memory: RFC 4960 6.3.3 E3, 7.2.4; the
      RFC leaves the bundling to the sender, and the engine sends one chunk a packet as it did the first
      time), ahead of new segments waiting (6.1: retransmissions first). A TSN not in the ring (already
      acknowledged, never sent, or beyond ``ring_tsns``) is refused: the record leaves on
      ``m_axis_tsn_refused``, and ``s_axis_tsn`` waits while that output is not read.
    * LIMIT: the sending window, as the host's SCTP computes it from the peer's rwnd and its own cwnd
      (RFC 4960 6.1 A, B; 7.2): the row's new DATA chunks may carry TSNs up to ``tsn`` (serial arithmetic),
      and the next one beyond waits (and every message behind it) until a LIMIT reaches it. A LIMIT at or
      below the last TSN sent stops the row's new chunks; retransmissions (RESEND) are never held (RFC 4960
      6.1 C: the host decides them). A row write lifts the limit: until its first LIMIT a row is bounded by
      its ring alone. The host raises the limit as acknowledgements open the window; it can know each
      chunk's TSN in advance, since the engine numbers them in the order of the requests it accepted, one
      per DDP segment (RFC 5041 5.2) or session-control message.
    """
    return data.StructLayout({
        "opcode": unsigned(2),             # TsnOpcode
        "association": unsigned(ASSOCIATION_BITS),
        "tsn": unsigned(32),
    })


def tsn_request_bytes() -> int:
    """Bytes of one ``s_axis_tsn`` or ``m_axis_tsn_refused`` beat: the record padded to whole bytes."""
    return (tsn_request_layout().size + 7) // 8


def transport_write_layout() -> data.StructLayout:
    """One beat of the transmit engine's ``s_axis_transport``: the association row ``association`` hands the
    peer's SACKs to the engine's transport unit (:mod:`hdl.tx.transport_unit`, RFC 4960 6.1-6.3, 7.2, 8.1)
    from its next TSN on, with the peer's a_rwnd, the path's ``mtu`` (the SCTP packet size of 7.2's
    formulas), the largest DATA chunk's user data ``chunk_bytes``, RTO.Initial/Min/Max in ticks of the
    engine's timer (:data:`SACK_TICK_CYCLES` cycles), Association.Max.Retrans and Max.Burst (RFC 4960 15).
    Write it while the row has no DATA chunk unacknowledged. From then on the host's ACK, RESEND and
    LIMIT for the row are refused, and the row's SACK chunks go to ``s_axis_peer_sack``; an association
    row write (:func:`tx_association_write_layout`) gives the row back to the host."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "peer_a_rwnd": unsigned(32),
        "mtu": unsigned(16),
        "chunk_bytes": unsigned(16),
        "rto_initial": unsigned(32),
        "rto_min": unsigned(32),
        "rto_max": unsigned(32),
        "max_retrans": unsigned(8),
        "max_burst": unsigned(4),
    })


def transport_write_bytes() -> int:
    return (transport_write_layout().size + 7) // 8


def peer_sack_layout(gap_blocks: int = 4) -> data.StructLayout:
    """One beat of ``s_axis_peer_sack``: a SACK chunk of the peer (RFC 4960 3.3.4) for a row with the
    transport: its Cumulative TSN Ack, a_rwnd, the number of Gap Ack Blocks it carried (``gap_count``) and
    the first ``gap_blocks`` of them, and the number of Duplicate TSNs; or, with ``shutdown``, a SHUTDOWN's
    Cumulative TSN Ack (RFC 4960 9.2; a_rwnd and the blocks are then not read)."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "shutdown": unsigned(1),
        "cumulative_tsn_ack": unsigned(32),
        "a_rwnd": unsigned(32),
        "gap_count": unsigned(16),
        "gaps": data.ArrayLayout(data.StructLayout({"start": unsigned(16), "end": unsigned(16)}), gap_blocks),
        "duplicate_count": unsigned(16),
    })


def peer_sack_bytes() -> int:
    return (peer_sack_layout().size + 7) // 8


class TransportOpcode(enum.IntEnum, shape=3):
    """``transport_record.opcode``: the transport unit's decisions. The first three act on the
    retransmission ring as the host's ``TsnOpcode`` do; the last two stop the row and go to the host on
    ``m_axis_transport_stopped``, which aborts the association."""
    RETIRE = 0      #: the chunks ``first_tsn`` .. ``tsn`` are acknowledged (the ring's ACK)
    RESEND = 1      #: the chunk of ``tsn`` goes again, for ``cause`` (RESEND)
    LIMIT = 2       #: new DATA may take TSNs up to ``tsn`` (LIMIT)
    FAILURE = 3     #: RFC 4960 8.1: ``error_count`` T3-rtx expiries in a row; ``first_tsn`` the Cumulative TSN Ack, ``tsn`` the highest TSN sent
    VIOLATION = 4   #: a SACK's Cumulative TSN Ack ``first_tsn`` is past ``tsn``, the highest TSN sent


class RetransmitCause(enum.IntEnum, shape=2):
    """Why a chunk waits for retransmission (``transport_record.cause``)."""
    NONE = 0
    FAST = 1        #: three miss indications (RFC 4960 7.2.4)
    TIMEOUT = 2     #: T3-rtx expiry (RFC 4960 6.3.3)


def transport_record_layout() -> data.StructLayout:
    """One decision of the transport unit (:class:`TransportOpcode`); ``m_axis_transport_stopped`` carries the
    FAILURE and VIOLATION ones."""
    return data.StructLayout({
        "opcode": TransportOpcode,
        "association": unsigned(ASSOCIATION_BITS),
        "tsn": unsigned(32),
        "first_tsn": unsigned(32),
        "cause": RetransmitCause,
        "error_count": unsigned(8),
    })


def transport_record_bytes() -> int:
    return (transport_record_layout().size + 7) // 8


class CompletionStatus(enum.IntEnum, shape=2):
    """``completion.status``."""
    SUCCESS = 0  #: every DATA chunk of the request was acknowledged by the peer's SCTP


def completion_layout() -> data.StructLayout:
    """One record on the transmit engine's ``m_axis_completion`` (one beat, padded to
    :func:`completion_bytes`): the request ``wr_id`` of ``association`` with ``opcode`` (a
    :class:`WorkOpcode` or :attr:`ControlOpcode.SESSION_CONTROL`) is complete, its last DATA chunk
    acknowledged (RFC 5041 5.4, Data Source: its memory may be reused). Completions leave in the TSN order
    of those last chunks, per row. Nothing is dropped: while the output is not read, ACKs wait."""
    return data.StructLayout({
        "wr_id": unsigned(32),
        "opcode": unsigned(4),
        "association": unsigned(ASSOCIATION_BITS),
        "status": unsigned(2),            # CompletionStatus
    })


def completion_bytes() -> int:
    """Bytes of one ``m_axis_completion`` beat."""
    return (completion_layout().size + 7) // 8


def tx_association_write_layout() -> data.StructLayout:
    """A host write of the transmit engine's association row ``index``: what the host learned in
    the association's handshake (RFC 4960 5.1) and its DDP negotiation.

    ``next_tsn`` loads the association's TSN counter: the next DATA chunk the engine sends carries
    it, each one after the previous + 1 (mod 2**32, RFC 4960 6.1). Write a row only while no work
    request of the association is in flight. ``udp`` = 1 sends SCTP over UDP (RFC 6951) from the
    engine's ``udp_port`` to ``peer_udp_port``, UDP checksum 0 (RFC 6951 5: SCTP's CRC32c protects
    the packet). ``mulpdu`` is at least :data:`TX_MIN_MULPDU` and at most the engine's largest
    segment (its ``max_segment``).
    """
    return data.StructLayout({
        "index": unsigned(ASSOCIATION_BITS),
        "peer_mac": unsigned(48),    # first wire byte in bits 47:40 (as written in text, 02:00:...)
        "peer_ip": unsigned(32),
        "local_port": unsigned(16),  # SCTP source port
        "peer_port": unsigned(16),   # SCTP destination port
        "tag": unsigned(32),         # the peer's Initiate Tag: the verification tag we send (RFC 4960 8.5)
        "udp": unsigned(1),
        "peer_udp_port": unsigned(16),
        "mulpdu": unsigned(16),
        "next_tsn": unsigned(32),
    })


def tx_stream_write_layout(streams: int) -> data.StructLayout:
    """A host write of the transmit engine's stream row ``index`` (``association * stream_ids +
    stream_id``): a new DDP stream. The next DDP segment of the stream carries DDP-SSN
    ``first_ssn`` (RFC 5043 6.1: 1 after the session's Initiate or Accept), and the MSNs of
    its queues 0 and 1 start again at 1 (RFC 5041 4.3). Write a row only while no work request of
    the stream is in flight."""
    return data.StructLayout({
        "index": unsigned(max(1, (streams - 1).bit_length())),
        "first_ssn": unsigned(16),
    })


#: Where the transmit engine's registers start in the RNIC top level's AXI4-Lite space
#: (:class:`hdl.rnic.Rnic`); the receive engine's :func:`register_map` is at 0.
TX_REGISTER_BASE = 0x1000


def tx_register_map(associations: int = 2, stream_ids: int = 4, transport: bool = False) -> RegisterMap:
    """The transmit engine's AXI4-Lite register map in the RNIC top level, at :data:`TX_REGISTER_BASE`
    (see :mod:`hdl.bus.register_file`; PARAMS: W in bits 7:0, IRD 15:8, ring TSNs 31:16). The engine's
    own addresses are the receive engine's configuration words (one MAC, IP and UDP port per RNIC). With
    ``transport`` (an RNIC built with the transport unit) the ``tx_transport`` row follows the others."""
    return RegisterMap(
        config=[],
        # sacks_sent: the receive engine's SACKs the engine has taken for sending (each one frame).
        # request_frames: the frames of the host's requests the engine has put out on m_axis (its frames out
        # less the SACKs taken in, so never ahead of them): a host paces its own frames by it, one read.
        counters=["sacks_sent", "request_frames"],
        tables=[
            ("tx_association", tx_association_write_layout()),
            ("tx_stream", tx_stream_write_layout(associations * stream_ids)),
            *([("tx_transport", transport_write_layout())] if transport else []),
        ],
    )


# The board's control link (:mod:`hdl.link.link` on the board, ``driver/link.py`` on the host).
# Framing is SLIP (RFC 1055): each frame is sent as ``END``, its bytes with
# ``END`` and ``ESC`` escaped, ``END``. The leading ``END`` ends any line noise
# before the frame. Each frame ends with the CRC-32 of the bytes before it
# (the Ethernet FCS polynomial, as ``zlib.crc32``), least significant byte first.
#
# Request (host to board), :data:`REQUEST_HEADER_BYTES` bytes of header, then data::
#
#     seq:u8  op:u8  address:u32le  length:u16le  data[...]  crc32:u32le
#
# Response (board to host)::
#
#     seq:u8  op|0x80:u8  status:u8  body[...]  crc32:u32le
#
# The response's op has :data:`RESPONSE_FLAG` set, so a line that echoes the
# host's bytes back is never taken for the board.
#
# A request is executed once: the board keeps the ``seq`` and ``op`` of the
# last request it executed, and a request with both equal is a retry. A retried
# write (register, memory, raw frame) is acknowledged again without being
# redone; a retried pop answers the records popped the first time; reads are
# executed again (they change nothing).

#: The MAC's receive events, each counted once per frame: a frame passed to the core, or the first
#: reason it was dropped (``hdl.mac``); the control link's MAC_COUNTERS answers them in this order,
#: then MAC_TX_EVENTS.
MAC_RX_EVENTS = ("rx_frames", "rx_symbol_errors", "rx_oversize", "rx_runts", "rx_fcs_errors", "rx_overflows")
#: The MAC's transmit events: a frame sent, a frame dropped as longer than its ``max_frame_bytes``.
MAC_TX_EVENTS = ("tx_frames", "tx_oversize")

# RFC 1055.
END, ESC, ESC_END, ESC_ESC = 0xC0, 0xDB, 0xDC, 0xDD

REQUEST_HEADER_BYTES = 8
RESPONSE_FLAG = 0x80
RESPONSE_HEADER_BYTES = 3
CRC_BYTES = 4
#: The largest ``data`` of a request (a memory write, a raw frame): the board's request buffer less the CRC.
REQUEST_DATA_BYTES = 2044
#: The longest memory read one request asks for.
MAX_READ_BYTES = 0xFFFF

#: The body of a PING response: magic (4 bytes), version, log2 of the host memory's bytes, and
#: REQUEST_DATA_BYTES (u16le).
LINK_MAGIC = b"RLNK"
LINK_VERSION = 3
PING_BODY_BYTES = 8

#: A popped exception's body starts with 8 bytes: the record (``tuser``, ``hdl.abi.exception_record_layout``,
#: u32le), the bytes of the packet kept (u16le), a flags byte (bit 0: the packet was longer than the board's
#: buffer and was cut), a zero byte; the packet's bytes follow.
EXCEPTION_HEADER_BYTES = 8


class Op(enum.IntEnum):
    """``op`` of a request; fields not named are zero."""
    PING = 0x00           #: body: PING_BODY_BYTES
    REG_READ = 0x01       #: address: register offset; body: the word (u32le); status BUS_ERROR if RRESP not OKAY
    REG_WRITE = 0x02      #: address: register offset, data: the word (u32le)
    MEM_READ = 0x03       #: address, length: host-memory bytes; body: those bytes
    MEM_WRITE = 0x04      #: address: host-memory address, data: the bytes
    POP_REPORT = 0x05     #: body: report records (``hdl.abi.report_bytes()`` bytes each; see below), or status EMPTY
    POP_ACK = 0x06        #: body: ack records (``hdl.abi.ack_bytes()`` bytes each; see below), or status EMPTY
    POP_EXCEPTION = 0x07  #: body: packets, each EXCEPTION_HEADER_BYTES then its bytes (see below), or status EMPTY
    SEND_FRAME = 0x08     #: data: an Ethernet frame without FCS, to the MAC's transmit side
    MAC_COUNTERS = 0x09   #: body: the MAC's counters, u32le each, in MAC_RX_EVENTS + MAC_TX_EVENTS order
    PUSH_RECORD = 0x0A    #: address: a :class:`TxInput`, data: one record of it (``TX_INPUT_BYTES``)
    POP_RECORD = 0x0B     #: address: a :class:`TxOutput`; body: records of it (``TX_OUTPUT_BYTES``), or EMPTY
    POLL = 0x0C           #: address: a register offset; body: :class:`LinkQueue` flags of the streams holding a
                          #: record (u32le), then the register's word (u32le); status BUS_ERROR as REG_READ

    # POP_REPORT, POP_ACK and POP_RECORD take as many records as wait, one at least, while the body stays
    # within ``length`` bytes and the board's hold RAM: each record padded with zeros to a multiple of 8
    # bytes but the last (`pop_body_bytes`), so a ``length`` of 0 takes one record. One request then
    # costs a header and a CRC for every record waiting, not for each. POP_EXCEPTION takes the first packet
    # whatever its length (cut at the hold RAM's end, and flagged so), then the next while one waits and
    # fits whole, by the length in its record, in ``length`` bytes and the hold RAM: each packet's header
    # and bytes padded with zeros to a multiple of 8 bytes but the last.


class LinkQueue(enum.IntFlag):
    """POLL's flags: the board's record streams that hold a record (one request to learn what to pop)."""
    REPORT = 1 << 0
    ACK = 1 << 1
    EXCEPTION = 1 << 2
    COMPLETION = 1 << 3              #: TxOutput.COMPLETION
    TSN_REFUSED = 1 << 4             #: TxOutput.TSN_REFUSED
    READ_RESPONSE_REFUSED = 1 << 5   #: TxOutput.READ_RESPONSE_REFUSED


POLL_BODY_BYTES = 8
#: The board's hold RAM (``hdl.link.link.ControlLink``'s default): the most body bytes of a response but a memory read.
HOLD_BYTES = 16384


def pop_body_bytes(record_bytes: int, count: int) -> int:
    """A pop's body of ``count`` records of ``record_bytes``: all but the last padded to a multiple of 8."""
    return (count - 1) * ((record_bytes + 7) // 8 * 8) + record_bytes


class TxInput(enum.IntEnum):
    """PUSH_RECORD's ``address``: the transmit engine's request stream the record goes to."""
    WORK = 0            #: ``s_axis_wr``, a :func:`work_request_layout` record
    READ_RESPONSE = 1   #: ``s_axis_rr``, a :func:`read_response_layout` record
    CONTROL = 2         #: ``s_axis_ctl``, a :func:`control_request_layout` record
    TSN = 3             #: ``s_axis_tsn``, a :func:`tsn_request_layout` record


class TxOutput(enum.IntEnum):
    """POP_RECORD's ``address``: the transmit engine's record stream a record is taken from."""
    COMPLETION = 0            #: ``m_axis_completion``, a :func:`completion_layout` record
    TSN_REFUSED = 1           #: ``m_axis_tsn_refused``, a :func:`tsn_request_layout` record
    READ_RESPONSE_REFUSED = 2  #: ``m_axis_rr_refused``, a :func:`read_response_layout` record


class Status(enum.IntEnum):
    OK = 0
    EMPTY = 1         #: a pop found no record waiting
    BAD_REQUEST = 2   #: unknown op, or a length that does not fit the op
    BAD_ADDRESS = 3   #: a host-memory range outside the board's memory
    BUS_ERROR = 4     #: the AXI4-Lite response was not OKAY
    FULL = 5          #: a push found the transmit engine's stream without room; nothing was pushed


#: Ops whose retry is answered from what the first execution left, not executed again.
REPLAYED_OPS = frozenset({Op.REG_WRITE, Op.MEM_WRITE, Op.SEND_FRAME, Op.POP_REPORT, Op.POP_ACK, Op.POP_EXCEPTION,
                          Op.PUSH_RECORD, Op.POP_RECORD})


def tx_input_bytes() -> dict[TxInput, int]:
    """The bytes of a record of each :class:`TxInput` (PUSH_RECORD's data length)."""
    return {TxInput.WORK: work_request_bytes(), TxInput.READ_RESPONSE: read_response_bytes(),
            TxInput.CONTROL: control_request_bytes(), TxInput.TSN: tsn_request_bytes()}


def tx_output_bytes() -> dict[TxOutput, int]:
    """The bytes of a record of each :class:`TxOutput` (POP_RECORD's body)."""
    return {TxOutput.COMPLETION: completion_bytes(), TxOutput.TSN_REFUSED: tsn_request_bytes(),
            TxOutput.READ_RESPONSE_REFUSED: read_response_bytes()}
