"""A peer process whose SCTP is usrsctp doing its own UDP encapsulation (`sim.usrsctp_udp`, RFC 6951), with the
model's DDP Stream Sessions (`model.ddp.session`, RFC 5043 6, RFC 6581) and DDP/RDMAP segments built and read
with the model's codecs (`model.ddp.segment`, `model.rdmap.messages`):

    python -m tests.network.usrsctp_udp_peer connect DEVICE_PORT   # usrsctp's INIT to a udp: device
    python -m tests.network.usrsctp_udp_peer listen                # a udp: device connects to usrsctp

It speaks JSON lines. Out, on stdout: ``{"ready": PORT}`` (usrsctp's UDP port, which is also its SCTP port: see
`sim.usrsctp_udp`), ``{"up": ...}`` at COMMUNICATION UP with the peer's Adaptation Layer Indication and the UDP
port usrsctp sends to, ``{"session": ...}`` once the DDP session is open with the peer's private data, then one
``{"segment": ...}`` per DDP segment the peer sent, decoded. In, on stdin: ``{"write": [STAG, TO, HEX]}`` (an
RDMA Write, RFC 5040 4.3) and ``{"send": HEX}`` (a Send, RFC 5040 4.4), each cut into DDP segments of at most
`SEGMENT_PAYLOAD` bytes.

Its own choices: the session is enhanced (RFC 6581 7), peer-to-peer with the zero-length RDMA Write as RTR
(RFC 6581 9), and its private data announces a buffer it never has (`ANNOUNCED_STAG`, `ANNOUNCED_TO`): a segment
the peer sends there is reported, not placed.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time

from model.ddp.negotiation import LocalResources, RtrType
from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.session import DdpSessions, InitiateReceived, RtrReceived, SegmentReceived, SessionAccepted
from model.rdmap.messages import Opcode, rdmap_control_of, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import ADAPTATION_CODE_POINT_DDP
from sim.usrsctp import AdaptationIndication, AssocChange, Message
from sim.usrsctp_udp import UdpStack

STREAMS = 16
STREAM = 0
"""The DDP stream of the session this peer initiates (RFC 5043 8: any stream; the first); when it listens, the
session is on the stream the peer's Initiate came on."""
SEGMENT_PAYLOAD = 1024
"""ULP bytes per DDP segment: with the tagged header and the DDP-SSN, well below usrsctp's fragmentation point
over a 1500-byte path (RFC 5043 9: a segment is one unfragmented DATA chunk)."""
RESOURCES = LocalResources(ird=4, ord=4, peer_to_peer=True, rtr_types=(RtrType.WRITE,))
ANNOUNCED_STAG, ANNOUNCED_TO = 0x00ABCD01, 0x7000_0000
POLL_SECONDS = 0.005


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def free_udp_port() -> int:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def segments_of(opcode: Opcode, data: bytes, stag: int = 0, to: int = 0, msn: int = 0) -> list[bytes]:
    """One RDMA message as DDP segments (RFC 5041 4.2, 4.3): the tagged ones at increasing TOs, the untagged ones at
    increasing MOs, L set on the last."""
    pieces = [data[at:at + SEGMENT_PAYLOAD] for at in range(0, len(data), SEGMENT_PAYLOAD)] or [b""]
    out = []
    for index, piece in enumerate(pieces):
        offset, last = index * SEGMENT_PAYLOAD, index == len(pieces) - 1
        if opcode.tagged:
            header: TaggedHeader | UntaggedHeader = TaggedHeader(last, tagged_rsvd_ulp(opcode), stag, to + offset)
        else:
            header = UntaggedHeader(last, untagged_rsvd_ulp(opcode), opcode.queue_number, msn, offset)
        out.append(DdpSegment(header, piece).encode())
    return out


def describe(segment: bytes) -> dict:
    decoded = DdpSegment.decode(segment)
    header = decoded.header
    fields = {"opcode": Opcode(rdmap_control_of(header).opcode).name, "last": header.last,
              "payload": decoded.payload.hex()}
    if isinstance(header, TaggedHeader):
        fields.update(stag=header.stag, to=header.to)
    else:
        fields.update(qn=header.qn, msn=header.msn, mo=header.mo)
    return fields


def main(mode: str, device_port: int | None) -> None:
    port = free_udp_port()
    stack = UdpStack.start(port)
    sock = stack.socket()
    sock.set_nodelay()
    sock.set_disable_fragments()
    sock.set_adaptation_layer(ADAPTATION_CODE_POINT_DDP)   # RFC 5043 5.1
    sock.set_streams(STREAMS, STREAMS)
    sock.bind("127.0.0.1", port)
    if mode == "connect":
        say(ready=port)
        sock.set_remote_udp_port(device_port)
        sock.connect("127.0.0.1", device_port)
        association = sock
    else:
        sock.listen()
        say(ready=port)    # only once listening: usrsctp answers an INIT to a port nobody listens on with an ABORT
        while (association := sock.accept()) is None:
            time.sleep(POLL_SECONDS)
    sessions = DdpSessions(responder=RESOURCES)
    private = json.dumps({"stag": ANNOUNCED_STAG, "to": ANNOUNCED_TO}).encode()
    send_msn, lines, stream = 1, b"", STREAM
    while True:
        for item in association.receive_all():
            if isinstance(item, AdaptationIndication):   # usrsctp reads it after COMMUNICATION UP
                say(adaptation=item.code_point)
            elif isinstance(item, AssocChange) and item.state == "COMM_UP":
                say(up={"remote_udp_port": association.remote_udp_port("127.0.0.1"),
                        "streams": [item.outbound_streams, item.inbound_streams]})
                if mode == "connect":
                    sessions.initiate(STREAM, private, enhanced=RESOURCES)
            elif isinstance(item, AssocChange):
                say(association=item.state)
                return
            elif isinstance(item, Message):
                sessions.receive((item.stream, item.ppid, item.data))
        for event in sessions.next_events():
            if isinstance(event, InitiateReceived):
                stream = event.stream_id
                sessions.accept(stream, private)
            elif isinstance(event, SessionAccepted):
                say(session={"stream": event.stream_id, "private_data": event.private_data.decode()})
            elif isinstance(event, RtrReceived):
                say(session={"stream": event.stream_id, "rtr": event.rtr.name})
            elif isinstance(event, SegmentReceived):
                say(segment={"stream": event.stream_id, "ddp_ssn": event.ddp_ssn, **describe(event.segment)})
        for message in sessions.data_to_send():
            association.send(bytes(message.payload), message.ppid, message.stream_id, unordered=True)  # RFC 5043 10
        if association.eof or association.error:
            say(association="gone")
            return
        readable, _, _ = select.select([sys.stdin.buffer], [], [], POLL_SECONDS)
        if readable:
            chunk = sys.stdin.buffer.read1(1 << 16)
            if not chunk:
                return
            lines += chunk
            while b"\n" in lines:
                line, lines = lines.split(b"\n", 1)
                command = json.loads(line)
                if "write" in command:
                    stag, to, data = command["write"]
                    segments = segments_of(Opcode.RDMA_WRITE, bytes.fromhex(data), stag=stag, to=to)
                else:
                    segments = segments_of(Opcode.SEND, bytes.fromhex(command["send"]), msn=send_msn)
                    send_msn += 1
                for segment in segments:
                    sessions.send_segment(stream, segment)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
