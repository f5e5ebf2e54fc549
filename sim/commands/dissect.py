"""Dissector for DDP over SCTP: a captured frame in, a JSON-ready dict out.

Decodes Ethernet II / IPv4 / optional UDP (RFC 6951) / SCTP (RFC 4960) and,
inside DATA chunks, the DDP-SSN and either a DDP Segment (PPID 16) with its
RDMAP message (RFC 5041 4, RFC 5040 4) or a DDP Stream Session Control
message (PPID 17) with its RFC 6581 9 enhanced data (RFC 5043 5.2).

It never raises on the frame's bytes: every layer that decodes is shown,
and every checksum failure, malformed field or rule broken on the wire is
listed in the frame's `errors` with the model's own message.  The dict uses
the codec classes' attribute names; bytes become hex strings, enums their
names, addresses dotted or colon notation.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from enum import Enum
from typing import Any, Iterator

from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.sctp_adaptation import DdpSegmentChunkData, SessionControl
from model.errors import RnicError
from model.net.frames import (
    ETHERTYPE_IPV4,
    IP_PROTOCOL_SCTP,
    IP_PROTOCOL_UDP,
    EthernetHeader,
    Ipv4Header,
    UdpHeader,
)
from model.net.pcap import LinkType, read_capture
from model.rdmap.messages import Opcode, RDMAP_VERSION, ReadRequest, Terminate, invalidate_stag_of, rdmap_control_of
from model.sctp.packet import (
    PPID_DDP_SEGMENT,
    PPID_DDP_SESSION_CONTROL,
    DataChunk,
    SctpPacket,
    UnknownChunk,
)

Dissection = dict[str, Any]


def to_json(value: Any) -> Any:
    """A codec value as JSON data: dataclasses as dicts of their fields."""
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, ipaddress.IPv4Address):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    if dataclasses.is_dataclass(value):
        fields = {"kind": type(value).__name__}
        for field in dataclasses.fields(value):
            fields[field.name] = to_json(getattr(value, field.name))
        return fields
    return repr(value)


def _mac(address: bytes) -> str:
    return ":".join(f"{byte:02x}" for byte in address)


def dissect_capture(data: bytes) -> Iterator[Dissection]:
    """Dissect every record of a pcap/pcapng file; raises DecodeError where the file is damaged."""
    for record in read_capture(data):
        yield dissect_frame(record.data, record.linktype, record.index, record.timestamp)


def dissect_frame(data: bytes, linktype: int = LinkType.ETHERNET, index: int = 0, time: float = 0.0) -> Dissection:
    """Dissect one captured frame of the given link type."""
    frame: Dissection = {"index": index, "time": time, "length": len(data), "errors": []}
    try:
        _dissect_link(frame, bytes(data), linktype)
    except RnicError as error:
        _error(frame, getattr(error, "layer", "frame"), str(error))
    return frame


def _error(frame: Dissection, layer: str, message: str) -> None:
    frame["errors"].append({"layer": layer, "error": message})


def _dissect_link(frame: Dissection, data: bytes, linktype: int) -> None:
    if linktype == LinkType.ETHERNET:
        eth = EthernetHeader.decode(data)
        frame["eth"] = {"dst": _mac(eth.dst), "src": _mac(eth.src), "ethertype": eth.ethertype}
        if eth.ethertype != ETHERTYPE_IPV4:
            _error(frame, "eth", f"ethertype 0x{eth.ethertype:04x} is not IPv4: not dissected")
            return
        data = data[EthernetHeader.LENGTH :]
    elif linktype not in (LinkType.RAW, LinkType.IPV4):
        _error(frame, "frame", f"link type {linktype} is not Ethernet or raw IPv4: not dissected")
        return
    _dissect_ipv4(frame, data)


def _dissect_ipv4(frame: Dissection, datagram: bytes) -> None:
    ip = Ipv4Header.decode(datagram, verify=False)
    frame["ipv4"] = {
        "src": str(ip.src),
        "dst": str(ip.dst),
        "protocol": ip.protocol,
        "ttl": ip.ttl,
        "total_length": ip.total_length,
        "checksum_ok": ip.checksum_ok,
    }
    if not ip.checksum_ok:
        _error(frame, "ipv4", "header checksum mismatch")
    if ip.is_fragment:
        _error(frame, "ipv4", "fragmented datagram: not reassembled, not dissected")
        return
    payload = datagram[ip.header_length : ip.total_length]
    if ip.protocol == IP_PROTOCOL_UDP:
        udp = UdpHeader.decode(payload, ip.src, ip.dst, verify=False)
        frame["udp"] = {
            "src_port": udp.src_port,
            "dst_port": udp.dst_port,
            "length": udp.length,
            "checksum_ok": udp.checksum_ok,
        }
        if not udp.checksum_ok:
            _error(frame, "udp", "checksum mismatch")
        payload = payload[UdpHeader.LENGTH : udp.length]
    elif ip.protocol != IP_PROTOCOL_SCTP:
        _error(frame, "ipv4", f"protocol {ip.protocol} is neither SCTP nor UDP: not dissected")
        return
    _dissect_sctp(frame, payload)


def _dissect_sctp(frame: Dissection, data: bytes) -> None:
    packet = SctpPacket.decode(data, verify_checksum=False)
    chunks = [_dissect_chunk(frame, chunk) for chunk in packet.chunks]
    frame["sctp"] = {
        "src_port": packet.src_port,
        "dst_port": packet.dst_port,
        "verification_tag": packet.verification_tag,
        "checksum_ok": packet.checksum_ok,
        "chunks": chunks,
    }
    if not packet.checksum_ok:
        _error(frame, "sctp", "CRC32c checksum mismatch (RFC 4960 6.8)")


def _dissect_chunk(frame: Dissection, chunk) -> Dissection:
    fields = to_json(chunk)
    if isinstance(chunk, UnknownChunk):
        fields["type"] = f"UNKNOWN({chunk.chunk_type})"
    else:
        fields["type"] = chunk.chunk_type.name
    del fields["kind"]
    if isinstance(chunk, DataChunk) and chunk.ppid in (PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL):
        del fields["user_data"]
        fields["user_data_length"] = len(chunk.user_data)
        try:
            _dissect_ddp_chunk(frame, chunk, fields)
        except RnicError as error:
            _error(frame, getattr(error, "layer", "ddp"), str(error))
    return fields


def _dissect_ddp_chunk(frame: Dissection, chunk: DataChunk, fields: Dissection) -> None:
    # RFC 5043 10: U=1 on every chunk; RFC 5043 9: no SCTP fragmentation.
    if not chunk.unordered:
        _error(frame, "ddp-sctp", f"TSN {chunk.tsn}: DDP chunk with U=0 (RFC 5043 10 requires U=1)")
    if not (chunk.beginning and chunk.ending):
        _error(frame, "ddp-sctp", f"TSN {chunk.tsn}: fragmented DDP chunk (RFC 5043 9)")
    if chunk.ppid == PPID_DDP_SESSION_CONTROL:
        control = SessionControl.decode(chunk.user_data)
        fields["ddp_ssn"] = control.ddp_ssn
        session: Dissection = {"function": control.function.name}
        enhanced = control.enhanced_data
        if enhanced is not None:
            session["enhanced"] = to_json(enhanced)
            del session["enhanced"]["kind"]
        session["private_data"] = control.ulp_private_data.hex()
        fields["session_control"] = session
        return
    wrapped = DdpSegmentChunkData.decode(chunk.user_data)
    fields["ddp_ssn"] = wrapped.ddp_ssn
    segment = DdpSegment.decode(wrapped.segment)
    header = segment.header
    ddp: Dissection = {"tagged": segment.tagged, "last": header.last, "dv": header.dv}
    if isinstance(header, TaggedHeader):
        ddp.update(stag=header.stag, to=header.to)
    else:
        assert isinstance(header, UntaggedHeader)
        ddp.update(qn=header.qn, msn=header.msn, mo=header.mo)
    ddp["payload_length"] = len(segment.payload)
    fields["ddp"] = ddp
    if not header.version_ok:
        _error(frame, "ddp", f"DDP version {header.dv} is not 1 (RFC 5041 4.1)")
        return
    fields["rdmap"] = _dissect_rdmap(frame, segment)


def _dissect_rdmap(frame: Dissection, segment: DdpSegment) -> Dissection:
    control = rdmap_control_of(segment.header)
    rdmap: Dissection = {"rv": control.rv}
    opcode = control.known_opcode
    rdmap["opcode"] = opcode.name if opcode is not None else control.opcode
    if control.rv != RDMAP_VERSION:
        _error(frame, "rdmap", f"RDMAP version {control.rv} is not 1 (RFC 5040 4.1)")
        return rdmap
    if opcode is None:
        _error(frame, "rdmap", f"undefined RDMAP opcode {control.opcode} (RFC 5040 4.2)")
        return rdmap
    header = segment.header
    if opcode.tagged != segment.tagged:
        model = "tagged" if opcode.tagged else "untagged"
        _error(frame, "rdmap", f"{opcode.name} must use the {model} buffer model (RFC 5040 4.2)")
        return rdmap
    if isinstance(header, UntaggedHeader) and header.qn != opcode.queue_number:
        _error(frame, "rdmap", f"{opcode.name} on QN {header.qn}, expected {opcode.queue_number} (RFC 5040 4.2)")
        return rdmap
    if opcode.carries_invalidate_stag:
        rdmap["invalidate_stag"] = invalidate_stag_of(header)
    if opcode == Opcode.RDMA_READ_REQUEST:
        rdmap["read_request"] = _without_kind(to_json(ReadRequest.decode(segment.payload)))
    elif opcode == Opcode.TERMINATE:
        terminate = Terminate.decode(segment.payload)
        body = _without_kind(to_json(terminate))
        body["layer"], body["etype"], body["code"] = terminate.number
        if terminate.ddp_header is not None:
            body["ddp_header"] = _without_kind(to_json(terminate.ddp_header))
        rdmap["terminate"] = body
    return rdmap


def _without_kind(fields: Dissection) -> Dissection:
    fields.pop("kind", None)
    return fields


def format_frame(frame: Dissection) -> str:
    """One summary line for the frame, then one indented line per chunk, then its errors."""
    head = f"#{frame['index']} {frame['time']:.6f} {frame['length']}B"
    ip = frame.get("ipv4")
    if ip:
        head += f" {ip['src']} > {ip['dst']}"
    udp = frame.get("udp")
    if udp:
        head += f" UDP {udp['src_port']} > {udp['dst_port']}"
    sctp = frame.get("sctp")
    lines = [head]
    if sctp:
        crc = "crc ok" if sctp["checksum_ok"] else "CRC BAD"
        lines[0] += (
            f" SCTP {sctp['src_port']} > {sctp['dst_port']} vtag 0x{sctp['verification_tag']:08x} [{crc}]"
        )
        lines.extend("    " + _format_chunk(chunk) for chunk in sctp["chunks"])
    lines.extend(f"    ! {error['layer']}: {error['error']}" for error in frame["errors"])
    return "\n".join(lines)


_SKIP = {"type", "kind", "ddp", "rdmap", "session_control", "ddp_ssn", "user_data_length"}


def _format_value(key: str, value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and key in {
        "verification_tag", "initiate_tag", "stag", "to", "invalidate_stag", "sink_stag",
        "source_stag", "sink_to", "source_to", "code_point",
    }:
        return f"0x{value:x}"
    if isinstance(value, str) and len(value) > 32:
        return value[:32] + "..."
    if isinstance(value, list):
        return "[" + ", ".join(_format_compact(item) for item in value) + "]"
    return str(value)


def _format_compact(item: Any) -> str:
    if isinstance(item, dict):
        kind = item.get("kind", "")
        rest = " ".join(f"{k}={_format_value(k, v)}" for k, v in item.items() if k != "kind")
        return f"{kind}({rest})" if kind else rest
    return _format_value("", item)


def _format_fields(fields: Dissection) -> str:
    return " ".join(f"{key}={_format_value(key, value)}" for key, value in fields.items() if key not in _SKIP)


def _format_chunk(chunk: Dissection) -> str:
    if "ddp_ssn" not in chunk:
        return f"{chunk['type']} {_format_fields(chunk)}".rstrip()
    flags = "".join(flag for flag, on in (("U", chunk["unordered"]), ("B", chunk["beginning"]), ("E", chunk["ending"])) if on)
    text = f"DATA tsn={chunk['tsn']} sid={chunk['stream_id']} {flags} ppid={chunk['ppid']} | DDP-SSN {chunk['ddp_ssn']}"
    if "session_control" in chunk:
        session = chunk["session_control"]
        text += f" | SESSION {session['function']}"
        if "enhanced" in session:
            text += " " + _format_fields(session["enhanced"])
        text += f" private_data={len(session['private_data']) // 2}B"
        return text
    ddp = chunk.get("ddp")
    if ddp:
        if ddp["tagged"]:
            text += f" | DDP tagged{' L' if ddp['last'] else ''} stag=0x{ddp['stag']:x} to=0x{ddp['to']:x}"
        else:
            text += f" | DDP untagged{' L' if ddp['last'] else ''} qn={ddp['qn']} msn={ddp['msn']} mo={ddp['mo']}"
        text += f" len={ddp['payload_length']}"
    rdmap = chunk.get("rdmap")
    if rdmap:
        text += f" | RDMAP {rdmap['opcode']}"
        if "invalidate_stag" in rdmap:
            text += f" inv_stag=0x{rdmap['invalidate_stag']:x}"
        if "read_request" in rdmap:
            text += " " + _format_fields(rdmap["read_request"])
        if "terminate" in rdmap:
            term = rdmap["terminate"]
            text += f" layer={term['layer']} etype={term['etype']} code=0x{term['code']:02x}"
    return text
