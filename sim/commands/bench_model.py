"""`rnic bench model`: golden-model throughput, printed as a table.

Three measurements per payload size (64 B, 1 KiB, 4 KiB), each an RDMA Write
segment (tagged, RFC 5041 4.2) in a DDP Segment Chunk (RFC 5043 5.2.2):

* encode: DDP header + payload -> DDP-SSN wrapper -> DATA chunk -> SCTP
  packet with its CRC32c;
* decode+validate: SCTP packet with CRC32c check -> chunk -> DDP-SSN ->
  DDP segment -> STag/TO check of RFC 5041 7.1 (no placement);
* place: `DdpSink.receive` of the segment: validation, placement into the
  sparse host memory, message delivery.

Each runs for a fixed time and reports segments per second and payload
megabytes per second. Numbers are this machine's, one core, CPython.
"""

from __future__ import annotations

import time
from typing import Callable

from model.ddp.segment import DdpSegment, TaggedHeader
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.sink import DdpSink
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.rdmap.messages import Opcode, tagged_rsvd_ulp
from model.sctp.packet import PPID_DDP_SEGMENT, DataChunk, SctpPacket

PAYLOAD_SIZES = (64, 1024, 4096)
STAG = 0x1000
REGION_LENGTH = 1 << 20


def _rate(work: Callable[[int], None], seconds: float) -> float:
    """Calls of `work(i)` per second, measured for about `seconds`."""
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    batch = 16
    while True:
        for _ in range(batch):
            work(count)
            count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


def _segment(payload: bytes, to: int) -> bytes:
    header = TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), STAG, to)
    return DdpSegment(header, payload).encode()


def _packet(segment: bytes, index: int) -> bytes:
    chunk = DataChunk(index, 0, 0, PPID_DDP_SEGMENT, DdpSegmentChunkData(index & 0xFFFF, segment).encode(),
                      unordered=True)
    return SctpPacket(5001, 5002, 0x01020304, [chunk]).encode()


def measure(size: int, seconds: float) -> dict[str, float]:
    payload = bytes(i & 0xFF for i in range(size))
    pd = ProtectionDomain(1)
    table = MemoryTable()
    table.register(MemoryRegion(STAG, pd, 0, REGION_LENGTH, Access.REMOTE_WRITE, 0x100000))
    slots = REGION_LENGTH // size

    def encode(i: int) -> None:
        _packet(_segment(payload, (i % slots) * size), i)

    packet = _packet(_segment(payload, 0), 0)

    def decode_validate(_: int) -> None:
        decoded = SctpPacket.decode(packet)
        chunk = decoded.chunks[0]
        segment = DdpSegment.decode(DdpSegmentChunkData.decode(chunk.user_data).segment)
        header = segment.header
        fault = table.check_tagged(header.stag, header.to, len(segment.payload), 0, pd, Access.REMOTE_WRITE)
        assert fault is None

    segments = [_segment(payload, (i % slots) * size) for i in range(slots)]
    sink = DdpSink(pd=pd, memory_table=table, host_memory=SparseMemory(), stream_id=0)

    def place(i: int) -> None:
        events = sink.receive(segments[i % slots])
        assert events, "segment was not placed"

    return {
        "encode": _rate(encode, seconds),
        "decode+validate": _rate(decode_validate, seconds),
        "place": _rate(place, seconds),
    }


def run_model_bench(seconds: float = 0.5, sizes: tuple[int, ...] = PAYLOAD_SIZES) -> list[dict]:
    rows = []
    print(f"golden model, one core, {seconds:g} s per cell: segments/s (payload MB/s)")
    header = f"{'payload':>8} | {'encode':>20} | {'decode+validate':>20} | {'place':>20}"
    print(header)
    print("-" * len(header))
    for size in sizes:
        rates = measure(size, seconds)
        cells = [f"{rate:>10,.0f} ({rate * size / 1e6:>6.1f})" for rate in rates.values()]
        print(f"{size:>7}B | " + " | ".join(f"{cell:>20}" for cell in cells))
        rows.append({"payload": size, **rates})
    return rows
