"""The frames the golden model sends for the transmit engine's work, built from the model only.

:func:`model_messages` segments each local message with the model's data
source (``model.ddp.source.DdpSource``, RFC 5041 5.2) and the RDMAP control
field of ``model.rdmap.messages``; a Read Response comes from the model's
responder (:class:`ModelResponder`: an ``RdmapEndpoint`` that receives the
Read Request, checks the Data Source region and IRD, and hands over its
response's segments); a control request's packet is the model's
``SctpPacket`` of its chunks, or of one ``DataChunk`` (PPID 17) of its
session-control message. Each segment goes into a ``DdpSegmentChunkData``
(DDP-SSN), a ``DataChunk`` (U = 1, PPID 16; I = 1 on a work request's last
segment, RFC 9260 3.3.1), an ``SctpPacket`` (CRC32c) and
``build_frame`` (Ethernet, IPv4, optionally UDP with checksum 0, RFC 6951 5).
The messages are :mod:`sim.tb.tx_engine`'s records; ``memory`` is anything
with the ``base`` and ``data`` of the host memory the engine reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from abi.tx import ControlOpcode, TsnOpcode
from model.engine.tx import (
    Completion, ControlRequest, RefusedRead, RefusedTsn, TransmitConfig, TransmitEngineModel, TxAssociationRow,
)
from model.engine.sack import SackRecord
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment, UntaggedHeader
from model.ddp.source import DdpSource
from model.net.frames import build_frame
from model.rdmap.endpoint import RdmapEndpoint
from model.rdmap.messages import Opcode, QueueNumber, ReadRequest, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL, DataChunk, SctpPacket
from sim.tb.tx_engine import (
    LOCAL_IP, LOCAL_MAC, STREAM_IDS, UDP_PORT, Association, Control, ReadResponse, Work, data_tsn,
)

__all__ = ["MemoryReader", "SOURCE_STAG", "SOURCE_BASE_TO", "ModelResponder", "model_messages", "model_frames", "frame_of",
           "local_segments", "EngineModelRun", "engine_model_run"]

#: The test memory as one region at the model's responder: the STag and TO its Read Requests name.
SOURCE_STAG = 0x00C0FF01
SOURCE_BASE_TO = 0x7000_0000_0000


class ModelResponder:
    """The model's responder of one DDP stream: a ``model.rdmap.endpoint.RdmapEndpoint`` whose host memory
    is ``memory``, registered whole as one REMOTE_READ region. :meth:`request` delivers the Read Request
    a record stands for (the Data Source named by STag and TO, the endpoint translates it) and returns
    the endpoint's events (a Terminate past IRD); :meth:`handed_over` takes the segments it queued."""

    def __init__(self, mulpdu: int, stream_id: int, memory, ird: int = 4):
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


def model_messages(associations: list[Association], first_ssn: dict, messages: list, memory) -> list:
    """The frames the model sends for each of ``messages`` (``Work``, ``ReadResponse`` or ``Control``, in the
    order they go out); ``first_ssn`` maps (association, stream id) to its first DDP-SSN."""
    by_index = {a.index: a for a in associations}
    sources, responders, ssn = {}, {}, dict(first_ssn)
    tsn = {a.index: a.next_tsn for a in associations}
    out = []
    for message in messages:
        association = by_index[message.association]
        if isinstance(message, SackRecord):     # the receive engine's SACK: the row's tag (RFC 4960 6.2)
            packet = SctpPacket(association.local_port, association.peer_port, association.tag, [message.chunk()])
            out.append([frame_of(packet.encode(), association)])
            continue
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
        for index, segment in enumerate(segments):
            user_data = DdpSegmentChunkData(ssn[key], segment).encode()
            ssn[key] = (ssn[key] + 1) & 0xFFFF
            # RFC 9260 3.3.1: the last chunk of a work request's message asks for its SACK without delay.
            immediate = isinstance(message, Work) and index == len(segments) - 1
            chunk = DataChunk(tsn[message.association], message.stream_id, 0, PPID_DDP_SEGMENT, user_data,
                              unordered=True, immediate=immediate)
            tsn[message.association] = (tsn[message.association] + 1) & 0xFFFFFFFF
            packet = SctpPacket(association.local_port, association.peer_port, association.tag, [chunk]).encode()
            frames.append(frame_of(packet, association))
        out.append(frames)
    return out


def frame_of(packet: bytes, association: Association) -> bytes:
    """The model's Ethernet frame of an SCTP packet: IPv4, or UDP with checksum 0 (RFC 6951 5)."""
    return build_frame(packet, LOCAL_MAC, association.peer_mac, LOCAL_IP, association.peer_ip, udp=association.udp,
                       src_port=UDP_PORT, dst_port=association.peer_udp_port, udp_checksum=False)


def local_segments(source: DdpSource, work: Work, memory) -> list:
    """The DDP segments of a local work request (RFC 5041 5.2) with its RDMAP control field (RFC 5040 4.1)."""
    opcode = Opcode(int(work.opcode))
    start = work.host_address - memory.base
    payload = memory.data[start:start + work.length]
    if opcode is Opcode.RDMA_WRITE:
        return source.tagged_message(payload, work.stag, work.to, tagged_rsvd_ulp(opcode))
    if opcode is Opcode.RDMA_READ_REQUEST:
        request = ReadRequest(work.sink_stag, work.sink_to, work.length, work.stag, work.to).encode()
        return source.untagged_message(request, QueueNumber.READ_REQUEST, untagged_rsvd_ulp(opcode))
    if opcode is Opcode.TERMINATE:
        return source.untagged_message(payload, QueueNumber.TERMINATE, untagged_rsvd_ulp(opcode))
    invalidate = work.invalidate_stag if opcode.carries_invalidate_stag else 0
    return source.untagged_message(payload, QueueNumber.SEND, untagged_rsvd_ulp(opcode, invalidate))


def model_frames(associations: list[Association], first_ssn: dict, messages: list, memory) -> list[bytes]:
    """:func:`model_messages`, one list of frames."""
    return [frame for frames in model_messages(associations, first_ssn, messages, memory) for frame in frames]


@dataclass
class EngineModelRun:
    """What ``model.engine.tx.TransmitEngineModel`` sent and reported for a paced run (:func:`engine_model_run`)."""
    frames: list = field(default_factory=list)
    completions: list = field(default_factory=list)   # (wr_id, opcode, association, status)
    tsn_refused: list = field(default_factory=list)   # (opcode, association, tsn)
    refused: list = field(default_factory=list)       # ReadResponseRequest


class MemoryReader:
    """A :class:`~sim.tb.axi_read_memory.ReadMemory` as the transmit engine model reads host memory."""

    def __init__(self, memory) -> None:
        self.memory = memory

    def read(self, address: int, length: int) -> bytes:
        start = address - self.memory.base
        assert 0 <= start and start + length <= len(self.memory.data), f"read {address:#x}+{length} outside memory"
        return bytes(self.memory.data[start:start + length])


def engine_model_run(associations: list[Association], first_ssn: dict, memory, messages: list, *,
                     after_frames: list | None = None, tsn_requests: list = (), tsn_after_frames: list | None = None,
                     ird: int = 4, ring_tsns: int = 64, acknowledge: bool = False, table_associations: int = 2,
                     stream_ids: int = STREAM_IDS) -> EngineModelRun:
    """The transmit engine's model paced as :func:`sim.tb.tx_engine.simulate` paces the RTL: each message
    (``Work``, ``ReadResponse`` or ``Control``) is posted once ``after_frames`` of it frames have left (all
    at once without it), each of ``tsn_requests`` once its ``tsn_after_frames`` have (TSN requests due go
    first); with ``acknowledge`` every DATA chunk is acknowledged as it leaves (a peer that never lags).
    ``table_associations`` and ``stream_ids``: the engine's tables, as the RTL's."""
    model = TransmitEngineModel(TransmitConfig(LOCAL_MAC, str(LOCAL_IP), UDP_PORT, associations=table_associations,
                                               stream_ids=stream_ids, ird=ird, ring_tsns=ring_tsns),
                                MemoryReader(memory))
    for a in associations:
        model.write_association(TxAssociationRow(a.index, a.peer_mac, a.peer_ip, a.local_port, a.peer_port, a.tag,
                                                 a.mulpdu, a.next_tsn, a.udp, a.peer_udp_port))
    for (association, stream_id), ssn in first_ssn.items():
        model.write_stream(association, stream_id, ssn)
    posts = list(zip(after_frames or [0] * len(messages), messages))
    requests = list(zip(tsn_after_frames or [0] * len(tsn_requests), tsn_requests))
    run = EngineModelRun()
    progressed = True
    while progressed:
        progressed = False
        while requests and requests[0][0] <= len(run.frames):
            request = requests.pop(0)[1]
            model.tsn_request(request.opcode, request.association, request.tsn)
            progressed = True
        while posts and posts[0][0] <= len(run.frames):
            _post(model, posts.pop(0)[1])
            progressed = True
        frames = model.data_to_send(limit=1)   # one at a time: a request may be due after each frame
        if frames:
            run.frames += frames
            progressed = True
            if acknowledge:
                for frame in frames:
                    _acknowledge(model, associations, frame)
        for event in model.next_events():
            if isinstance(event, Completion):
                run.completions.append((event.wr_id, event.opcode, event.association, event.status))
            elif isinstance(event, RefusedTsn):
                run.tsn_refused.append((event.opcode, event.association, event.tsn))
            elif isinstance(event, RefusedRead):
                run.refused.append(event.request)
    return run


def _post(model: TransmitEngineModel, message) -> None:
    if isinstance(message, SackRecord):
        model.post_sack(message)
    elif isinstance(message, Work):
        model.post_work(message)
    elif isinstance(message, ReadResponse):
        model.post_read_response(message)
    else:
        model.post_control(ControlRequest(message.opcode, message.association, message.host_address, message.length,
                                          message.stream_id, message.tag, message.wr_id))


def _acknowledge(model: TransmitEngineModel, associations: list[Association], frame: bytes) -> None:
    found = data_tsn(frame)
    rows = {a.local_port: a.index for a in associations}
    if found is not None and found[0] in rows:
        model.tsn_request(TsnOpcode.ACK, rows[found[0]], found[1])
