"""The board's control link (:mod:`hdl.link.link` on the board, :mod:`driver.link` on the host): framing,
requests, responses and the records they carry.

Framing is SLIP (RFC 1055): each frame is sent as ``END``, its bytes with
``END`` and ``ESC`` escaped, ``END``. The leading ``END`` ends any line noise
before the frame. Each frame ends with the CRC-32 of the bytes before it
(the Ethernet FCS polynomial, as ``zlib.crc32``), least significant byte first.

Request (host to board), :data:`REQUEST_HEADER_BYTES` bytes of header, then data::

    seq:u8  op:u8  address:u32le  length:u16le  data[...]  crc32:u32le

Response (board to host)::

    seq:u8  op|0x80:u8  status:u8  body[...]  crc32:u32le

The response's op has :data:`RESPONSE_FLAG` set, so a line that echoes the
host's bytes back is never taken for the board.

The body of a POP_REPORT, POP_ACK, POP_RECORD or POLL response (:data:`ZERO_RUN_RESPONSES`) and the
data of a PUSH_RECORD request go zero-run coded (:func:`zero_run_encode`, link version 7): a 0x00 byte
and a count byte ``n`` (1..255) stand for ``n`` zero bytes, every other byte is itself. The CRC and SLIP
apply to the bytes as sent, coded. A pop's ``length`` counts the body's bytes decoded, and a PUSH_RECORD
whose data does not decode to exactly one record of its stream is refused (BAD_REQUEST).

A request is executed once: the board keeps the ``seq`` and ``op`` of the
last request it executed, and a request with both equal is a retry. A retried
write (register, memory, raw frame) is acknowledged again without being
redone; a retried pop answers the records popped the first time; reads are
executed again (they change nothing).
"""

import enum

from abi.tx import (completion_bytes, control_request_bytes, peer_sack_bytes, read_response_bytes,
                    transport_record_bytes, tsn_request_bytes, work_request_bytes)

__all__ = [
    "MAC_RX_EVENTS", "MAC_TX_EVENTS", "END", "ESC", "ESC_END", "ESC_ESC", "Op", "TxInput", "TxOutput",
    "tx_input_bytes", "tx_output_bytes", "Status", "REQUEST_HEADER_BYTES", "RESPONSE_HEADER_BYTES",
    "CRC_BYTES", "REQUEST_DATA_BYTES", "LINK_MAGIC", "LINK_VERSION", "PING_BODY_BYTES",
    "EXCEPTION_HEADER_BYTES", "MAX_READ_BYTES", "REPLAYED_OPS", "RESPONSE_FLAG", "LinkQueue", "POLL_BODY_BYTES",
    "HOLD_BYTES", "pop_body_bytes", "WAIT_READS", "ZERO_RUN_MAX", "ZERO_RUN_RESPONSES", "zero_run_encode",
    "zero_run_decode",
]

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
LINK_VERSION = 7
PING_BODY_BYTES = 8

#: A popped exception's body starts with 8 bytes: the record (``tuser``, :func:`abi.rx.exception_record_layout`,
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
    POP_REPORT = 0x05     #: body: report records (``abi.rx.report_bytes()`` bytes each; see below), or status EMPTY
    POP_ACK = 0x06        #: body: ack records (``abi.rx.ack_bytes()`` bytes each; see below), or status EMPTY
    POP_EXCEPTION = 0x07  #: body: packets, each EXCEPTION_HEADER_BYTES then its bytes (see below), or status EMPTY
    SEND_FRAME = 0x08     #: data: an Ethernet frame without FCS, to the MAC's transmit side
    MAC_COUNTERS = 0x09   #: body: the MAC's counters, u32le each, in MAC_RX_EVENTS + MAC_TX_EVENTS order
    PUSH_RECORD = 0x0A    #: address: a :class:`TxInput`, data: one record of it (``TX_INPUT_BYTES``), zero-run coded
    POP_RECORD = 0x0B     #: address: a :class:`TxOutput`; body: records of it (``TX_OUTPUT_BYTES``), or EMPTY
    POLL = 0x0C           #: address: a register offset; body: :class:`LinkQueue` flags of the streams holding a
                          #: record (u32le), then the register's word (u32le); status BUS_ERROR as REG_READ.
                          #: With a ``length`` that holds those 8 bytes and a report, the reports waiting
                          #: follow, popped as POP_REPORT pops them within ``length`` bytes (the flags are
                          #: those before the pop): one request where a POLL and a POP_REPORT were two
    REG_WRITE_WAIT = 0x0D  #: as REG_WRITE, then the register read back until it reads 0, at most WAIT_READS
                           #: times: OK when it did, PENDING when not (the write was made either way). A table's
                           #: COMMIT written so reads 0 once the table took the row: one request where a
                           #: REG_WRITE and a REG_READ were two

    # POP_REPORT, POP_ACK and POP_RECORD take as many records as wait, one at least, while the body stays
    # within ``length`` bytes and the board's hold RAM: each record padded with zeros to a multiple of 8
    # bytes but the last (`pop_body_bytes`), so a ``length`` of 0 takes one record. One request then
    # costs a header and a CRC for every record waiting, not for each. POP_EXCEPTION takes the first packet
    # whatever its length (cut at the hold RAM's end, and flagged so), then the next while one waits and
    # fits whole, by the length in its record, in ``length`` bytes and the hold RAM: each packet's header
    # and bytes padded with zeros to a multiple of 8 bytes but the last. ``length`` and the hold RAM count
    # the body's bytes before the zero-run coding (ZERO_RUN_RESPONSES) that goes on the wire.


class LinkQueue(enum.IntFlag):
    """POLL's flags: the board's record streams that hold a record (one request to learn what to pop)."""
    REPORT = 1 << 0
    ACK = 1 << 1
    EXCEPTION = 1 << 2
    COMPLETION = 1 << 3              #: TxOutput.COMPLETION
    TSN_REFUSED = 1 << 4             #: TxOutput.TSN_REFUSED
    READ_RESPONSE_REFUSED = 1 << 5   #: TxOutput.READ_RESPONSE_REFUSED
    TRANSPORT_STOPPED = 1 << 6       #: TxOutput.TRANSPORT_STOPPED


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
    #: ``s_axis_peer_sack`` (an RNIC with the transport unit): a :func:`peer_sack_layout` record, the host's
    #: (a SHUTDOWN's Cumulative TSN Ack, RFC 4960 9.2, or a SACK the host took before the SACK row said
    #: ``peer_sacks``); without the unit the stream never has room (FULL)
    PEER_SACK = 4


class TxOutput(enum.IntEnum):
    """POP_RECORD's ``address``: the transmit engine's record stream a record is taken from."""
    COMPLETION = 0            #: ``m_axis_completion``, a :func:`completion_layout` record
    TSN_REFUSED = 1           #: ``m_axis_tsn_refused``, a :func:`tsn_request_layout` record
    READ_RESPONSE_REFUSED = 2  #: ``m_axis_rr_refused``, a :func:`read_response_layout` record
    #: ``m_axis_transport_stopped`` (an RNIC with the transport unit): a :func:`transport_record_layout` record,
    #: FAILURE (RFC 4960 8.1) or VIOLATION; without the unit the stream is always empty
    TRANSPORT_STOPPED = 3


class Status(enum.IntEnum):
    OK = 0
    EMPTY = 1         #: a pop found no record waiting
    BAD_REQUEST = 2   #: unknown op, or a length that does not fit the op
    BAD_ADDRESS = 3   #: a host-memory range outside the board's memory
    BUS_ERROR = 4     #: the AXI4-Lite response was not OKAY
    FULL = 5          #: a push found the transmit engine's stream without room; nothing was pushed
    PENDING = 6       #: REG_WRITE_WAIT wrote its word, and the register did not read 0 within WAIT_READS reads


#: REG_WRITE_WAIT's most reads of its register after the write (some 4 clocks each on the board: a table's
#: row is taken within a few clocks unless its engine holds it, as a receive queue with no free slot does).
WAIT_READS = 64

#: Ops whose response body goes zero-run coded (`zero_run_encode`); PUSH_RECORD's request data goes so too.
ZERO_RUN_RESPONSES = frozenset({Op.POP_REPORT, Op.POP_ACK, Op.POP_RECORD, Op.POLL})
#: The longest run of zero bytes one 0x00 and its count stand for.
ZERO_RUN_MAX = 255


def zero_run_encode(data: bytes) -> bytes:
    """The zero-run coding of ``data`` (link version 7): each run of zero bytes becomes 0x00 and the run's
    length, a byte (1..ZERO_RUN_MAX; a longer run takes several pairs, the full ones first); every other byte is
    itself. Records are mostly zeros (unused address bits, STags and offsets of Sends, padding between records)."""
    coded = bytearray()
    zeros = 0
    for byte in data:
        if byte == 0:
            zeros += 1
            if zeros == ZERO_RUN_MAX:
                coded += bytes([0, ZERO_RUN_MAX])
                zeros = 0
            continue
        if zeros:
            coded += bytes([0, zeros])
            zeros = 0
        coded.append(byte)
    if zeros:
        coded += bytes([0, zeros])
    return bytes(coded)


def zero_run_decode(coded: bytes) -> bytes:
    """The bytes ``coded`` stands for (`zero_run_encode`); ValueError if a 0x00 has no count or a count of 0."""
    data = bytearray()
    position = 0
    while position < len(coded):
        byte = coded[position]
        if byte:
            data.append(byte)
            position += 1
            continue
        if position + 1 == len(coded) or coded[position + 1] == 0:
            raise ValueError(f"a 0x00 at byte {position} of {len(coded)} without a count of 1 to {ZERO_RUN_MAX}")
        data += bytes(coded[position + 1])
        position += 2
    return bytes(data)


#: Ops whose retry is answered from what the first execution left, not executed again.
REPLAYED_OPS = frozenset({Op.REG_WRITE, Op.REG_WRITE_WAIT, Op.MEM_WRITE, Op.SEND_FRAME, Op.POP_REPORT, Op.POP_ACK, Op.POP_EXCEPTION,
                          Op.PUSH_RECORD, Op.POP_RECORD, Op.POLL})


def tx_input_bytes() -> dict[TxInput, int]:
    """The bytes of a record of each :class:`TxInput` (PUSH_RECORD's data length)."""
    return {TxInput.WORK: work_request_bytes(), TxInput.READ_RESPONSE: read_response_bytes(),
            TxInput.CONTROL: control_request_bytes(), TxInput.TSN: tsn_request_bytes(),
            TxInput.PEER_SACK: peer_sack_bytes()}


def tx_output_bytes() -> dict[TxOutput, int]:
    """The bytes of a record of each :class:`TxOutput` (POP_RECORD's body)."""
    return {TxOutput.COMPLETION: completion_bytes(), TxOutput.TSN_REFUSED: tsn_request_bytes(),
            TxOutput.READ_RESPONSE_REFUSED: read_response_bytes(), TxOutput.TRANSPORT_STOPPED: transport_record_bytes()}
