"""The engine ABI (`abi`) in the host's terms: records as bytes and fields, host commands as table rows.

One definition for every host of the RNIC core: the driver's `board`
backend, which moves these bytes over the control link (`driver.link`),
and the testbenches, which move them over AXI4-Lite and AXI4-Stream
(`sim.tb`).

* `record_fields` / `record_bytes`: an `abi.layout.Struct` record as a dict
  of its fields and back, bit 0 in byte 0 (an AXI4-Stream beat, a table's
  staging words).
* `segment_verdict`: a SEGMENT report record as the receive engine's model
  gives it (`model.engine.rx.SegmentVerdict`).
* `receive_row_writes`: a host's command to the receive engine
  (`model.rnic.offload`: association, region, stream row, buffer post,
  queue revoke) as the table writes that carry it (`abi.rx.register_map`).
* `tx_association_fields` and the request fields: the transmit engine's rows
  and records (`abi.tx.tx_register_map`, `work_request_layout`...);
  `peer_sack_fields` and `peer_shutdown_fields` the host's records for the
  transport unit (`abi.tx.peer_sack_layout`), `transport_stopped` the unit's
  stop record as the model gives it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict

from abi.layout import Struct
from abi.rx import STAG_KEY_BITS, SegmentStatus
from model.ddp.memory import Access
from model.engine.rx import SegmentVerdict
from abi.tx import TransportOpcode
from model.engine.transport import AssociationFailure, ProtocolViolation
from model.engine.tx import (ControlRequest, ReadResponseRequest, TransportStopped, TsnOpcode, TxAssociationRow,
                             WorkRequest)
from model.sctp.packet import SackChunk
from model.errors import ErrorNumber
from model.rnic.offload import (AssociationRow, BufferPost, EngineCommand, QueueRevoke, RegionRow, SackFlush, SackRow,
                                StreamRow)

__all__ = ["record_fields", "record_bytes", "segment_verdict", "receive_row_writes", "tx_association_fields",
           "work_request_fields", "read_response_fields", "control_request_fields", "tsn_request_fields",
           "PEER_SACK_GAP_BLOCKS", "peer_sack_fields", "peer_shutdown_fields", "transport_stopped"]

PEER_SACK_GAP_BLOCKS = 4
"""The Gap Ack Blocks a peer SACK record carries (`abi.tx.peer_sack_layout`'s default)."""


def record_fields(layout: Struct, value: int) -> dict:
    """The fields of a record's value as a dict (nested records as dicts)."""
    return layout.unpack(value)


def record_bytes(layout: Struct, fields: dict) -> bytes:
    """One record of ``layout`` as the bytes of its AXI4-Stream beat (bit 0 in byte 0)."""
    return layout.to_bytes(fields)


def segment_verdict(f: dict) -> SegmentVerdict:
    """A SEGMENT report record's fields (`abi.rx.report_layout`) as the model's `SegmentVerdict`."""
    status = SegmentStatus(f["status"])
    error = f["error"]
    accepted = status is SegmentStatus.ACCEPTED
    return SegmentVerdict(
        association=f["association"], stream_id=f["stream_id"], tsn=f["tsn"], ddp_ssn=f["ddp_ssn"], status=status,
        error=ErrorNumber(error["layer"], error["etype"], error["code"]) if error["valid"] else None,
        tagged=bool(f["tagged"]), last=bool(f["last"]), opcode=f["opcode"], payload_length=f["payload_length"],
        host_address=f["host_address"] if accepted and f["payload_length"] else None,
        message_length=f["message_length"] if accepted and f["last"] and not f["tagged"] else None,
        stag=f["stag"], to=f["to"], qn=f["qn"], msn=f["msn"], mo=f["mo"], invalidate_stag=f["invalidate_stag"],
        dma_error=bool(f["dma_error"]))


def receive_row_writes(command: EngineCommand, stream_ids: int,
                       key_bits: int = STAG_KEY_BITS) -> list[tuple[str, dict]]:
    """The receive engine's table writes (table name, fields) for a host command; a stream's row is
    ``association * stream_ids + stream_id``; a region row keeps the STag's low ``key_bits``, its key (the
    engine's build parameter, `abi.rx.check_key_bits`). A stream row written valid clears its error bit and
    starts its DDP-SSN window at ``first_ssn``; a queue revoke takes back every buffer (its next post takes MSN 1)."""
    if isinstance(command, AssociationRow):
        entry = command.entry
        return [("association", {
            "index": entry.index, "valid": int(command.valid), "ddp": int(entry.ddp),
            "local_port": entry.local_port, "peer_port": entry.peer_port,
            "peer_ip": int(ipaddress.IPv4Address(entry.peer_ip)), "tag": entry.tag})]
    if isinstance(command, RegionRow):
        region = command.entry
        if region is None:
            return [("region", {"index": command.index, "entry": {"valid": 0}})]
        bound = region.stream or (0, 0)
        return [("region", {"index": command.index, "entry": {
            "valid": 1, "key": region.stag & ((1 << key_bits) - 1), "pd": region.pd,
            "stream_bound": int(region.stream is not None),
            "association": bound[0], "stream_id": bound[1],
            "remote_read": int(Access.REMOTE_READ in region.access),
            "remote_write": int(Access.REMOTE_WRITE in region.access),
            "local_write": int(Access.LOCAL_WRITE in region.access),
            "base_to": region.base_to, "length": region.length, "host_address": region.host_address}})]
    if isinstance(command, StreamRow):
        entry = command.entry
        row = entry.association * stream_ids + entry.stream_id
        if not command.valid:
            return [("stream", {"index": row, "entry": {"valid": 0}})]
        return [("stream", {"index": row, "entry": {"valid": 1, "pd": entry.pd}, "first_ssn": entry.first_ssn})]
    if isinstance(command, BufferPost):
        entry = command.entry
        return [("buffer", {"stream": entry.association * stream_ids + entry.stream_id, "qn": entry.qn,
                            "address": entry.host_address, "length": entry.length})]
    if isinstance(command, QueueRevoke):
        return [("revoke", {"stream": command.association * stream_ids + command.stream_id, "qn": command.qn,
                            "msn": 0, "whole_queue": 1})]
    if isinstance(command, SackRow):
        return [("sack", {"association": command.association, "cumulative_tsn": command.cumulative_tsn,
                          "delay": command.delay_ticks, "window": command.window,
                          "held_bytes": command.held_bytes, "enabled": int(command.enabled),
                          "peer_sacks": int(command.peer_sacks)})]
    if isinstance(command, SackFlush):
        return [("sack", {"association": command.association, "flush": 1})]
    raise TypeError(f"{type(command).__name__} is not a table write")


def tx_association_fields(row: TxAssociationRow) -> dict:
    """The ``tx_association`` table row's fields (``abi.tx.tx_association_write_layout``) for ``row``."""
    return {"index": row.index, "peer_mac": int.from_bytes(row.peer_mac, "big"),
            "peer_ip": int(ipaddress.IPv4Address(row.peer_ip)), "local_port": row.local_port,
            "peer_port": row.peer_port, "tag": row.tag, "udp": int(row.udp),
            "peer_udp_port": row.peer_udp_port, "mulpdu": row.mulpdu, "next_tsn": row.next_tsn}


def work_request_fields(request: WorkRequest) -> dict:
    """The ``s_axis_wr`` record's fields (``abi.tx.work_request_layout``) for ``request``."""
    return {**asdict(request), "opcode": int(request.opcode)}


def read_response_fields(request: ReadResponseRequest) -> dict:
    """The ``s_axis_rr`` record's fields (``abi.tx.read_response_layout``)."""
    return asdict(request)


def control_request_fields(request: ControlRequest) -> dict:
    """The ``s_axis_ctl`` record's fields (``abi.tx.control_request_layout``)."""
    return {**asdict(request), "opcode": int(request.opcode)}


def tsn_request_fields(opcode: TsnOpcode, association: int, tsn: int) -> dict:
    """The ``s_axis_tsn`` record's fields (``abi.tx.tsn_request_layout``)."""
    return {"opcode": int(opcode), "association": association, "tsn": tsn}


def peer_sack_fields(association: int, sack: SackChunk) -> dict:
    """A peer's SACK chunk (RFC 4960 3.3.4) as an ``s_axis_peer_sack`` record's fields (``abi.tx.peer_sack_layout``):
    its first `PEER_SACK_GAP_BLOCKS` Gap Ack Blocks, the count of all, the count of its Duplicate TSNs."""
    blocks = list(sack.gap_blocks[:PEER_SACK_GAP_BLOCKS])
    return {"association": association, "shutdown": 0, "cumulative_tsn_ack": sack.cumulative_tsn_ack,
            "a_rwnd": sack.a_rwnd, "gap_count": len(sack.gap_blocks),
            "gaps": [{"start": start, "end": end} for start, end in blocks]
            + [{"start": 0, "end": 0}] * (PEER_SACK_GAP_BLOCKS - len(blocks)),
            "duplicate_count": len(sack.duplicate_tsns)}


def peer_shutdown_fields(association: int, cumulative_tsn_ack: int) -> dict:
    """A SHUTDOWN's Cumulative TSN Ack (RFC 4960 9.2) as an ``s_axis_peer_sack`` record's fields."""
    return {"association": association, "shutdown": 1, "cumulative_tsn_ack": cumulative_tsn_ack, "a_rwnd": 0,
            "gap_count": 0, "gaps": [{"start": 0, "end": 0}] * PEER_SACK_GAP_BLOCKS, "duplicate_count": 0}


def transport_stopped(f: dict) -> TransportStopped:
    """An ``m_axis_transport_stopped`` record's fields (``abi.tx.transport_record_layout``) as the model's event:
    FAILURE (RFC 4960 8.1: ``first_tsn`` the Cumulative TSN Ack, ``tsn`` the highest TSN sent) or VIOLATION."""
    if f["opcode"] == TransportOpcode.FAILURE:
        return TransportStopped(AssociationFailure(f["association"], f["error_count"], f["first_tsn"], f["tsn"]))
    if f["opcode"] == TransportOpcode.VIOLATION:
        return TransportStopped(ProtocolViolation(f["association"], f["first_tsn"], f["tsn"]))
    raise ValueError(f"a transport record of opcode {f['opcode']} does not stop a row")
