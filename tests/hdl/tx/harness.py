"""The transmit engine in Amaranth's simulator against the frames the golden model sends for the same work.

The engine runs in :func:`sim.tb.tx_engine.simulate` against a
:class:`~sim.tb.axi_read_memory.ReadMemory`; the expected frames come from
the model only (:mod:`sim.traffic.tx`). :func:`check` compares them byte for
byte and has scapy read every frame on its own.
"""

from __future__ import annotations

import random
from itertools import accumulate

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.sctp import SCTP, SCTPChunkData

from abi.tx import ControlOpcode
from model.engine.sack import SackRecord
from model.sctp.packet import PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL
from sim.tb.axi_read_memory import ReadMemory
from sim.tb.tx_engine import (  # noqa: F401 (the tests take the records from here)
    LOCAL_IP, LOCAL_MAC, STREAM_IDS, UDP_PORT, Association, Control, ReadResponse, Run, TsnRequest, Work, data_tsn,
    place, simulate,
)
from sim.traffic.tx import (  # noqa: F401
    SOURCE_BASE_TO, SOURCE_STAG, ModelResponder, engine_model_run, frame_of, local_segments, model_frames,
    model_messages,
)

PAGE_END = 0x1_0000_0000   # payloads around a 4 GiB boundary: 64-bit addresses, 4 KiB crossings


def run_against_model(width: int, associations: list[Association], first_ssn: dict, works: list[Work],
                      memory: ReadMemory, *, responses: list = (), controls: list = (), order: list | None = None,
                      peer_window: int | None = None, one_at_a_time: bool = False, extra_frames: int = 0,
                      sacks: list = (), **options) -> tuple[Run, list[bytes], list]:
    """Simulate ``works``, ``responses`` and ``controls`` and return the run with the model's frames for them,
    the messages going out in ``order`` (needed when there are several kinds). With ``peer_window`` the peer keeps at most that
    many Read Requests of a stream unanswered (its ORD, RFC 6581 9): it sends the next one once the
    frames of the response that many requests back on the stream have left. ``one_at_a_time`` offers each
    work and control request once the frames of every message before it in ``order`` have left; the run
    waits for ``extra_frames`` more frames than the model sends (retransmissions). The third
    list names the message of each expected frame."""
    assert order is not None or sum(map(bool, (works, responses, controls, sacks))) <= 1, "the order of the messages"
    order = order if order is not None else [*works, *responses, *controls, *sacks]
    place(memory, controls)
    per_message = model_messages(associations, first_ssn, order, memory)
    expected = [frame for frames in per_message for frame in frames]
    sources = [message for message, frames in zip(order, per_message) for _ in frames]
    before = dict(zip(map(id, order), accumulate([0, *map(len, per_message)])))
    if one_at_a_time:
        for requests in (works, controls, sacks):
            ids = set(map(id, requests))
            assert [id(m) for m in order if id(m) in ids] == list(map(id, requests)), "a port's requests in order"
        options["work_after_frames"] = [before[id(work)] for work in works]
        options["control_after_frames"] = [before[id(control)] for control in controls]
        options["sack_after_frames"] = [before[id(sack)] for sack in sacks]
    if peer_window is not None:
        end_of = {id(message): end for message, end in zip(order, accumulate(map(len, per_message)))}
        after, answered = [], {}
        for response in responses:
            earlier = answered.setdefault((response.association, response.stream_id), [])
            after.append(end_of[id(earlier[-peer_window])] if len(earlier) >= peer_window else 0)
            earlier.append(response)
        options["response_after_frames"] = after
    # The transmit engine's model, its requests posted as the RTL's are, sends the model's messages in order.
    posts = [(after, message) for port, name in ((works, "work"), (responses, "response"), (controls, "control"),
                                                 (sacks, "sack"))
             for after, message in zip(options.get(f"{name}_after_frames") or [0] * len(port), port)]
    posts.sort(key=lambda post: post[0])
    engine = engine_model_run(associations, first_ssn, memory, [message for _, message in posts],
                              after_frames=[after for after, _ in posts], acknowledge=True,
                              ird=options.get("ird", 4), ring_tsns=options.get("ring_tsns", 64),
                              table_associations=options.get("table_associations", 2),
                              stream_ids=options.get("stream_ids", STREAM_IDS))
    assert engine.frames == expected, "model.engine.tx sends other frames, or in another order, than the RTL must"
    return simulate(width, associations, first_ssn, works, memory, len(expected) + extra_frames, responses=responses,
                    controls=controls, sacks=sacks, **options), expected, sources


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
        if isinstance(message, SackRecord):   # the row's tag, one SACK chunk (RFC 4960 6.2, 3.3.4)
            scapy_check(frame, association, None, chunk_types=(3,))
            continue
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
