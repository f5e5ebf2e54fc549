"""`rnic replay`: a capture through the receive engine, the RTL under Verilator or the model.

Both backends produce the same `ReplayOutputs` (what left the engine: frames
and chunks passed to the host, report records, counters, host-memory
writes), and one formatter prints them per captured frame, so the two runs
can be diffed line by line. Outputs are matched to frames by content: a
frame exception by its bytes, a chunk passed to the host by its bytes, a
segment report or chunk error by (association, TSN). A frame that produced
nothing was dropped; the counters say why.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from model.engine.config import ReceiveConfig
from model.engine.rx import FrameAction, ReceiveEngineModel, SegmentStatus
from model.errors import DecodeError, RnicError
from model.net.frames import Frame
from model.net.pcap import read_capture
from model.sctp.packet import COMMON_HEADER_LENGTH, BrokenChunk, walk_chunks

__all__ = ["ReplayFailed", "Record", "HostPacket", "ReplayOutputs", "replay_model", "replay_rtl", "format_replay", "memory_digest"]


class ReplayFailed(RnicError):
    """The simulation behind an RTL replay failed; the message ends with its log."""


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


@dataclass(frozen=True)
class HostPacket:
    """A whole frame (source "frame") or one chunk (source "chunk") passed to the host."""

    source: str
    reason: str
    association: int
    data: bytes


@dataclass
class ReplayOutputs:
    host_packets: list[HostPacket] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    writes: dict[int, bytes] = field(default_factory=dict)  # address -> final byte values of each written run


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
    outputs = ReplayOutputs()
    records = list(read_capture(capture))
    for record in records:
        engine.receive(record.data, record.timestamp)
    for result in engine.next_events():
        if result.action is FrameAction.EXCEPTION:
            outputs.host_packets.append(HostPacket("frame", result.reason.name, 0, records[result.index].data))
        for chunk in result.chunks_to_host:
            outputs.host_packets.append(HostPacket("chunk", chunk.reason.name, chunk.association, chunk.chunk))
        for fault in result.chunk_faults:
            outputs.records.append(Record("chunk_error", fault.association, fault.tsn, chunk_error=fault.kind.name))
        for verdict in result.segments:
            outputs.records.append(Record(
                "segment", verdict.association, verdict.tsn, status=verdict.status.name,
                error=tuple(verdict.error) if verdict.error is not None else None,
                stream_id=verdict.stream_id, ddp_ssn=verdict.ddp_ssn, tagged=verdict.tagged, last=verdict.last,
                opcode=verdict.opcode, payload_length=verdict.payload_length,
                host_address=verdict.host_address, message_length=verdict.message_length,
            ))
    segments = [r for r in outputs.records if r.kind == "segment"]
    outputs.counters = asdict(engine.counters) | {
        "overflow": 0,
        "segments_accepted": sum(r.status == SegmentStatus.ACCEPTED.name for r in segments),
        "segments_error": sum(r.status == SegmentStatus.ERROR.name for r in segments),
        "segments_dropped": sum(r.status == SegmentStatus.DROPPED.name for r in segments),
        "segments_no_stream": sum(r.status == SegmentStatus.NO_STREAM.name for r in segments),
        "chunk_errors": sum(r.kind == "chunk_error" for r in outputs.records),
        "dma_errors": 0,
    }
    outputs.writes = written_runs(engine.memory, engine.memory.writes)
    return outputs


def replay_rtl(capture_path: Path, config_path: Path, width_bytes: int) -> ReplayOutputs:
    """Run the capture through `hdl.rx.engine.RxEngine` under Verilator (builds on first use)."""
    from hdl.abi import ChunkError, ExceptionSource, SegmentStatus
    from hdl.abi import ChunkException as ChunkReason
    from hdl.abi import FrameException as FrameReason
    from hdl.rx.engine import RxEngine
    from sim.runner import SimulationFailed, default_build_root, run_cocotb
    from sim.traffic.rx import EngineShape

    shape = EngineShape()
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "replay.json"
        log = Path(scratch) / "simulation.log"
        try:
            run_cocotb(
            RxEngine(width_bytes, associations=shape.associations, stream_ids=shape.stream_ids,
                     regions=shape.regions, buffers_per_queue=shape.buffers_per_queue),
                test_module="sim.tb.rx_replay", toplevel=f"rx_engine_w{width_bytes}",
                build_root=default_build_root() / "rx_engine", log_file=log,
                parameters={"width_bytes": width_bytes, "capture": str(Path(capture_path).resolve()),
                            "config": str(Path(config_path).resolve()), "output": str(output)},
            )
        except SimulationFailed as error:
            tail = log.read_text(errors="replace").splitlines()[-40:] if log.exists() else []
            raise ReplayFailed(f"{error}\n" + "\n".join(tail)) from None
        document = json.loads(output.read_text())
    outputs = ReplayOutputs()
    for packet in document["exceptions"]:
        frame = packet["source"] == ExceptionSource.FRAME
        reason = (FrameReason if frame else ChunkReason)(packet["reason"]).name
        outputs.host_packets.append(HostPacket("frame" if frame else "chunk", reason,
                                               packet["association"], bytes.fromhex(packet["data"])))
    for fields in document["chunk_errors"]:
        outputs.records.append(Record("chunk_error", fields["association"], fields["tsn"],
                                      chunk_error=ChunkError(fields["chunk_error"]).name))
    for fields in document["segments"]:
        status = SegmentStatus(fields["status"])
        error = fields["error"]
        placed = status is SegmentStatus.ACCEPTED and fields["payload_length"]
        message = status is SegmentStatus.ACCEPTED and not fields["tagged"] and fields["last"]
        outputs.records.append(Record(
            "segment", fields["association"], fields["tsn"], status=status.name,
            error=(error["layer"], error["etype"], error["code"]) if error["valid"] else None,
            stream_id=fields["stream_id"], ddp_ssn=fields["ddp_ssn"], tagged=bool(fields["tagged"]),
            last=bool(fields["last"]), opcode=fields["opcode"], payload_length=fields["payload_length"],
            host_address=fields["host_address"] if placed else None,
            message_length=fields["message_length"] if message else None,
        ))
    outputs.counters = {name: value for name, value in document["counters"].items()}
    outputs.writes = {int(address): bytes.fromhex(data) for address, data in document["writes"].items()}
    return outputs


def _frame_keys(data: bytes) -> tuple[set[bytes], set[int], bool]:
    """The chunks' bytes and DATA TSNs of a frame, and whether its chunk walk broke (the engine's
    lenient walk: the chunks before a broken one still count)."""
    try:
        sctp = Frame.decode(data, verify=False).sctp
    except DecodeError:
        return set(), set(), False
    chunks, tsns = set(), set()
    for chunk in walk_chunks(sctp[COMMON_HEADER_LENGTH:]):
        if isinstance(chunk, BrokenChunk):
            return chunks, tsns, True
        chunks.add(chunk.data)
        if chunk.data_tsn is not None:
            tsns.add(chunk.data_tsn)
    return chunks, tsns, False


def attribute(capture: bytes, outputs: ReplayOutputs) -> list[dict]:
    """Per captured frame: the outputs that belong to it (see the module docstring).

    Each kind of output leaves the engine in frame order, so each is matched
    from the head of its own queue: frames passed to the host by their bytes,
    chunks by theirs, segment reports and chunk errors by TSN (a chunk error
    without a TSN goes to a frame whose chunk walk breaks).
    """
    queues = {
        "frame": [p for p in outputs.host_packets if p.source == "frame"],
        "chunk": [p for p in outputs.host_packets if p.source == "chunk"],
        "segment": [r for r in outputs.records if r.kind == "segment"],
        "chunk_error": [r for r in outputs.records if r.kind == "chunk_error"],
    }
    frames = []
    for record in read_capture(capture):
        chunks, tsns, broken = _frame_keys(record.data)
        entry = {"index": record.index, "length": len(record.data), "host": [], "records": []}
        if queues["frame"] and queues["frame"][0].data == record.data:
            entry["host"].append(queues["frame"].pop(0))
        else:
            while queues["chunk"] and queues["chunk"][0].data in chunks:
                entry["host"].append(queues["chunk"].pop(0))
            for kind in ("chunk_error", "segment"):
                while queues[kind] and (queues[kind][0].tsn in tsns
                                        or (queues[kind][0].tsn == 0 and broken and kind == "chunk_error")):
                    entry["records"].append(queues[kind].pop(0))
        frames.append(entry)
    rest = [item for queue in queues.values() for item in queue]
    if rest:
        frames.append({"index": None, "length": 0,
                       "host": [i for i in rest if isinstance(i, HostPacket)],
                       "records": [i for i in rest if isinstance(i, Record)]})
    return frames


_OPCODES = ["RDMA_WRITE", "RDMA_READ_REQUEST", "RDMA_READ_RESPONSE", "SEND", "SEND_WITH_INVALIDATE",
            "SEND_WITH_SE", "SEND_WITH_SE_AND_INVALIDATE", "TERMINATE"]
_LAYERS = {0: "RDMAP", 1: "DDP", 2: "LLP"}


def _record_line(record: Record) -> str:
    if record.kind == "chunk_error":
        return f"chunk error {record.chunk_error} assoc={record.association} tsn={record.tsn}"
    opcode = _OPCODES[record.opcode] if record.opcode < len(_OPCODES) else f"opcode {record.opcode}"
    text = (f"segment assoc={record.association} sid={record.stream_id} tsn={record.tsn} "
            f"ssn={record.ddp_ssn} {opcode}{' L' if record.last else ''} {record.payload_length}B: {record.status}")
    if record.status == SegmentStatus.ACCEPTED.name and record.host_address is not None:
        text += f" placed at 0x{record.host_address:x}"
    if record.message_length is not None:
        text += f", message complete ({record.message_length}B)"
    if record.error is not None:
        layer, etype, code = record.error
        text += f" {_LAYERS.get(layer, layer)} type {etype} code 0x{code:02x}"
    return text


def format_replay(capture: bytes, outputs: ReplayOutputs, as_json: bool = False) -> str:
    frames = attribute(capture, outputs)
    digest = memory_digest(outputs.writes)
    placed = sum(len(data) for data in outputs.writes.values())
    if as_json:
        def plain(item):
            fields = asdict(item)
            if "data" in fields:
                fields["data"] = fields["data"].hex()
            return fields
        lines = [json.dumps({"index": f["index"], "length": f["length"],
                             "host": [plain(p) for p in f["host"]],
                             "records": [plain(r) for r in f["records"]]}) for f in frames]
        lines.append(json.dumps({"counters": outputs.counters, "bytes_written": placed, "memory_digest": digest,
                                 "written": {f"0x{a:x}": len(d) for a, d in sorted(outputs.writes.items())}}))
        return "\n".join(lines)
    lines = []
    for frame in frames:
        title = f"#{frame['index']} {frame['length']}B" if frame["index"] is not None else "(not matched to a frame)"
        body = [f"    to host: frame {p.reason}" if p.source == "frame"
                else f"    to host: chunk {p.reason} assoc={p.association} {len(p.data)}B" for p in frame["host"]]
        body += [f"    {_record_line(r)}" for r in frame["records"]]
        if not body:
            body = ["    no output (dropped; see the counters)"]
        lines.append(title)
        lines.extend(body)
    lines.append("counters: " + " ".join(f"{name}={value}" for name, value in outputs.counters.items()))
    lines.append(f"host memory: {placed} bytes written in {len(outputs.writes)} runs, sha256 {digest}")
    return "\n".join(lines)
