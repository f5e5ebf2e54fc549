"""The transmit engine's ABI (:class:`hdl.tx.engine.TxEngine`): what the host sees of it.

* the work requests on ``s_axis_wr`` (:func:`work_request_layout`,
  :class:`WorkOpcode`);
* the inbound RDMA Read Requests it answers on ``s_axis_rr``
  (:func:`read_response_layout`, refused ones back on ``m_axis_rr_refused``);
* the control plane's own packets and session-control DATA chunks on
  ``s_axis_ctl`` (:func:`control_request_layout`, :class:`ControlOpcode`);
* the host SCTP's acknowledgements and retransmissions on ``s_axis_tsn``
  (:func:`tsn_request_layout`, refused resends back on ``m_axis_tsn_refused``);
* the transport unit's rows, the peer's SACKs and its decisions
  (:func:`transport_write_layout`, :func:`peer_sack_layout`,
  :func:`transport_record_layout`);
* the completions on ``m_axis_completion`` (:func:`completion_layout`);
* the rows the host writes into its tables (:func:`tx_association_write_layout`,
  :func:`tx_stream_write_layout`) through :func:`tx_register_map`, and the
  :data:`TX_PARAMS` word.

Association and stream indices are the receive engine's (:mod:`abi.rx`): an
RNIC's two engines share its association table rows.
"""

import enum

from abi.layout import Array, Struct
from abi.register_file import RegisterMap
from abi.rx import ADDRESS_BITS, ASSOCIATION_BITS, SACK_TICK_CYCLES, STREAM_BITS

__all__ = [
    "WorkOpcode", "work_request_layout", "work_request_bytes", "READ_RESPONSE_OPCODE", "read_response_layout",
    "read_response_bytes", "ControlOpcode", "control_request_layout", "control_request_bytes",
    "TsnOpcode", "tsn_request_layout", "tsn_request_bytes", "CompletionStatus", "completion_layout",
    "completion_bytes", "TransportOpcode", "RetransmitCause", "transport_write_layout", "transport_write_bytes",
    "peer_sack_layout", "peer_sack_bytes", "transport_record_layout", "transport_record_bytes",
    "tx_association_write_layout", "tx_stream_write_layout", "TX_MIN_MULPDU", "TX_REGISTER_BASE", "tx_register_map",
    "TX_PARAMS",
]

class WorkOpcode(enum.IntEnum):
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


def work_request_layout(address_bits: int = 64) -> Struct:
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
    return Struct({
        "opcode": 4,             # WorkOpcode
        "wr_id": 32,
        "association": ASSOCIATION_BITS,
        "stream_id": STREAM_BITS,
        "host_address": address_bits,
        "length": 32,
        "stag": 32,
        "to": 64,
        "sink_stag": 32,
        "sink_to": 64,
        "invalidate_stag": 32,
    })


def work_request_bytes() -> int:
    """Bytes of one ``s_axis_wr`` beat: the work request padded to whole bytes."""
    return (work_request_layout(ADDRESS_BITS).size + 7) // 8


#: The RDMAP opcode of an RDMA Read Response (RFC 5040 4.2: tagged). Not a :class:`WorkOpcode`: the host
#: does not post Read Responses, the engine sends them for the records on ``s_axis_rr``.
READ_RESPONSE_OPCODE = 2


def read_response_layout(address_bits: int = 64) -> Struct:
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
    return Struct({
        "association": ASSOCIATION_BITS,
        "stream_id": STREAM_BITS,
        "host_address": address_bits,
        "length": 32,
        "sink_stag": 32,
        "sink_to": 64,
        "msn": 32,
    })


def read_response_bytes() -> int:
    """Bytes of one ``s_axis_rr`` or ``m_axis_rr_refused`` beat: the record padded to whole bytes."""
    return (read_response_layout(ADDRESS_BITS).size + 7) // 8


class ControlOpcode(enum.IntEnum):
    """``control_request.opcode``: what the control plane sends through the transmit engine besides RDMA
    messages. The values follow :class:`WorkOpcode` and :data:`READ_RESPONSE_OPCODE` without meeting them,
    so one 4-bit opcode names any message the engine sends."""
    SESSION_CONTROL = 8  #: one DATA chunk of PPID 17 (RFC 5043 5.2.3) with the association's next TSN
    PACKET = 9           #: one SCTP packet of the host's chunks (INIT, SACK, HEARTBEAT, ABORT...)


def control_request_layout(address_bits: int = 64) -> Struct:
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
    return Struct({
        "opcode": 4,             # ControlOpcode
        "wr_id": 32,
        "association": ASSOCIATION_BITS,
        "stream_id": STREAM_BITS,
        "tag": 32,
        "host_address": address_bits,
        "length": 16,
    })


def control_request_bytes() -> int:
    """Bytes of one ``s_axis_ctl`` beat: the control request padded to whole bytes."""
    return (control_request_layout(ADDRESS_BITS).size + 7) // 8


class TsnOpcode(enum.IntEnum):
    """``tsn_request.opcode``."""
    ACK = 0     #: the Cumulative TSN Ack the host's SCTP processed (RFC 4960 6.2.1 D): ``tsn`` and all before
    RESEND = 1  #: send the DATA chunk of ``tsn`` again (T3-rtx, RFC 4960 6.3.3; fast retransmit, 7.2.4)
    LIMIT = 2   #: new DATA chunks may carry TSNs up to ``tsn`` and no further (rwnd and cwnd, RFC 4960 6.1 A, B)


def tsn_request_layout() -> Struct:
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
    return Struct({
        "opcode": 2,             # TsnOpcode
        "association": ASSOCIATION_BITS,
        "tsn": 32,
    })


def tsn_request_bytes() -> int:
    """Bytes of one ``s_axis_tsn`` or ``m_axis_tsn_refused`` beat: the record padded to whole bytes."""
    return (tsn_request_layout().size + 7) // 8


def transport_write_layout() -> Struct:
    """One beat of the transmit engine's ``s_axis_transport``: the association row ``association`` hands the
    peer's SACKs to the engine's transport unit (:mod:`hdl.tx.transport_unit`, RFC 4960 6.1-6.3, 7.2, 8.1)
    from its next TSN on, with the peer's a_rwnd, the path's ``mtu`` (the SCTP packet size of 7.2's
    formulas), the largest DATA chunk's user data ``chunk_bytes``, RTO.Initial/Min/Max in ticks of the
    engine's timer (:data:`SACK_TICK_CYCLES` cycles), Association.Max.Retrans and Max.Burst (RFC 4960 15).
    Write it while the row has no DATA chunk unacknowledged. From then on the host's ACK, RESEND and
    LIMIT for the row are refused, and the row's SACK chunks go to ``s_axis_peer_sack``; an association
    row write (:func:`tx_association_write_layout`) gives the row back to the host."""
    return Struct({
        "association": ASSOCIATION_BITS,
        "peer_a_rwnd": 32,
        "mtu": 16,
        "chunk_bytes": 16,
        "rto_initial": 32,
        "rto_min": 32,
        "rto_max": 32,
        "max_retrans": 8,
        "max_burst": 4,
    })


def transport_write_bytes() -> int:
    return (transport_write_layout().size + 7) // 8


def peer_sack_layout(gap_blocks: int = 4) -> Struct:
    """One beat of ``s_axis_peer_sack``: a SACK chunk of the peer (RFC 4960 3.3.4) for a row with the
    transport: its Cumulative TSN Ack, a_rwnd, the number of Gap Ack Blocks it carried (``gap_count``) and
    the first ``gap_blocks`` of them, and the number of Duplicate TSNs; or, with ``shutdown``, a SHUTDOWN's
    Cumulative TSN Ack (RFC 4960 9.2; a_rwnd and the blocks are then not read)."""
    return Struct({
        "association": ASSOCIATION_BITS,
        "shutdown": 1,
        "cumulative_tsn_ack": 32,
        "a_rwnd": 32,
        "gap_count": 16,
        "gaps": Array(Struct({"start": 16, "end": 16}), gap_blocks),
        "duplicate_count": 16,
    })


def peer_sack_bytes() -> int:
    return (peer_sack_layout().size + 7) // 8


class TransportOpcode(enum.IntEnum):
    """``transport_record.opcode``: the transport unit's decisions. The first three act on the
    retransmission ring as the host's ``TsnOpcode`` do; the last two stop the row and go to the host on
    ``m_axis_transport_stopped``, which aborts the association."""
    RETIRE = 0      #: the chunks ``first_tsn`` .. ``tsn`` are acknowledged (the ring's ACK)
    RESEND = 1      #: the chunk of ``tsn`` goes again, for ``cause`` (RESEND)
    LIMIT = 2       #: new DATA may take TSNs up to ``tsn`` (LIMIT)
    #: RFC 4960 8.1: ``error_count`` T3-rtx expiries in a row; ``first_tsn`` the Cumulative TSN Ack, ``tsn`` the
    #: highest TSN sent
    FAILURE = 3
    VIOLATION = 4   #: a SACK's Cumulative TSN Ack ``first_tsn`` is past ``tsn``, the highest TSN sent


class RetransmitCause(enum.IntEnum):
    """Why a chunk waits for retransmission (``transport_record.cause``)."""
    NONE = 0
    FAST = 1        #: three miss indications (RFC 4960 7.2.4)
    TIMEOUT = 2     #: T3-rtx expiry (RFC 4960 6.3.3)


def transport_record_layout() -> Struct:
    """One decision of the transport unit (:class:`TransportOpcode`); ``m_axis_transport_stopped`` carries the
    FAILURE and VIOLATION ones."""
    return Struct({
        "opcode": TransportOpcode,
        "association": ASSOCIATION_BITS,
        "tsn": 32,
        "first_tsn": 32,
        "cause": RetransmitCause,
        "error_count": 8,
    })


def transport_record_bytes() -> int:
    return (transport_record_layout().size + 7) // 8


class CompletionStatus(enum.IntEnum):
    """``completion.status``."""
    SUCCESS = 0  #: every DATA chunk of the request was acknowledged by the peer's SCTP


def completion_layout() -> Struct:
    """One record on the transmit engine's ``m_axis_completion`` (one beat, padded to
    :func:`completion_bytes`): the request ``wr_id`` of ``association`` with ``opcode`` (a
    :class:`WorkOpcode` or :attr:`ControlOpcode.SESSION_CONTROL`) is complete, its last DATA chunk
    acknowledged (RFC 5041 5.4, Data Source: its memory may be reused). Completions leave in the TSN order
    of those last chunks, per row. Nothing is dropped: while the output is not read, ACKs wait."""
    return Struct({
        "wr_id": 32,
        "opcode": 4,
        "association": ASSOCIATION_BITS,
        "status": 2,            # CompletionStatus
    })


def completion_bytes() -> int:
    """Bytes of one ``m_axis_completion`` beat."""
    return (completion_layout().size + 7) // 8


def tx_association_write_layout() -> Struct:
    """A host write of the transmit engine's association row ``index``: what the host learned in
    the association's handshake (RFC 4960 5.1) and its DDP negotiation.

    ``next_tsn`` loads the association's TSN counter: the next DATA chunk the engine sends carries
    it, each one after the previous + 1 (mod 2**32, RFC 4960 6.1). Write a row only while no work
    request of the association is in flight. ``udp`` = 1 sends SCTP over UDP (RFC 6951) from the
    engine's ``udp_port`` to ``peer_udp_port``, UDP checksum 0 (RFC 6951 5: SCTP's CRC32c protects
    the packet). ``mulpdu`` is at least :data:`TX_MIN_MULPDU` and at most the engine's largest
    segment (its ``max_segment``).
    """
    return Struct({
        "index": ASSOCIATION_BITS,
        "peer_mac": 48,    # first wire byte in bits 47:40 (as written in text, 02:00:...)
        "peer_ip": 32,
        "local_port": 16,  # SCTP source port
        "peer_port": 16,   # SCTP destination port
        "tag": 32,         # the peer's Initiate Tag: the verification tag we send (RFC 4960 8.5)
        "udp": 1,
        "peer_udp_port": 16,
        "mulpdu": 16,
        "next_tsn": 32,
    })


def tx_stream_write_layout(streams: int) -> Struct:
    """A host write of the transmit engine's stream row ``index`` (``association * stream_ids +
    stream_id``): a new DDP stream. The next DDP segment of the stream carries DDP-SSN
    ``first_ssn`` (RFC 5043 6.1: 1 after the session's Initiate or Accept), and the MSNs of
    its queues 0 and 1 start again at 1 (RFC 5041 4.3). Write a row only while no work request of
    the stream is in flight."""
    return Struct({
        "index": max(1, (streams - 1).bit_length()),
        "first_ssn": 16,
    })


#: Where the transmit engine's registers start in the RNIC top level's AXI4-Lite space
#: (:class:`hdl.rnic.Rnic`); the receive engine's :func:`register_map` is at 0.
TX_REGISTER_BASE = 0x1000


def tx_register_map(associations: int = 2, stream_ids: int = 4, transport: bool = False) -> RegisterMap:
    """The transmit engine's AXI4-Lite register map in the RNIC top level, at :data:`TX_REGISTER_BASE`
    (see :mod:`abi.register_file`; PARAMS: :data:`TX_PARAMS`). The engine's
    own addresses are the receive engine's configuration words (one MAC, IP and UDP port per RNIC). With
    ``transport`` (an RNIC built with the transport unit) the ``tx_transport`` row follows the others."""
    return RegisterMap(
        config=[],
        # sacks_sent: the receive engine's SACKs the engine has taken for sending (each one frame).
        # request_frames: the frames of the host's requests the engine has put out on m_axis (its frames out
        # less the SACKs taken in, so never ahead of them): a host paces its own frames by it, one read.
        # With ``transport``: messages_started, the requests (work, Read Response, control) the engine has
        # started, in the order it starts them (control, then Read Responses, then work, RFC 5040 5.5), so a
        # host pushing one request a message learns which of its requests still wait unstarted; and each
        # row's cumulative_tsn_ack_<row>, the last TSN its transport unit retired (RFC 4960 6.2.1 D).
        counters=["sacks_sent", "request_frames",
                  *(["messages_started", *(f"cumulative_tsn_ack_{row}" for row in range(associations))]
                    if transport else [])],
        tables=[
            ("tx_association", tx_association_write_layout()),
            ("tx_stream", tx_stream_write_layout(associations * stream_ids)),
            *([("tx_transport", transport_write_layout())] if transport else []),
        ],
    )




#: The transmit engine's PARAMS register (:data:`TX_REGISTER_BASE` + ``0x004``): the datapath width W, the
#: Read Requests it holds per stream row (IRD, RFC 6581), the TSNs of each row's retransmission ring (a power
#: of two) and whether the engine has the transport unit (``tx_register_map(..., transport=True)``).
TX_PARAMS = Struct({
    "width_bytes": 8,
    "ird": 8,
    "ring_tsns": 15,
    "transport": 1,
})
