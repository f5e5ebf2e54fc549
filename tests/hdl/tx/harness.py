"""The transmit engine in Amaranth's simulator, and the frames the golden model sends for the same work.

:func:`model_frames` builds the expected frames from the model only:
``model.ddp.source.DdpSource`` segments each local message (RFC 5041 5.2) with
the RDMAP control field from ``model.rdmap.messages``; a Read Response comes
from the model's responder (:class:`ModelResponder`: an ``RdmapEndpoint``
that receives the Read Request, checks the Data Source region and IRD, and
hands over its response's segments); a control request's packet is the
model's ``SctpPacket`` of the chunks the test wrote into memory, or of one
``DataChunk`` (PPID 17) of its session-control message; each segment goes into a
``DdpSegmentChunkData`` (DDP-SSN), a ``DataChunk`` (U = 1, PPID 16), an
``SctpPacket`` (CRC32c) and ``build_frame`` (Ethernet, IPv4, optionally UDP
with checksum 0, RFC 6951 5). :func:`simulate` runs :class:`hdl.tx.engine.TxEngine`
on the same work and Read Requests against
:class:`~sim.tb.axi_read_memory.ReadMemory` (both in ``sim/tb/tx_engine.py``).
"""

from __future__ import annotations

import random
from itertools import accumulate

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.sctp import SCTP, SCTPChunkData

from hdl.abi import ControlOpcode
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment, UntaggedHeader
from model.ddp.source import DdpSource
from model.net.frames import build_frame
from model.rdmap.endpoint import RdmapEndpoint
from model.rdmap.messages import Opcode, QueueNumber, ReadRequest, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL, DataChunk, SctpPacket
from sim.tb.axi_read_memory import ReadMemory
from sim.tb.tx_engine import (  # noqa: F401 (the tests take the records from here)
    LOCAL_IP, LOCAL_MAC, STREAM_IDS, UDP_PORT, Association, Control, ReadResponse, Run, TsnRequest, Work, data_tsn,
    place, simulate,
)

PAGE_END = 0x1_0000_0000   # payloads around a 4 GiB boundary: 64-bit addresses, 4 KiB crossings


#: The test memory as one region at the model's responder: the STag and TO its Read Requests name.
SOURCE_STAG = 0x00C0FF01
SOURCE_BASE_TO = 0x7000_0000_0000


class ModelResponder:
    """The model's responder of one DDP stream: a ``model.rdmap.endpoint.RdmapEndpoint`` whose host memory
    is ``memory``, registered whole as one REMOTE_READ region. :meth:`request` delivers the Read Request
    a record stands for (the Data Source named by STag and TO, the endpoint translates it) and returns
    the endpoint's events (a Terminate past IRD); :meth:`handed_over` takes the segments it queued."""

    def __init__(self, mulpdu: int, stream_id: int, memory: ReadMemory, ird: int = 4):
        pd, table, host = ProtectionDomain(1), MemoryTable(), SparseMemory()
        host.write(memory.base, memory.data)
        table.register(MemoryRegion(SOURCE_STAG, pd, SOURCE_BASE_TO, len(memory.data), Access.REMOTE_READ,
                                    memory.base))
        self.endpoint = RdmapEndpoint(pd=pd, memory_table=table, host_memory=host, stream_id=stream_id,
                                      mulpdu=mulpdu, ird=ird)
        self.base, self.msn = memory.base, 1

    def request(self, response: ReadResponse) -> list:
        request = ReadRequest(response.sink_stag, response.sink_to, response.length, SOURCE_STAG,
                              SOURCE_BASE_TO + response.host_address - self.base)
        header = UntaggedHeader(True, untagged_rsvd_ulp(Opcode.RDMA_READ_REQUEST), QueueNumber.READ_REQUEST,
                                self.msn, 0)
        self.endpoint.receive(DdpSegment(header, request.encode()).encode(), self.msn - 1)
        self.msn += 1
        return self.endpoint.next_events()

    def handed_over(self) -> list[bytes]:
        return self.endpoint.data_to_send()


def model_messages(associations: list[Association], first_ssn: dict, messages: list, memory: ReadMemory) -> list:
    """The frames the model sends for each of ``messages`` (``Work``, ``ReadResponse`` or ``Control``, in the
    order they go out); ``first_ssn`` maps (association, stream id) to its first DDP-SSN."""
    by_index = {a.index: a for a in associations}
    sources, responders, ssn = {}, {}, dict(first_ssn)
    tsn = {a.index: a.next_tsn for a in associations}
    out = []
    for message in messages:
        association = by_index[message.association]
        key = (message.association, message.stream_id)
        if isinstance(message, Control):
            if message.opcode is ControlOpcode.PACKET:
                packet = SctpPacket(association.local_port, association.peer_port, message.tag, message.chunks)
            else:
                chunk = DataChunk(tsn[message.association], message.stream_id, 0, PPID_DDP_SESSION_CONTROL,
                                  message.message, unordered=True)
                tsn[message.association] = (tsn[message.association] + 1) & 0xFFFFFFFF
                packet = SctpPacket(association.local_port, association.peer_port, association.tag, [chunk])
            out.append([frame_of(packet.encode(), association)])
            continue
        if isinstance(message, ReadResponse):
            responder = responders.setdefault(key, ModelResponder(association.mulpdu, message.stream_id, memory))
            assert responder.request(message) == [], "the model refused a Read Request"
            segments = responder.handed_over()
        else:
            segments = [segment.encode() for segment in
                        local_segments(sources.setdefault(key, DdpSource(association.mulpdu)), message, memory)]
        frames = []
        for segment in segments:
            user_data = DdpSegmentChunkData(ssn[key], segment).encode()
            ssn[key] = (ssn[key] + 1) & 0xFFFF
            chunk = DataChunk(tsn[message.association], message.stream_id, 0, PPID_DDP_SEGMENT, user_data,
                              unordered=True)
            tsn[message.association] = (tsn[message.association] + 1) & 0xFFFFFFFF
            packet = SctpPacket(association.local_port, association.peer_port, association.tag, [chunk]).encode()
            frames.append(frame_of(packet, association))
        out.append(frames)
    return out


def frame_of(packet: bytes, association: Association) -> bytes:
    """The model's Ethernet frame of an SCTP packet: IPv4, or UDP with checksum 0 (RFC 6951 5)."""
    return build_frame(packet, LOCAL_MAC, association.peer_mac, LOCAL_IP, association.peer_ip, udp=association.udp,
                       src_port=UDP_PORT, dst_port=association.peer_udp_port, udp_checksum=False)


def local_segments(source: DdpSource, work: Work, memory: ReadMemory) -> list:
    """The DDP segments of a local work request (RFC 5041 5.2) with its RDMAP control field (RFC 5040 4.1)."""
    opcode = Opcode(int(work.opcode))
    start = work.host_address - memory.base
    payload = memory.data[start:start + work.length]
    if opcode is Opcode.RDMA_WRITE:
        return source.tagged_message(payload, work.stag, work.to, tagged_rsvd_ulp(opcode))
    if opcode is Opcode.RDMA_READ_REQUEST:
        request = ReadRequest(work.sink_stag, work.sink_to, work.length, work.stag, work.to).encode()
        return source.untagged_message(request, QueueNumber.READ_REQUEST, untagged_rsvd_ulp(opcode))
    invalidate = work.invalidate_stag if opcode.carries_invalidate_stag else 0
    return source.untagged_message(payload, QueueNumber.SEND, untagged_rsvd_ulp(opcode, invalidate))


def model_frames(associations: list[Association], first_ssn: dict, messages: list, memory: ReadMemory) -> list[bytes]:
    """:func:`model_messages`, one list of frames."""
    return [frame for frames in model_messages(associations, first_ssn, messages, memory) for frame in frames]


def run_against_model(width: int, associations: list[Association], first_ssn: dict, works: list[Work],
                      memory: ReadMemory, *, responses: list = (), controls: list = (), order: list | None = None,
                      peer_window: int | None = None, one_at_a_time: bool = False, extra_frames: int = 0,
                      **options) -> tuple[Run, list[bytes], list]:
    """Simulate ``works``, ``responses`` and ``controls`` and return the run with the model's frames for them,
    the messages going out in ``order`` (needed when there are several kinds). With ``peer_window`` the peer keeps at most that
    many Read Requests of a stream unanswered (its ORD, RFC 6581 9): it sends the next one once the
    frames of the response that many requests back on the stream have left. ``one_at_a_time`` offers each
    work and control request once the frames of every message before it in ``order`` have left; the run
    waits for ``extra_frames`` more frames than the model sends (retransmissions). The third
    list names the message of each expected frame."""
    assert order is not None or sum(map(bool, (works, responses, controls))) <= 1, "the order of the messages"
    order = order if order is not None else [*works, *responses, *controls]
    place(memory, controls)
    per_message = model_messages(associations, first_ssn, order, memory)
    expected = [frame for frames in per_message for frame in frames]
    sources = [message for message, frames in zip(order, per_message) for _ in frames]
    if one_at_a_time:
        for requests in (works, controls):
            ids = set(map(id, requests))
            assert [id(m) for m in order if id(m) in ids] == list(map(id, requests)), "a port's requests in order"
        before = dict(zip(map(id, order), accumulate([0, *map(len, per_message)])))
        options["work_after_frames"] = [before[id(work)] for work in works]
        options["control_after_frames"] = [before[id(control)] for control in controls]
    if peer_window is not None:
        end_of = {id(message): end for message, end in zip(order, accumulate(map(len, per_message)))}
        after, answered = [], {}
        for response in responses:
            earlier = answered.setdefault((response.association, response.stream_id), [])
            after.append(end_of[id(earlier[-peer_window])] if len(earlier) >= peer_window else 0)
            earlier.append(response)
        options["response_after_frames"] = after
    return simulate(width, associations, first_ssn, works, memory, len(expected) + extra_frames, responses=responses,
                    controls=controls, **options), expected, sources


def random_memory(rng: random.Random, width: int, **pace) -> ReadMemory:
    return ReadMemory(PAGE_END - 0x4000, rng.randbytes(0x8000), width, seed=rng.getrandbits(32), **pace)


def scapy_check(frame: bytes, association: Association, tsn: int | None, *, ppid: int = PPID_DDP_SEGMENT,
                tag: int | None = None, chunk_types: tuple = ()) -> None:
    """scapy's own reading of the frame: addresses, checksums, and one unordered unfragmented DATA chunk of
    TSN ``tsn`` and PPID ``ppid`` with the row's tag, or (``tsn`` None) the ``chunk_types`` with ``tag``."""
    ether = Ether(frame)
    ip = ether[IP]
    assert ip.dst == association.peer_ip and ip.flags == "DF" and ip.ihl == 5
    rebuilt = IP(bytes(ip))
    rebuilt.chksum = None
    assert IP(bytes(rebuilt)).chksum == ip.chksum, "IPv4 header checksum"
    assert ip.len == len(frame) - 14
    if association.udp:
        datagram = ether[UDP]
        assert (datagram.dport, datagram.chksum, datagram.len) == (association.peer_udp_port, 0, ip.len - 20)
        raw = bytes(datagram.payload)
    else:
        assert ip.proto == 132
        raw = bytes(ip.payload)
    recomputed = SCTP(raw)
    recomputed.chksum = None
    assert bytes(recomputed)[8:12] == raw[8:12], "SCTP CRC32c"
    sctp = SCTP(raw)
    assert (sctp.sport, sctp.dport, sctp.tag) == (association.local_port, association.peer_port,
                                                   association.tag if tag is None else tag)
    if tsn is None:
        types, layer = [], sctp.payload
        while layer and hasattr(layer, "type"):
            types.append(layer.type)
            layer = layer.payload
        assert tuple(types) == tuple(chunk_types), f"chunks {types}"
        return
    chunk = sctp[SCTPChunkData]
    assert (chunk.unordered, chunk.beginning, chunk.ending, chunk.proto_id, chunk.tsn) == (1, 1, 1, ppid, tsn)


def check(width, associations, first_ssn, works, memory, *, refused=(), **options) -> Run:
    """Run against the model: the same frames byte for byte, each read by scapy with its TSN in sequence,
    and exactly the ``refused`` Read Requests back on ``m_axis_rr_refused``."""
    run, expected, sources = run_against_model(width, associations, first_ssn, works, memory,
                                               refused_count=len(refused), **options)
    assert len(run.frames) == len(expected)
    for index, (frame, model) in enumerate(zip(run.frames, expected)):
        assert frame == model, f"frame {index}: {frame.hex()} != {model.hex()}"
    tsn = {a.index: a.next_tsn for a in associations}
    by_index = {a.index: a for a in associations}
    for frame, message in zip(run.frames, sources):
        association = by_index[message.association]
        if isinstance(message, Control) and message.opcode is ControlOpcode.PACKET:
            scapy_check(frame, association, None, tag=message.tag,
                        chunk_types=tuple(int(chunk.CHUNK_TYPE) for chunk in message.chunks))
            continue
        session = isinstance(message, Control)
        scapy_check(frame, association, tsn[association.index],
                    ppid=PPID_DDP_SESSION_CONTROL if session else PPID_DDP_SEGMENT)
        tsn[association.index] = (tsn[association.index] + 1) & 0xFFFFFFFF
    assert run.refused == list(refused)
    return run
