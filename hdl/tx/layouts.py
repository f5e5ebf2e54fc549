"""Records passed between the blocks of the transmit path (internal, not ABI).

::

    message --> Segmenter --segment--> RetransmitRing --segment--> HeaderBuilder --headers--> Prepend (x2)
                                                     └---fetch---> PayloadFetcher --payload--> Prepend (SCTP)

Field widths follow the wire: TSN 32 bits (RFC 4960 3.3.1), stream id and
DDP-SSN 16 bits (RFC 5043 5.2.1), STag 32 and TO 64 bits (RFC 5041 4.2), MSN
and MO 32 bits (RFC 5041 4.3); a segment's payload is below 2**16 (MULPDU).
"""

from amaranth.hdl import Cat, unsigned
from amaranth.lib import data

from abi.rx import ADDRESS_BITS, ASSOCIATION_BITS, STREAM_BITS
from abi.tx import work_request_layout
from hdl.layout import struct_layout
from hdl.stream.bits import index_bits

__all__ = ["message_layout", "segment_layout", "fetch_layout", "stream_row", "SEGMENT_PAYLOAD_BITS"]

#: Bits of a segment's payload length (a MULPDU is 16 bits).
SEGMENT_PAYLOAD_BITS = 16


def message_layout(address_bits: int = ADDRESS_BITS) -> data.StructLayout:
    """The segmenter's next message: a work request's fields, its ``opcode`` a
    :class:`~abi.tx.WorkOpcode`, :data:`~abi.tx.READ_RESPONSE_OPCODE` or a
    :class:`~abi.tx.ControlOpcode`, and the verification tag of a control packet."""
    return data.StructLayout({**dict(struct_layout(work_request_layout(address_bits)).members), "tag": unsigned(32)})


def segment_layout(address_bits: int = ADDRESS_BITS) -> data.StructLayout:
    """One DDP segment (or control packet) to send, numbered: everything its headers say besides the
    association's constants, where its payload is, and whose it is: all it takes to send it again."""
    return data.StructLayout({
        "wr_id": unsigned(32),                 # the work or control request's (its completion)
        "address": unsigned(address_bits),     # the payload's host address
        "fetch": unsigned(1),                  # payload_length != 0: the payload is read from memory
        "numbered": unsigned(1),               # takes a TSN: recorded in the retransmission ring
        "association": unsigned(ASSOCIATION_BITS),
        "stream_id": unsigned(STREAM_BITS),
        "tsn": unsigned(32),
        "ddp_ssn": unsigned(16),
        "opcode": unsigned(4),                 # a WorkOpcode, READ_RESPONSE_OPCODE or ControlOpcode
        "last": unsigned(1),                   # DDP L (RFC 5041 4.1)
        "stag": unsigned(32),                  # tagged STag; Read Request: Data Source STag
        "to": unsigned(64),                    # tagged TO of this segment; Read Request: Data Source TO
        "msn": unsigned(32),                   # untagged (RFC 5041 4.3)
        "mo": unsigned(32),
        "invalidate_stag": unsigned(32),       # 0 unless a Send with Invalidate (RFC 5040 4.1)
        "sink_stag": unsigned(32),             # Read Request (RFC 5040 4.4)
        "sink_to": unsigned(64),
        "size": unsigned(32),                  # Read Request: RDMA Read Message Size
        "tag": unsigned(32),                   # ControlOpcode.PACKET: the verification tag to send
        "sack": unsigned(1),                   # the engine's SACK (a PACKET): its chunk from the SACK sender
        "payload_length": unsigned(SEGMENT_PAYLOAD_BITS),
    })


def fetch_layout(address_bits: int = 64) -> data.StructLayout:
    """One segment's payload to read from host memory (length at least 1), or with ``local`` the next
    SACK chunk of the SACK sender."""
    return data.StructLayout({
        "address": unsigned(address_bits),
        "length": unsigned(SEGMENT_PAYLOAD_BITS),
        "local": unsigned(1),
    })


def stream_row(association, stream_id, associations: int, stream_ids: int):
    """The stream row ``association * stream_ids + stream_id`` of a record's fields: the low bits of
    each side by side (``stream_ids`` a power of two)."""
    row = association[:index_bits(associations)]
    return Cat(stream_id[:index_bits(stream_ids)], row) if stream_ids > 1 else row
