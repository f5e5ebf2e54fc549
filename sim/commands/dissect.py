"""Dissector for DDP over SCTP: a captured frame in, a JSON-ready dict out.

Decodes Ethernet II (with any 802.1Q / 802.1ad VLAN tags) / IPv4 / SCTP,
directly or over UDP (RFC 6951: port 9899, or the ports the caller names,
like tshark's decode-as) and, inside DATA chunks, the DDP-SSN and either a
DDP Segment (PPID 16) with its RDMAP message (RFC 5041 4, RFC 5040 4) or a
DDP Stream Session Control message (PPID 17) with its RFC 6581 9 enhanced
data (RFC 5043 5.2).

It never raises on the frame's bytes.  What it claims to dissect is SCTP
(and the IPv4, UDP and Ethernet carrying it): there, every checksum failure,
malformed field or rule broken on the wire is listed in the frame's `errors`
with the model's own message, its layer named once.  Other traffic (ARP,
IPv6, TCP, UDP on other ports) is shown as far as its link and network
headers and marked `not_dissected`, which is not an error (a bad IPv4 header
checksum still is: a damaged header cannot say what it carries).  A frame cut by
the capture's snap length (captured length < original length) is marked
`truncated`; the layers the cut falls in are shown as far as they were
captured, and what could not be checked is said in `not_dissected`, not
called broken.  The dict uses the codec classes' attribute names; bytes
become hex strings, enums their names, addresses dotted or colon notation.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import struct
from enum import Enum
from typing import Any, Iterable, Iterator

from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.sctp_adaptation import DdpSegmentChunkData, SessionControl
from model.errors import DecodeError, RnicError, error_name
from model.net.frames import (
    ETHERTYPE_IPV4,
    IP_PROTOCOL_SCTP,
    IP_PROTOCOL_UDP,
    SCTP_UDP_PORT,
    EthernetHeader,
    Ipv4Header,
    UdpHeader,
)
from model.net.pcap import LinkType, read_capture
from model.rdmap.messages import Opcode, RDMAP_VERSION, ReadRequest, Terminate, invalidate_stag_of, rdmap_control_of
from model.sctp.packet import (
    COMMON_HEADER_LENGTH,
    PPID_DDP_SEGMENT,
    PPID_DDP_SESSION_CONTROL,
    DataChunk,
    SctpPacket,
    UnknownChunk,
    decode_chunks,
)

Dissection = dict[str, Any]

SCTP_UDP_PORTS = frozenset({SCTP_UDP_PORT})
"""The UDP ports decoded as SCTP over UDP when the caller names no others (RFC 6951 5)."""

VLAN_TPIDS = {0x8100: "802.1Q", 0x88A8: "802.1ad", 0x9100: "QinQ (pre-standard)"}
"""Tag protocol identifiers of the VLAN tags decoded between the MACs and the ethertype."""

ETHERTYPE_NAMES = {0x0806: "ARP", 0x8035: "RARP", 0x86DD: "IPv6", 0x88CC: "LLDP", 0x8847: "MPLS", 0x8863: "PPPoE",
                   0x8864: "PPPoE", 0x888E: "EAPOL", 0x88F7: "PTP"}
IP_PROTOCOL_NAMES = {1: "ICMP", 2: "IGMP", 6: "TCP", 47: "GRE", 50: "ESP", 51: "AH", 89: "OSPF", 103: "PIM",
                     112: "VRRP"}

_LAYER_NAMES = {"ethernet": "eth"}
"""The model's layer names as the dissector's JSON keys name them (eth, ipv4, udp, sctp, ddp-sctp, ddp, rdmap)."""


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


def dissect_capture(data: bytes, udp_ports: Iterable[int] = ()) -> Iterator[Dissection]:
    """Dissect every record of a pcap/pcapng file; raises DecodeError where the file is damaged.

    SCTP over UDP is decoded on port 9899 and on every port of `udp_ports`.
    """
    ports = SCTP_UDP_PORTS | frozenset(udp_ports)
    for record in read_capture(data):
        yield dissect_frame(record.data, record.linktype, record.index, record.timestamp,
                            record.original_length, ports)


def dissect_frame(
    data: bytes,
    linktype: int = LinkType.ETHERNET,
    index: int = 0,
    time: float = 0.0,
    original_length: int | None = None,
    udp_ports: frozenset[int] = SCTP_UDP_PORTS,
) -> Dissection:
    """Dissect one captured frame of the given link type.

    `original_length` is the frame's length on the wire (the pcap record's
    original length); when it exceeds len(data) the frame was cut by the
    snap length.  `udp_ports` are the UDP ports that carry SCTP.
    """
    data = bytes(data)
    original = len(data) if original_length is None else max(original_length, len(data))
    frame: Dissection = {
        "index": index,
        "time": time,
        "length": len(data),
        "original_length": original,
        "truncated": len(data) < original,
        "errors": [],
    }
    try:
        _FrameDissector(frame, udp_ports).link(data, linktype)
    except RnicError as error:
        _error_from(frame, error, "frame")
    return frame


def _error(frame: Dissection, layer: str, message: str) -> None:
    frame["errors"].append({"layer": layer, "error": message})


def _error_from(frame: Dissection, error: RnicError, layer: str) -> None:
    """List a model exception under its own layer, the layer's name said once (not "sctp: sctp: ...")."""
    if isinstance(error, DecodeError):
        where = f" at offset {error.offset}" if error.offset is not None else ""
        layer = error.layer.lower()
        _error(frame, _LAYER_NAMES.get(layer, layer), error.message + where)
    else:
        _error(frame, layer, str(error))


class _FrameDissector:
    """Walks one frame down the layers, filling in its dict."""

    def __init__(self, frame: Dissection, udp_ports: frozenset[int]) -> None:
        self.frame = frame
        self.udp_ports = udp_ports
        self.truncated = frame["truncated"]

    def not_dissected(self, reason: str) -> None:
        self.frame["not_dissected"] = reason

    def cut(self, where: str, unchecked: str = "") -> None:
        """The snap length ends the frame inside `where`: say so, blame no layer."""
        frame = self.frame
        text = f"cut by the capture's snap length ({frame['length']} of {frame['original_length']} bytes captured) in the {where}"
        self.not_dissected(text + (f": {unchecked} not checked" if unchecked else ""))

    def link(self, data: bytes, linktype: int) -> None:
        if linktype == LinkType.ETHERNET:
            if self.truncated and len(data) < EthernetHeader.LENGTH:
                return self.cut("Ethernet header")
            eth = EthernetHeader.decode(data)
            ethertype, offset, tags = eth.ethertype, EthernetHeader.LENGTH, []
            while ethertype in VLAN_TPIDS:
                if len(data) - offset < 4:
                    if self.truncated:
                        return self.cut("VLAN tag")
                    raise DecodeError("eth", f"{VLAN_TPIDS[ethertype]} tag needs 4 bytes, only "
                                             f"{len(data) - offset} left", offset - 2)
                tci, inner = struct.unpack_from("!HH", data, offset)
                tags.append({"tpid": ethertype, "pcp": tci >> 13, "dei": bool(tci & 0x1000), "vid": tci & 0xFFF})
                ethertype, offset = inner, offset + 4
            self.frame["eth"] = {"dst": _mac(eth.dst), "src": _mac(eth.src), "ethertype": ethertype, "vlan": tags}
            if ethertype != ETHERTYPE_IPV4:
                name = ETHERTYPE_NAMES.get(ethertype, "not IPv4")
                return self.not_dissected(f"ethertype 0x{ethertype:04x} ({name})")
            data = data[offset:]
        elif linktype in (LinkType.RAW, LinkType.IPV4):
            if linktype == LinkType.RAW and data and data[0] >> 4 == 6:
                return self.not_dissected("IPv6")
        else:
            raise DecodeError("frame", f"link type {linktype} is not Ethernet or raw IPv4: not dissected")
        self.ipv4(data)

    def ipv4(self, datagram: bytes) -> None:
        frame = self.frame
        payload_cut, captured = False, len(datagram)
        if self.truncated:
            header_length = (datagram[0] & 0xF) * 4 if datagram else Ipv4Header.MIN_LENGTH
            if len(datagram) < max(header_length, Ipv4Header.MIN_LENGTH):
                return self.cut("IPv4 header")
            (total,) = struct.unpack_from("!H", datagram, 2)
            if total > len(datagram):
                # The header is whole, its payload cut: decode the header as if the payload were there.
                payload_cut = True
                datagram = datagram + bytes(total - len(datagram))
        ip = Ipv4Header.decode(datagram, verify=False)
        frame["ipv4"] = {
            "src": str(ip.src),
            "dst": str(ip.dst),
            "protocol": ip.protocol,
            "ttl": ip.ttl,
            "total_length": ip.total_length,
            "checksum_ok": ip.checksum_ok,
        }
        payload = datagram[ip.header_length : min(ip.total_length, captured)]
        if not ip.checksum_ok:
            # Whatever the protocol field says: a damaged header cannot tell what it carries.
            _error(frame, "ipv4", "header checksum mismatch")
        if ip.protocol not in (IP_PROTOCOL_SCTP, IP_PROTOCOL_UDP):
            name = IP_PROTOCOL_NAMES.get(ip.protocol, "neither SCTP nor UDP")
            return self.not_dissected(f"IPv4 protocol {ip.protocol} ({name})")
        if ip.protocol == IP_PROTOCOL_UDP and not self.carries_sctp(ip, payload):
            return
        if ip.is_fragment:
            _error(frame, "ipv4", "fragment of an SCTP packet: not reassembled, not dissected")
            return
        if ip.protocol == IP_PROTOCOL_UDP:
            payload = self.udp(ip, payload, payload_cut)
            if payload is None:
                return
        self.sctp(payload, payload_cut)

    def carries_sctp(self, ip: Ipv4Header, payload: bytes) -> bool:
        """Whether a UDP datagram is SCTP over UDP (a port in `udp_ports`); if not, show its ports and stop."""
        if ip.fragment_offset != 0:
            self.not_dissected(f"IPv4 fragment at offset {ip.fragment_offset * 8} of a UDP datagram: not reassembled")
            return False
        if len(payload) < UdpHeader.LENGTH:
            if self.truncated:
                self.cut("UDP header")
                return False
            return True  # a short UDP header on any port: the UDP decoder names the error
        src_port, dst_port, length = struct.unpack_from("!HHH", payload, 0)
        if src_port in self.udp_ports or dst_port in self.udp_ports:
            return True
        self.frame["udp"] = {"src_port": src_port, "dst_port": dst_port, "length": length}
        ports = ", ".join(str(port) for port in sorted(self.udp_ports))
        self.not_dissected(f"UDP {src_port} > {dst_port}: not SCTP over UDP (port {ports}; see --udp-port)")
        return False

    def udp(self, ip: Ipv4Header, payload: bytes, payload_cut: bool) -> bytes | None:
        """The SCTP packet inside a UDP datagram (cut if the frame is), None if the cut leaves none."""
        if payload_cut:
            if len(payload) < UdpHeader.LENGTH:
                self.cut("UDP header")
                return None
            src_port, dst_port, length = struct.unpack_from("!HHH", payload, 0)
            # The checksum covers the whole datagram: it cannot be verified.
            self.frame["udp"] = {"src_port": src_port, "dst_port": dst_port, "length": length, "checksum_ok": None}
            return payload[UdpHeader.LENGTH : length]
        udp = UdpHeader.decode(payload, ip.src, ip.dst, verify=False)
        self.frame["udp"] = {
            "src_port": udp.src_port,
            "dst_port": udp.dst_port,
            "length": udp.length,
            "checksum_ok": udp.checksum_ok,
        }
        if not udp.checksum_ok:
            _error(self.frame, "udp", "checksum mismatch")
        return payload[UdpHeader.LENGTH : udp.length]

    def sctp(self, data: bytes, cut: bool) -> None:
        frame = self.frame
        if not cut:
            packet = SctpPacket.decode(data, verify_checksum=False)
            frame["sctp"] = {
                "src_port": packet.src_port,
                "dst_port": packet.dst_port,
                "verification_tag": packet.verification_tag,
                "checksum_ok": packet.checksum_ok,
                "chunks": [],
            }
            if not packet.checksum_ok:
                _error(frame, "sctp", "CRC32c checksum mismatch (RFC 4960 6.8)")
            frame["sctp"]["chunks"] = [_dissect_chunk(frame, chunk) for chunk in packet.chunks]
            return
        if len(data) < COMMON_HEADER_LENGTH:
            return self.cut("SCTP common header")
        src_port, dst_port, tag = struct.unpack_from("!HHI", data, 0)
        # The CRC32c covers the whole packet (unknown) and the last chunk is cut: show the whole chunks before it.
        frame["sctp"] = {"src_port": src_port, "dst_port": dst_port, "verification_tag": tag,
                         "checksum_ok": None, "chunks": []}
        body, whole = data[COMMON_HEADER_LENGTH:], 0
        while len(body) - whole >= 4:
            (length,) = struct.unpack_from("!H", body, whole + 2)
            if length < 4:
                whole += 4  # a broken chunk header before the cut: the chunk decoder names it
                break
            if whole + length > len(body):
                break
            whole = min(whole + length + (-length % 4), len(body))
        chunks = decode_chunks(body[:whole], COMMON_HEADER_LENGTH)
        frame["sctp"]["chunks"] = [_dissect_chunk(frame, chunk) for chunk in chunks]
        self.cut(f"SCTP packet after {len(chunks)} whole chunk{'' if len(chunks) == 1 else 's'}",
                 "its CRC32c and the chunks past the cut")


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
            _error_from(frame, error, "ddp")
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
    ddp: Dissection = {"tagged": segment.tagged, "last": header.last, "rsvd": header.rsvd, "dv": header.dv}
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
    rdmap: Dissection = {"rv": control.rv, "rsvd": control.rsvd}
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
        body["error_name"] = error_name(*terminate.number)
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
    if frame.get("truncated"):
        head += f" (of {frame['original_length']}B)"
    eth = frame.get("eth")
    if eth and eth.get("vlan"):
        head += " vlan " + "/".join(str(tag["vid"]) for tag in eth["vlan"])
    ip = frame.get("ipv4")
    if ip:
        head += f" {ip['src']} > {ip['dst']}"
    udp = frame.get("udp")
    if udp:
        head += f" UDP {udp['src_port']} > {udp['dst_port']}"
    sctp = frame.get("sctp")
    lines = [head]
    if sctp:
        crc = {True: "crc ok", False: "CRC BAD", None: "crc not checked"}[sctp["checksum_ok"]]
        lines[0] += (
            f" SCTP {sctp['src_port']} > {sctp['dst_port']} vtag 0x{sctp['verification_tag']:08x} [{crc}]"
        )
        lines.extend("    " + _format_chunk(chunk) for chunk in sctp["chunks"])
    if "not_dissected" in frame:
        lines.append(f"    - not dissected: {frame['not_dissected']}")
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
            text += (f" layer={term['layer']} etype={term['etype']} code=0x{term['code']:02x}"
                     f" ({term['error_name']})")
    return text
