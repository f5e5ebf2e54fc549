"""Sideband layouts passed between the blocks of the receive path (internal, not ABI).

The receive path moves bytes as packet streams (:mod:`hdl.stream.packet`)
and, beside each packet stream, a metadata stream that carries one transfer
per packet, in the same order as the packets:

    FrameReceiver --pkt/pkt_meta--> ChunkParser --seg/seg_meta-->
    DdpHeaderValidator --payload/segment--> PlacementCheck --cmd/payload-->
    DmaWriter

Field widths follow the wire: TSN 32 bits (RFC 4960 3.3.1), stream id and
DDP-SSN 16 bits (RFC 5043 5.2.1), STag 32 and TO 64 bits (RFC 5041 4.2), QN,
MSN and MO 32 bits (RFC 5041 4.3).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

from abi.rx import ASSOCIATION_BITS, ERROR_NUMBER, STREAM_BITS, report_layout
from hdl.layout import struct_layout

__all__ = ["packet_meta_layout", "segment_meta_layout", "segment_info_layout", "dma_command_layout",
           "sequence_flags_layout", "ordered_record_layout"]


def packet_meta_layout() -> data.StructLayout:
    """One per SCTP packet leaving the FrameReceiver (CRC32c already passed)."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "ddp": unsigned(1),        # the association negotiated DDP (RFC 5043 11.1)
        "length": unsigned(16),    # SCTP packet bytes (common header included)
        "peer_ip": unsigned(32),
        "udp": unsigned(1),        # arrived over UDP (RFC 6951)
    })


def segment_meta_layout() -> data.StructLayout:
    """One per DDP Segment Chunk leaving the ChunkParser (RFC 5043 5.2.2)."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "tsn": unsigned(32),
        "stream_id": unsigned(STREAM_BITS),
        "ddp_ssn": unsigned(16),
        "length": unsigned(16),    # DDP segment bytes: DDP header + payload (chunk length - 18)
    })


def segment_info_layout(read_requests: bool = False) -> data.StructLayout:
    """One per DDP segment leaving the DdpHeaderValidator: decoded headers and verdict so far.

    With ``read_requests`` (the engine's read responder) also the RDMA Read Request's Data Source
    (RFC 5040 4.4) and whether the segment is one (untagged, QN 1, opcode 1); its SinkSTag and SinkTO
    are then in ``stag`` and ``to``."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "tsn": unsigned(32),
        "stream_id": unsigned(STREAM_BITS),
        "ddp_ssn": unsigned(16),
        # RFC 5041 4.1 control field
        "tagged": unsigned(1),
        "last": unsigned(1),
        "dv": unsigned(2),
        # RFC 5040 4.1 RDMAP control field
        "rv": unsigned(2),
        "opcode": unsigned(4),
        # RFC 5041 4.2 tagged header
        "stag": unsigned(32),
        "to": unsigned(64),
        # RFC 5041 4.3 untagged header; RFC 5040 4.1 Invalidate STag
        "qn": unsigned(32),
        "msn": unsigned(32),
        "mo": unsigned(32),
        "invalidate_stag": unsigned(32),
        "payload_length": unsigned(16),
        # header-level error found so far (DV, QN, RV, opcode, truncation)
        "error": struct_layout(ERROR_NUMBER),
        **({"read_request": unsigned(1),        # RFC 5040 4.4, the responder's: untagged, QN 1, opcode 1
            "source_stag": unsigned(32), "source_to": unsigned(64), "read_size": unsigned(32)}
           if read_requests else {}),
    })


def dma_command_layout(address_bits: int = 64) -> data.StructLayout:
    """One write command for the DmaWriter: ``length`` payload bytes to ``address``."""
    return data.StructLayout({
        "address": unsigned(address_bits),
        "length": unsigned(16),
        "tag": unsigned(16),
    })


def sequence_flags_layout() -> data.StructLayout:
    """Where a segment's DDP-SSN stood when the placement check decided it (RFC 5043 6.1)."""
    return data.StructLayout({
        "in_order": unsigned(1),   # it was the stream's lowest DDP-SSN not yet received
        "releases": unsigned(1),   # in order, and the DDP-SSN after it was already received
    })


def ordered_record_layout(address_bits: int = 64) -> data.StructLayout:
    """A report record with its segment's sequence flags, from the report engine to the delivery order."""
    return data.StructLayout({"record": struct_layout(report_layout(address_bits)),
                              "sequence": sequence_flags_layout()})
