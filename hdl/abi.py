"""Sideband layouts passed between the blocks of the receive engine.

The receive path (DESIGN.md) moves bytes as packet streams
(:mod:`hdl.stream.packet`) and, beside each packet stream, a metadata stream that
carries one transfer per packet, in the same order as the packets:

    FrameReceiver --pkt/pkt_meta--> ChunkParser --seg/seg_meta-->
    DdpHeaderValidator --payload/segment--> PlacementCheck --cmd/payload-->
    DmaWriter

Field widths follow the wire: TSN 32 bits (RFC 4960 3.3.1), stream id and
DDP-SSN 16 bits (RFC 5043 5.2.1), STag 32 and TO 64 bits (RFC 5041 4.2), QN,
MSN and MO 32 bits (RFC 5041 4.3). Error numbers are (layer, type, code) as in
an RDMAP Terminate (RFC 5040 7.2, RFC 5041 7.2), see :data:`ERROR_NUMBER`.
"""

from enum import IntEnum

from amaranth.hdl import unsigned
from amaranth.lib import data

__all__ = [
    "ERROR_NUMBER", "packet_meta_layout", "segment_meta_layout", "segment_info_layout",
    "dma_command_layout", "report_layout", "segment_report_fields", "exception_record_layout", "ReportKind", "ExceptionSource",
    "ASSOCIATION_BITS", "STREAM_BITS",
]

#: Association index width: up to 2**ASSOCIATION_BITS associations in the table.
ASSOCIATION_BITS = 4
#: SCTP stream identifier width (RFC 4960 3.3.1).
STREAM_BITS = 16

#: An error number: layer (0 RDMAP, 1 DDP, 2 LLP), error type, error code.
#: ``valid`` = 0 means no error.
ERROR_NUMBER = data.StructLayout({
    "valid": unsigned(1),
    "layer": unsigned(4),
    "etype": unsigned(4),
    "code": unsigned(8),
})


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


def segment_info_layout() -> data.StructLayout:
    """One per DDP segment leaving the DdpHeaderValidator: decoded headers and verdict so far."""
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
        "error": ERROR_NUMBER,
    })


def dma_command_layout(address_bits: int = 64) -> data.StructLayout:
    """One write command for the DmaWriter: ``length`` payload bytes to ``address``."""
    return data.StructLayout({
        "address": unsigned(address_bits),
        "length": unsigned(16),
        "tag": unsigned(16),
    })


class ReportKind(IntEnum):
    """``report.kind``."""
    SEGMENT = 0      #: one DDP segment's verdict (after its payload is in host memory)
    CHUNK_ERROR = 1  #: a chunk that was neither placed nor passed to the host


def report_layout(address_bits: int = 64) -> data.StructLayout:
    """One record of the engine's report stream (the completion engine's output).

    A SEGMENT record is emitted in segment order, after every byte of an
    accepted segment's payload was written and acknowledged on the bus
    (``dma_error`` = a write response was not OKAY): the host learns what was
    placed where (RFC 5041 5.3: placement may precede delivery; the host
    delivers messages in DDP-SSN order using ``tsn``/``ddp_ssn``), which
    untagged message completed (``last``, ``qn``/``msn``, ``message_length``,
    RFC 5041 5.4) and every error with its RFC 5041 7.2 / RFC 5040 number.
    A CHUNK_ERROR record carries ``chunk_error`` and the chunk's TSN.
    """
    return data.StructLayout({
        "kind": unsigned(1),
        "status": unsigned(2),          # hdl.rx.placement_check.Status
        "chunk_error": unsigned(3),     # hdl.rx.chunk_parser.ChunkError
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
        "qn": unsigned(32),
        "msn": unsigned(32),
        "mo": unsigned(32),
        "invalidate_stag": unsigned(32),
        "payload_length": unsigned(16),
        "host_address": unsigned(address_bits),  # where the payload went (ACCEPTED, length > 0)
        "message_length": unsigned(33),          # untagged, L = 1: MO + payload length (RFC 5041 5.4)
    }


class ExceptionSource(IntEnum):
    """``exception_record.source``: what the exception stream's packet is."""
    FRAME = 0  #: a whole Ethernet frame (reason: hdl.rx.eth_ipv4_parser.ExceptionReason)
    CHUNK = 1  #: one SCTP chunk of a checked packet (reason: hdl.rx.chunk_parser.ExceptionReason)


def exception_record_layout() -> data.StructLayout:
    """``tuser`` of every beat of a packet on the exception stream."""
    return data.StructLayout({
        "source": unsigned(1),
        "reason": unsigned(4),
        "association": unsigned(ASSOCIATION_BITS),
        "length": unsigned(16),
    })
