"""A peer process whose SCTP is usrsctp (`sim.usrsctp_host`: its DDP and RDMAP the model's) on a real UDP socket
(RFC 6951), and a device of this process over the model's SCTP: the association comes up with both sides'
adaptation indications (RFC 5043 5.1, 11.1: no DDP connection otherwise), and DDP segments cross both ways:
RDMA Writes to the usrsctp side, RDMA Read Responses from it, every byte checked."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from driver import SGE, AccessFlags, CMEventType, QPCap, SendWR, WCOpcode, WROpcode, open_device
from tests.network.peer_program import FAST

ROOT = Path(__file__).resolve().parents[2]
SIZES = (1, 1400, 70000)


@pytest.mark.usefixtures("usrsctp_library")
def test_ddp_segments_both_ways_with_a_usrsctp_process_over_udp() -> None:
    peer = subprocess.Popen([sys.executable, "-m", "tests.network.peer_program", "usrsctp", "0"], cwd=ROOT,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)

    async def main():
        line = await asyncio.to_thread(peer.stdout.readline)
        assert line.startswith("listening ") and line.split()[2] == "UsrsctpSctp", line + peer.stderr.read()
        device = open_device("udp:127.0.0.1:0", **FAST)
        pd, cq = device.alloc_pd(), device.create_cq()
        region = pd.reg_mr(1 << 18, AccessFlags.LOCAL_WRITE)
        cm_id = device.create_id()
        qp = cm_id.create_qp(pd, cq, cap=QPCap(max_send_wr=16, max_send_sge=1))
        cm_id.connect(("127.0.0.1", int(line.split()[1])))
        established = await cm_id.get_cm_event(timeout=30)
        assert established.event_type is CMEventType.ESTABLISHED, established
        remote = json.loads(established.private_data)
        results = []
        for index, size in enumerate(SIZES):
            data = random.Random(size).randbytes(size)
            region.write(data)
            qp.post_send(SendWR(2 * index, WROpcode.RDMA_WRITE, [SGE(region.buf, size, region.lkey)],
                                remote_addr=remote["addr"], rkey=remote["rkey"]))
            qp.post_send(SendWR(2 * index + 1, WROpcode.RDMA_READ, [SGE(region.buf + (1 << 17), size, region.lkey)],
                                remote_addr=remote["addr"], rkey=remote["rkey"]))
            completions = await cq.wait(2, timeout=30)
            results.append(([(wc.wr_id, wc.opcode, wc.ok) for wc in completions], region.read(size, 1 << 17) == data))
        statistics = device.statistics()
        device.fabric.backend.close()
        return results, statistics

    try:
        results, statistics = asyncio.run(main())
    finally:
        peer.kill()
    for index, (completions, read_back_exactly) in enumerate(results):
        assert completions == [(2 * index, WCOpcode.RDMA_WRITE, True), (2 * index + 1, WCOpcode.RDMA_READ, True)]
        assert read_back_exactly   # written to the usrsctp side, read back from it: both ways, every byte
    assert statistics.dropped_bad_checksum == 0 and statistics.dropped_by_association == 0
