"""The control link's wire format, shared by the gateware (:mod:`hdl.link.link`) and the host (``driver/link.py``).

Plain Python (no Amaranth), so the host driver imports it without the HDL.

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

A request is executed once: the board keeps the ``seq`` and ``op`` of the
last request it executed, and a request with both equal is a retry. A retried
write (register, memory, raw frame) is acknowledged again without being
redone; a retried pop answers the record popped the first time; reads are
executed again (they change nothing).
"""

from enum import IntEnum

__all__ = ["END", "ESC", "ESC_END", "ESC_ESC", "Op", "Status", "REQUEST_HEADER_BYTES", "RESPONSE_HEADER_BYTES",
           "CRC_BYTES", "REQUEST_DATA_BYTES", "LINK_MAGIC", "LINK_VERSION", "PING_BODY_BYTES",
           "EXCEPTION_HEADER_BYTES", "MAX_READ_BYTES", "REPLAYED_OPS", "RESPONSE_FLAG"]

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
LINK_VERSION = 1
PING_BODY_BYTES = 8

#: A popped exception's body starts with 8 bytes: the record (``tuser``, ``hdl.abi.exception_record_layout``,
#: u32le), the bytes of the packet kept (u16le), a flags byte (bit 0: the packet was longer than the board's
#: buffer and was cut), a zero byte; the packet's bytes follow.
EXCEPTION_HEADER_BYTES = 8


class Op(IntEnum):
    """``op`` of a request; fields not named are zero."""
    PING = 0x00           #: body: PING_BODY_BYTES
    REG_READ = 0x01       #: address: register offset; body: the word (u32le); status BUS_ERROR if RRESP not OKAY
    REG_WRITE = 0x02      #: address: register offset, data: the word (u32le)
    MEM_READ = 0x03       #: address, length: host-memory bytes; body: those bytes
    MEM_WRITE = 0x04      #: address: host-memory address, data: the bytes
    POP_REPORT = 0x05     #: body: one report record (``hdl.abi.report_bytes()`` bytes), or status EMPTY
    POP_ACK = 0x06        #: body: one ack record (``hdl.abi.ack_bytes()`` bytes), or status EMPTY
    POP_EXCEPTION = 0x07  #: body: EXCEPTION_HEADER_BYTES then the packet, or status EMPTY
    SEND_FRAME = 0x08     #: data: an Ethernet frame without FCS, to the MAC's transmit side
    MAC_COUNTERS = 0x09   #: body: the MAC's counters, u32le each, in ``hdl.mac.mac`` RX_EVENTS + TX_EVENTS order


class Status(IntEnum):
    OK = 0
    EMPTY = 1         #: a pop found no record waiting
    BAD_REQUEST = 2   #: unknown op, or a length that does not fit the op
    BAD_ADDRESS = 3   #: a host-memory range outside the board's memory
    BUS_ERROR = 4     #: the AXI4-Lite response was not OKAY


#: Ops whose retry is answered from what the first execution left, not executed again.
REPLAYED_OPS = frozenset({Op.REG_WRITE, Op.MEM_WRITE, Op.SEND_FRAME, Op.POP_REPORT, Op.POP_ACK, Op.POP_EXCEPTION})
