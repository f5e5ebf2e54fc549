"""`rnic bench tx`: the RTL transmit engine's throughput and latency, and optionally its synthesis, as tables.

Simulation (Amaranth's simulator, through :func:`sim.tb.tx_engine.simulate`):
for each load, width and message size, messages offered back to back with
memory that answers every read a cycle later, a network that is always ready
and a peer that acknowledges each DATA chunk as it leaves (so the
retransmission ring never holds a message back). The association's MULPDU is
the one an Ethernet path MTU of 1500 bytes gives (``model.sctp.config``), so
a message longer than that leaves in several frames. Loads:

* ``write``: RDMA Writes on ``s_axis_wr``, one stream;
* ``read-response``: inbound RDMA Read Requests on ``s_axis_rr``, spread over
  both associations' four streams, at most the IRD (4) on each, so none is
  refused; each is answered with an RDMA Read Response of that size.

Measured, in cycles of the engine's clock, over the span from the first beat
on ``m_axis`` to the last: wire bytes per cycle as a fraction of W, beats per
cycle (the fraction of the one-beat-per-cycle limit, partial last beats
counted as beats), the cycles in the span with no beat (stalls: the network
was always ready), and the latency from the first request taken (the
doorbell, an idle engine) to the first beat on the wire.
"""

from __future__ import annotations

import random

from abi.tx import WorkOpcode
from model.ddp.source import DdpSource
from model.rdmap.messages import Opcode, tagged_rsvd_ulp
from model.sctp.config import AssociationConfig
from sim.tb.axi_read_memory import ReadMemory
from sim.tb.tx_engine import Association, ReadResponse, Work, simulate

PAYLOADS = (64, 256, 1024, 1460, 4096, 9000)
LOADS = ("write", "read-response")
MULPDU = AssociationConfig(5000, 5000, random.Random(0), path_mtu=1500).mulpdu
MEMORY_BASE, MEMORY_BYTES = 0x10000, 1 << 16
STREAMS_PER_ASSOCIATION, IRD = 4, 4
MIN_FRAMES = 24


def segments(payload: int) -> int:
    """Frames a Write or a Read Response of ``payload`` bytes takes, as the model's data source segments
    a tagged message (RFC 5041 5.2)."""
    return len(DdpSource(MULPDU).tagged_message(bytes(payload), 0, 0, tagged_rsvd_ulp(Opcode.RDMA_WRITE)))


def messages_for(payload: int, load: str) -> int:
    """Enough messages for ``MIN_FRAMES`` frames, at least 4; a Read Response load at most IRD a stream."""
    count = max(4, -(-MIN_FRAMES // segments(payload)))
    if load == "read-response":
        count = min(count, 2 * STREAMS_PER_ASSOCIATION * IRD)
    return count


def run_row(width: int, payload: int, load: str) -> dict:
    rng = random.Random(payload * 64 + width)
    memory = ReadMemory(MEMORY_BASE, rng.randbytes(MEMORY_BYTES), width)
    associations = [Association(index, MULPDU, 1000 * (index + 1), local_port=5000 + index) for index in (0, 1)]
    first_ssn = {(a, s): 1 for a in (0, 1) for s in range(STREAMS_PER_ASSOCIATION)}
    count = messages_for(payload, load)

    def address(i: int) -> int:   # a new byte alignment each time
        return MEMORY_BASE + (i * (payload + 3)) % (MEMORY_BYTES - payload)

    works, responses = [], []
    if load == "write":
        works = [Work(WorkOpcode.RDMA_WRITE, 0, 0, address(i), payload, stag=0x100, to=i * payload, wr_id=i)
                 for i in range(count)]
    else:
        responses = [ReadResponse(i % 2, (i // 2) % STREAMS_PER_ASSOCIATION, address(i), payload, sink_stag=0x200,
                                  sink_to=i * payload, msn=1 + i // (2 * STREAMS_PER_ASSOCIATION))
                     for i in range(count)]
    frames = count * segments(payload)
    run = simulate(width, associations, first_ssn, works, memory, frames, responses=responses, ird=IRD)
    if len(run.frames) < frames:
        raise RuntimeError(f"W = {width}, {payload} B {load}: {len(run.frames)} of {frames} frames left")
    beats = run.beat_cycles
    span = beats[-1] - beats[0] + 1
    wire = sum(len(frame) for frame in run.frames)
    doorbell = run.first_work_cycle if load == "write" else run.first_response_cycle
    return {"load": load, "width": width, "payload": payload, "messages": count, "frames": len(run.frames),
            "frame_bytes": max(len(frame) for frame in run.frames), "fraction": wire / (span * width),
            "beats_per_cycle": len(beats) / span, "stalls": span - len(beats),
            "latency": beats[0] - doorbell}


def run_tx_bench(widths: tuple[int, ...] = (8, 64), payloads: tuple[int, ...] = PAYLOADS,
                 loads: tuple[str, ...] = LOADS, synth: bool = False, target_mhz: float = 156.25) -> list[dict]:
    print(f"transmit engine (RTL, Amaranth simulator): messages back to back, MULPDU {MULPDU} (path MTU 1500), "
          "memory answering a cycle later, network always ready, each DATA chunk acknowledged as it leaves")
    header = (f"{'load':<14} {'W':>3} {'payload':>8} {'msgs':>5} {'frames':>7} {'frame B':>8} "
              f"{'bytes/cycle/W':>14} {'beats/cycle':>12} {'stalls':>7} {'doorbell->1st beat':>19}")
    print(header)
    print("-" * len(header), flush=True)
    rows = []
    for load in loads:
        for width in widths:
            for payload in payloads:
                row = run_row(width, payload, load)
                rows.append(row)
                print(f"{load:<14} {width:>3} {payload:>8} {row['messages']:>5} {row['frames']:>7} "
                      f"{row['frame_bytes']:>8} {row['fraction']:>14.3f} {row['beats_per_cycle']:>12.3f} "
                      f"{row['stalls']:>7} {row['latency']:>19}", flush=True)
    if not synth:
        print("(synthesis: rnic bench tx --synth, or scripts/synth_report.py --blocks tx_engine)")
        return rows
    from hdl.tx.engine import TxEngine
    from sim.commands.synthesis_table import print_synthesis_table

    print_synthesis_table(TxEngine, "tx_engine", widths, target_mhz)
    return rows
