"""`rnic replay`: a capture through the receive engine, the RTL under Verilator or the model.

Both backends produce the same `ReplayOutputs`: per captured frame, what left
the engine for it (the frame or chunks passed to the host, segment records
and chunk errors, the ack record of each DATA chunk), then the counters and every byte written to host memory;
one formatter prints them, so the two runs can be diffed line by line.

Outputs are attributed by frame, never by TSN (a retransmitted frame repeats
TSNs and bytes, and is listed under itself). The model knows the frame of
everything it produces (`FrameResult.index`). The engine keeps frame order
within each kind of output (frames to the host, chunks to the host, chunk
errors, segment records, acks) but not across kinds, so the RTL backend lines each
kind up in order with the model's outputs of that kind for the same capture
(:func:`attribute_in_order`): where the two agree, an output takes the frame
of the model's; where they differ, the engine's outputs take the frames of
the model's in the same place; any left over are listed as not matched to a
frame.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import asdict, dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

from model.engine.config import ReceiveConfig
from model.engine.rx import FrameAction, ReceiveEngineModel, SegmentStatus
from model.errors import RnicError, error_name
from model.net.pcap import CaptureRecord, LinkType, read_capture
from sim.traffic.rx import ConfigDoesNotFit, EngineShape, check_config_fits

__all__ = ["ReplayFailed", "UnusableCapture", "Record", "HostPacket", "Ack", "FrameOutputs", "ReplayOutputs", "RTL_SHAPE",
           "RTL_MEMORY_BYTES", "capture_frames", "rtl_misfit", "replay_model", "replay_rtl", "attribute_in_order",
           "format_replay", "memory_digest", "written_runs"]

#: The tables of the engine `replay_rtl` builds, and the testbench's host memory (from address 0).
RTL_SHAPE = EngineShape()
RTL_MEMORY_BYTES = 1 << 24

#: Link types of the tcpdump.org list, named in the refusal of a capture that is not Ethernet.
_LINK_TYPE_NAMES = {0: "BSD loopback", 101: "raw IP", 105: "IEEE 802.11", 113: "Linux cooked (SLL)",
                    127: "802.11 radiotap", 228: "raw IPv4", 229: "raw IPv6", 276: "Linux cooked v2 (SLL2)"}


class ReplayFailed(RnicError):
    """An RTL replay failed: the engine did not consume every frame and drain its outputs within the
    cycle budget (the message says how far it got), or the simulation failed (the message ends with
    its log)."""


class UnusableCapture(RnicError):
    """A capture the receive engine cannot take: no frame, or frames of another link type than Ethernet."""


def capture_frames(capture: bytes) -> list[CaptureRecord]:
    """Every frame of ``capture``, refused (`UnusableCapture`, or `DecodeError` for a damaged file) unless
    it holds at least one frame and every frame is an Ethernet frame, which is what the engine's
    ``s_axis`` takes (the RTL) and what the model classifies."""
    records = list(read_capture(capture))
    if not records:
        raise UnusableCapture("the capture holds no frame")
    for record in records:
        if record.linktype != LinkType.ETHERNET:
            name = _LINK_TYPE_NAMES.get(record.linktype, "not Ethernet")
            raise UnusableCapture(f"frame #{record.index} has link type {record.linktype} ({name}): the receive "
                                  f"engine takes Ethernet frames (link type {int(LinkType.ETHERNET)}) only")
    return records


def rtl_misfit(config: ReceiveConfig) -> str | None:
    """Why ``config`` does not fit the engine `replay_rtl` runs, with that engine's limits; None when it fits.
    The model takes any such configuration."""
    try:
        check_config_fits(config, RTL_SHAPE, RTL_MEMORY_BYTES)
    except ConfigDoesNotFit as error:
        return f"{error} (the RTL engine's limits: {RTL_SHAPE.limits(RTL_MEMORY_BYTES)})"
    return None


@dataclass(frozen=True)
class Record:
    """One report record: a segment verdict or a chunk error."""

    kind: str                 # "segment" or "chunk_error"
    association: int
    tsn: int
    status: str = ""          # SegmentStatus name
    error: tuple[int, int, int] | None = None  # (layer, type, code)
    chunk_error: str = ""     # ChunkError name
    stream_id: int = 0
    ddp_ssn: int = 0
    tagged: bool = False
    last: bool = False
    opcode: int = 0
    payload_length: int = 0
    host_address: int | None = None
    message_length: int | None = None
    stag: int = 0
    to: int = 0
    qn: int = 0
    msn: int = 0
    mo: int = 0
    invalidate_stag: int = 0
    dma_error: bool = False


@dataclass(frozen=True)
class Ack:
    """The ack record of one DATA chunk (RFC 4960 6.2): where it went (an `AckDisposition` name)."""

    association: int
    tsn: int
    disposition: str
    length: int


@dataclass(frozen=True)
class HostPacket:
    """A whole frame (source "frame") or one chunk (source "chunk") passed to the host."""

    source: str
    reason: str
    association: int
    data: bytes


@dataclass
class FrameOutputs:
    """What left the engine for one captured frame (``index`` None: outputs matched to no frame)."""

    index: int | None
    host: list[HostPacket] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)


@dataclass
class ReplayOutputs:
    frames: list[FrameOutputs] = field(default_factory=list)  # capture order, then any unmatched
    counters: dict[str, int] = field(default_factory=dict)
    writes: dict[int, bytes] = field(default_factory=dict)  # address -> final byte values of each written run
    cycles: int | None = None  # RTL: clock cycles from the first frame to the drained engine


def memory_digest(writes: dict[int, bytes]) -> str:
    """SHA-256 over (address, length, contents) of every written run, in address order."""
    digest = hashlib.sha256()
    for address in sorted(writes):
        digest.update(address.to_bytes(8, "big") + len(writes[address]).to_bytes(4, "big") + writes[address])
    return digest.hexdigest()


def written_runs(memory, writes_log: list[tuple[int, int]]) -> dict[int, bytes]:
    """Merge a write log of (address, length) into maximal runs of written bytes with their
    final contents, read with ``memory.read(address, length)`` (the model's SparseMemory or
    the testbench's AXI RAM)."""
    spans = sorted((a, a + n) for a, n in writes_log if n)
    runs: list[list[int]] = []
    for start, end in spans:
        if runs and start <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], end)
        else:
            runs.append([start, end])
    return {start: memory.read(start, end - start) for start, end in runs}


def replay_model(capture: bytes, config: ReceiveConfig) -> ReplayOutputs:
    """Run every frame of `capture` through `ReceiveEngineModel`."""
    engine = ReceiveEngineModel(config)
    captured = list(read_capture(capture))
    for record in captured:
        engine.receive(record.data, record.timestamp)
    outputs = ReplayOutputs()
    results = engine.next_events()
    for result in results:
        frame = FrameOutputs(result.index)
        if result.action is FrameAction.EXCEPTION:
            frame.host.append(HostPacket("frame", result.reason.name, 0, captured[result.index].data))
        for chunk in result.chunks_to_host:
            frame.host.append(HostPacket("chunk", chunk.reason.name, chunk.association, chunk.chunk))
        for fault in result.chunk_faults:
            frame.records.append(Record("chunk_error", fault.association, fault.tsn, chunk_error=fault.kind.name))
        for verdict in result.segments:
            frame.records.append(Record(
                "segment", verdict.association, verdict.tsn, status=verdict.status.name,
                error=tuple(verdict.error) if verdict.error is not None else None,
                stream_id=verdict.stream_id, ddp_ssn=verdict.ddp_ssn, tagged=verdict.tagged, last=verdict.last,
                opcode=verdict.opcode, payload_length=verdict.payload_length,
                host_address=verdict.host_address, message_length=verdict.message_length,
                stag=verdict.stag, to=verdict.to, qn=verdict.qn, msn=verdict.msn, mo=verdict.mo,
                invalidate_stag=verdict.invalidate_stag, dma_error=verdict.dma_error,
            ))
        frame.acks = [Ack(a.association, a.tsn, a.disposition.name, a.length) for a in result.acks]
        outputs.frames.append(frame)
    arrivals = [v for result in results for v in result.arrivals]
    counted = asdict(engine.counters)
    malformed = counted.pop("peer_sacks_malformed")     # a segment counter's register, in its place below
    outputs.counters = counted | {
        # segment counters count placement decisions: a failed write was accepted
        "segments_accepted": sum(v.status is SegmentStatus.ACCEPTED or v.dma_error for v in arrivals),
        "segments_error": sum(v.status is SegmentStatus.ERROR and not v.dma_error for v in arrivals),
        "segments_dropped": sum(v.status is SegmentStatus.DROPPED for v in arrivals),
        "segments_no_stream": sum(v.status is SegmentStatus.NO_STREAM for v in arrivals),
        "segments_duplicate": sum(v.status is SegmentStatus.DUPLICATE for v in arrivals),
        "segments_invalid_ssn": sum(v.status is SegmentStatus.INVALID_SSN for v in arrivals),
        "chunk_errors": sum(r.kind == "chunk_error" for f in outputs.frames for r in f.records),
        "dma_errors": sum(v.dma_error for v in arrivals),
        "acks": sum(len(f.acks) for f in outputs.frames),
        "reports_waiting": engine.reports_waiting,
        "reports_discarded": engine.reports_discarded,
        "peer_sacks_malformed": malformed,
        "reports_withheld": engine.reports_withheld,
    }
    outputs.writes = written_runs(engine.memory, engine.memory.writes)
    return outputs


def replay_rtl(capture_path: Path, config_path: Path, width_bytes: int, *, gap: int = 0,
               memory_stall: float = 0.0, budget_cycles: int | None = None,
               waves: str | bool | None = None) -> ReplayOutputs:
    """Run the capture through `hdl.rx.engine.RxEngine` under Verilator (builds on first use).

    ``gap`` idle cycles go before every frame but the first; ``memory_stall`` is the probability that
    the memory holds a write channel (AW, W, B) not ready on a cycle. The engine is given
    ``budget_cycles`` (by default `sim.tb.rx_replay.budget_cycles` of the capture) to consume every
    frame and drain. Raises `ReplayFailed` when a frame cannot be sent (AXI4-Stream carries no empty
    frame), when the engine does not drain within its budget, or when the simulation fails. ``waves``:
    the waveform format, as `sim.runner.run_cocotb` takes it (by default ``$WAVES``)."""
    from abi.rx import AckDisposition, ChunkError, ExceptionSource
    from abi.rx import ChunkException as ChunkReason
    from abi.rx import FrameException as FrameReason
    from abi.rx import SegmentStatus as Status
    from hdl.rx.engine import RxEngine
    from sim.runner import SimulationFailed, default_build_root, run_cocotb

    capture = Path(capture_path).read_bytes()
    config = ReceiveConfig.from_json(Path(config_path).read_text())
    for record in read_capture(capture):
        if not record.data:
            raise ReplayFailed(f"frame #{record.index} is empty: s_axis (AXI4-Stream) has no empty frame to "
                               "send the engine")
    shape = RTL_SHAPE
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "replay.json"
        log = Path(scratch) / "simulation.log"
        try:
            run_cocotb(
                RxEngine(width_bytes, associations=shape.associations, stream_ids=shape.stream_ids,
                         regions=shape.regions, buffers_per_queue=shape.buffers_per_queue),
                test_module="sim.tb.rx_replay", toplevel=f"rx_engine_w{width_bytes}",
                build_root=default_build_root() / "rx_engine", log_file=log, waves=waves,
                parameters={"width_bytes": width_bytes, "capture": str(Path(capture_path).resolve()),
                            "config": str(Path(config_path).resolve()), "output": str(output),
                            "gap": gap, "memory_stall": memory_stall, "budget_cycles": budget_cycles},
            )
        except SimulationFailed as error:
            tail = log.read_text(errors="replace").splitlines()[-40:] if log.exists() else []
            raise ReplayFailed(f"{error}\n" + "\n".join(tail)) from None
        document = json.loads(output.read_text())
    if "failure" in document:
        raise ReplayFailed(document["failure"])
    items: list[HostPacket | Record | Ack] = []
    for packet in document["exceptions"]:
        frame = packet["source"] == ExceptionSource.FRAME
        reason = (FrameReason if frame else ChunkReason)(packet["reason"]).name
        items.append(HostPacket("frame" if frame else "chunk", reason, packet["association"],
                                bytes.fromhex(packet["data"])))
    for fields in document["chunk_errors"]:
        items.append(Record("chunk_error", fields["association"], fields["tsn"],
                            chunk_error=ChunkError(fields["chunk_error"]).name))
    for fields in document["segments"]:
        status = Status(fields["status"])
        error = fields["error"]
        accepted = status is Status.ACCEPTED or fields["dma_error"]  # a failed write was accepted first
        placed = accepted and fields["payload_length"]
        message = accepted and not fields["tagged"] and fields["last"]
        items.append(Record(
            "segment", fields["association"], fields["tsn"], status=status.name,
            error=(error["layer"], error["etype"], error["code"]) if error["valid"] else None,
            stream_id=fields["stream_id"], ddp_ssn=fields["ddp_ssn"], tagged=bool(fields["tagged"]),
            last=bool(fields["last"]), opcode=fields["opcode"], payload_length=fields["payload_length"],
            host_address=fields["host_address"] if placed else None,
            message_length=fields["message_length"] if message else None,
            stag=fields["stag"], to=fields["to"], qn=fields["qn"], msn=fields["msn"], mo=fields["mo"],
            invalidate_stag=fields["invalidate_stag"], dma_error=bool(fields["dma_error"]),
        ))
    for fields in document["acks"]:
        items.append(Ack(fields["association"], fields["tsn"], AckDisposition(fields["disposition"]).name,
                         fields["length"]))
    return ReplayOutputs(
        frames=attribute_in_order(items, replay_model(capture, config).frames),
        counters=dict(document["counters"]),
        writes={int(address): bytes.fromhex(data) for address, data in document["writes"].items()},
        cycles=document["cycles"],
    )


#: The kinds of output, each kept in frame order by the engine, in the order a frame lists them.
_KINDS = ("frame", "chunk", "chunk_error", "segment", "ack")


def _kind(item: HostPacket | Record | Ack) -> str:
    if isinstance(item, Ack):
        return "ack"
    return item.source if isinstance(item, HostPacket) else item.kind


def _identity(item: HostPacket | Record | Ack) -> tuple:
    """What names an output apart from the verdict on it: bytes to the host, or the chunk a record is about."""
    if isinstance(item, HostPacket):
        return item.source, item.association, item.data
    if isinstance(item, Ack):
        return "ack", item.association, item.tsn
    return item.kind, item.association, item.stream_id, item.tsn, item.ddp_ssn, item.chunk_error


def _outputs_of(frame: FrameOutputs, kind: str) -> list:
    return frame.acks if kind == "ack" else frame.host if kind in ("frame", "chunk") else frame.records


def attribute_in_order(items: list[HostPacket | Record | Ack], reference: list[FrameOutputs]) -> list[FrameOutputs]:
    """Group the engine's outputs `items` (each kind in the order it left) by frame, lined up with
    `reference`, the model's outputs for the same capture (see the module docstring)."""
    frames = [FrameOutputs(frame.index) for frame in reference]
    unmatched = FrameOutputs(None)
    for kind in _KINDS:
        actual = [item for item in items if _kind(item) == kind]
        expected = [(position, item) for position, frame in enumerate(reference)
                    for item in _outputs_of(frame, kind) if _kind(item) == kind]
        matcher = SequenceMatcher(None, [_identity(item) for _, item in expected],
                                  [_identity(item) for item in actual], autojunk=False)
        owners: list[FrameOutputs] = [unmatched] * len(actual)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag in ("equal", "replace"):
                for i, j in zip(range(i1, i2), range(j1, j2)):
                    owners[j] = frames[expected[i][0]]
        for item, owner in zip(actual, owners):
            _outputs_of(owner, kind).append(item)
    return frames + ([unmatched] if unmatched.host or unmatched.records or unmatched.acks else [])


_OPCODES = ["RDMA_WRITE", "RDMA_READ_REQUEST", "RDMA_READ_RESPONSE", "SEND", "SEND_WITH_INVALIDATE",
            "SEND_WITH_SE", "SEND_WITH_SE_AND_INVALIDATE", "TERMINATE"]
_LAYERS = {0: "RDMAP", 1: "DDP", 2: "LLP"}


def _record_line(record: Record) -> str:
    if record.kind == "chunk_error":
        return f"chunk error {record.chunk_error} assoc={record.association} tsn={record.tsn}"
    opcode = _opcode_name(record.opcode)
    text = (f"segment assoc={record.association} sid={record.stream_id} tsn={record.tsn} "
            f"ssn={record.ddp_ssn} {opcode}{' L' if record.last else ''} {record.payload_length}B: {record.status}")
    if record.status == SegmentStatus.ACCEPTED.name and record.host_address is not None:
        text += f" placed at 0x{record.host_address:x}"
    if record.message_length is not None:
        text += f", message complete ({record.message_length}B)"
    if record.dma_error:
        text += ", write refused by memory"
    if record.error is not None:
        layer, etype, code = record.error
        text += f" {_LAYERS.get(layer, layer)} type {etype} code 0x{code:02x} ({error_name(layer, etype, code)})"
    return text


def _ack_line(ack: Ack) -> str:
    return f"ack assoc={ack.association} tsn={ack.tsn} {ack.disposition} {ack.length}B"


def _opcode_name(opcode: int) -> str:
    return _OPCODES[opcode] if opcode < len(_OPCODES) else f"opcode {opcode}"


def _json_item(item: HostPacket | Record) -> dict:
    if isinstance(item, HostPacket):
        return {"source": item.source, "reason": item.reason, "association": item.association,
                "data": item.data.hex()}
    if item.kind == "chunk_error":
        return {"kind": item.kind, "association": item.association, "tsn": item.tsn,
                "chunk_error": item.chunk_error}
    return {"kind": item.kind, "association": item.association, "stream_id": item.stream_id, "tsn": item.tsn,
            "ddp_ssn": item.ddp_ssn, "status": item.status,
            "error": list(item.error) if item.error is not None else None,
            "error_name": error_name(*item.error) if item.error is not None else None,
            "tagged": item.tagged, "last": item.last, "opcode": _opcode_name(item.opcode),
            "payload_length": item.payload_length, "host_address": item.host_address,
            "message_length": item.message_length, "stag": item.stag, "to": item.to, "qn": item.qn,
            "msn": item.msn,
            "mo": item.mo, "invalidate_stag": item.invalidate_stag, "dma_error": item.dma_error}


def _hex_lines(address: int, data: bytes, per_line: int = 32) -> list[str]:
    return [f"    0x{address + offset:x}: {data[offset:offset + per_line].hex()}"
            for offset in range(0, len(data), per_line)]


def format_replay(capture: bytes, outputs: ReplayOutputs, as_json: bool = False, with_bytes: bool = False) -> str:
    """Per captured frame its outputs, then the counters and host memory (docs/cli/replay.md);
    ``with_bytes`` adds every written run's final contents in hex."""
    lengths = [len(record.data) for record in read_capture(capture)]
    digest = memory_digest(outputs.writes)
    placed = sum(len(data) for data in outputs.writes.values())
    runs = sorted(outputs.writes.items())
    if as_json:
        lines = [json.dumps({"index": frame.index,
                             "length": lengths[frame.index] if frame.index is not None else 0,
                             "host": [_json_item(p) for p in frame.host],
                             "records": [_json_item(r) for r in frame.records],
                             "acks": [asdict(a) for a in frame.acks]}) for frame in outputs.frames]
        summary = {"counters": outputs.counters, "bytes_written": placed, "memory_digest": digest,
                   "written": {f"0x{a:x}": len(d) for a, d in runs}}
        if with_bytes:
            summary["memory"] = {f"0x{a:x}": d.hex() for a, d in runs}
        lines.append(json.dumps(summary))
        return "\n".join(lines)
    lines = []
    for frame in outputs.frames:
        title = f"#{frame.index} {lengths[frame.index]}B" if frame.index is not None else "(not matched to a frame)"
        body = [f"    to host: frame {p.reason}" if p.source == "frame"
                else f"    to host: chunk {p.reason} assoc={p.association} {len(p.data)}B" for p in frame.host]
        body += [f"    {_record_line(r)}" for r in frame.records]
        body += [f"    {_ack_line(a)}" for a in frame.acks]
        if not body:
            body = ["    no output (dropped; see the counters)"]
        lines.append(title)
        lines.extend(body)
    lines.append("counters: " + " ".join(f"{name}={value}" for name, value in outputs.counters.items()))
    lines.append(f"host memory: {placed} bytes written in {len(outputs.writes)} runs, sha256 {digest}")
    if with_bytes:
        for address, data in runs:
            lines.extend(_hex_lines(address, data))
    return "\n".join(lines)
