"""cocotb module: the RNIC top level's transmit side under Verilator, driven by given requests.

The caller (a pytest test or a bench) builds the work and the expected
frames; this module only drives the gateware and records what it sends.
Parameters (:func:`sim.runner.test_parameters`):

* ``width_bytes``; ``local_mac`` (hex), ``local_ip``;
* ``memory_base``, ``memory_seed``, ``memory_size``: the host memory the engine reads,
  ``memory_size`` bytes of ``random.Random(memory_seed).randbytes`` (the caller draws the same);
* ``associations``: ``abi.tx.tx_association_write_layout`` rows; ``streams``:
  ``tx_stream_write_layout`` rows;
* ``works``, ``responses``, ``controls``: records for ``s_axis_wr``,
  ``s_axis_rr`` and ``s_axis_ctl``, each port's in order, the work first and
  the others ``requests_after`` cycles later (0);
* ``frames``, ``refused``, ``completions``: how many frames, refused Read
  Requests and completions to wait for;
* ``read_stall``, ``network_stall``: back-pressure on AR/R and on ``m_axis``;
* ``output``: where the JSON results go: ``frames`` (hex), ``refused``
  and ``completions`` (records), ``cycles``.

The host's SCTP is played as a peer that acknowledges at once: every frame
whose first chunk is DATA is answered with an ACK of its TSN on
``s_axis_tsn`` (RFC 4960 6.2), so the ring retires it and its request
completes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, with_timeout

from abi.tx import TsnOpcode
from sim.runner import test_parameters
from sim.tb.rnic_tb import RnicTB
from sim.tb.tx_engine import data_tsn


@cocotb.test()
async def transmit(dut):
    p = test_parameters()
    tb = RnicTB(dut, p["width_bytes"], memory_bytes=p.get("memory_bytes", 1 << 22), seed=p.get("seed", 1))
    await tb.reset()
    tb.ram.write(p["memory_base"], random.Random(p["memory_seed"]).randbytes(p["memory_size"]))
    await tb.set_addresses(bytes.fromhex(p["local_mac"]), p["local_ip"])
    for row in p["associations"]:
        await tb.write_tx_table("tx_association", row)
    for row in p["streams"]:
        await tb.write_tx_table("tx_stream", row)
    tb.set_read_stall(p.get("read_stall", 0.0))
    tb.set_network_stall(p.get("network_stall", 0.0))
    by_port = {row["local_port"]: row["index"] for row in p["associations"]}
    start = tb.cycle

    frames, refused, completions = [], [], []

    async def wire():
        while True:
            frame = await tb.next_frame()
            frames.append(frame)
            found = data_tsn(frame)
            if found is not None and found[0] in by_port:
                await tb.post_tsn({"opcode": int(TsnOpcode.ACK), "association": by_port[found[0]], "tsn": found[1]})

    async def refusals():
        while True:
            refused.append(await tb.next_refused_read())

    async def completed():
        while True:
            completions.append(await tb.next_completion())

    for task in (wire, refusals, completed):
        cocotb.start_soon(task())
    for fields in p.get("works", []):
        await tb.post_work(fields)
    await ClockCycles(dut.clk, p.get("requests_after", 0))
    for fields in p.get("controls", []):
        await tb.post_control(fields)
    for fields in p.get("responses", []):
        await tb.post_read_response(fields)

    async def done():
        while (len(frames) < p["frames"] or len(refused) < p.get("refused", 0)
               or len(completions) < p.get("completions", 0)):
            await ClockCycles(dut.clk, 16)
        await ClockCycles(dut.clk, 200)   # anything more would show

    width, lengths = p["width_bytes"], [r["length"] for r in p.get("works", []) + p.get("responses", [])]
    budget = 20_000 + 300 * p["frames"] + 16 * sum(lengths) // width   # cycles, with room for the stalls
    try:
        await with_timeout(done(), budget * 10, "ns")   # a 100 MHz clock
    finally:   # what came out, also when it was not everything (the caller's failure shows it)
        Path(p["output"]).write_text(json.dumps({
            "frames": [frame.hex() for frame in frames], "refused": refused, "completions": completions,
            "cycles": tb.cycle - start}))
