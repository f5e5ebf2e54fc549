"""Per-message reports (abi.rx.report_withheld) between two EngineRnic hosts over the receive engine's model, the
engines SACKing the peer's DATA (the engine backend's hosts): a 16 KiB RDMA Write, Send and Read each cost the
receiving engine one report record, the message's last segment's (RFC 5041 5.4: its completion), where a record
per segment (``segment_reports``) costs one per DDP segment (RFC 5041 5.2: a message cut into segments of at most
MULPDU bytes, headers included). Completions are the same either way, and so is the association's close (RFC 4960
9.2: the SHUTDOWN's Cumulative TSN Ack covers the chunks placed without a record)."""

import random

import pytest

from model.ddp.memory import Access, SparseMemory
from model.ddp.segment import TAGGED_HEADER_LENGTH, UNTAGGED_HEADER_LENGTH
from model.rnic.engine_host import EngineRnic
from model.rnic.events import Closed, ReadCompletion, ReceiveCompletion, WriteArrived
from model.rnic.link import Link, Side
from model.rnic.offload import ModelEngine
from model.rnic.pair import IPS, MACS, HostPair, host_config

SIZE = 16384
SOURCE, SINK = 0x200000, 0x300000
#: RDMAP's header in the payload of a Read Request (RFC 5040 4.4): sink STag, TO, size, source STag, TO.
READ_REQUEST_LENGTH = 28


class CountingEngine(ModelEngine):
    """The receive engine's model, counting the report records it hands its host."""

    records = 0

    def execute(self, command):
        output = super().execute(command)
        if output is not None:
            self.records += len(output.reports)
        return output


def engine_pair(segment_reports: bool) -> HostPair:
    hosts = {}
    for side in Side:
        memory = SparseMemory()
        hosts[side] = EngineRnic(host_config(side, engine_sacks=True), memory, random.Random(11 + (side is Side.B)),
                                 CountingEngine(MACS[side], IPS[side], memory, segment_reports=segment_reports))
    pair = HostPair(hosts, Link())
    pair.connect()
    pair.open_stream(0)
    return pair


def segments(size: int, header: int, mulpdu: int) -> int:
    """DDP segments of a message of `size` bytes: each at most MULPDU bytes with its header (RFC 5041 5.2)."""
    return max(1, -(-size // (mulpdu - header)))


@pytest.mark.parametrize("segment_reports", [False, True])
def test_a_16_kib_write_send_and_read_cost_one_record_each_per_message(segment_reports):
    pair = engine_pair(segment_reports)
    a, b = pair.a, pair.b
    mulpdu = a._association.mulpdu
    data = bytes(i % 251 for i in range(SIZE))
    a.memory.write(SOURCE, data)
    b.memory.write(SOURCE, data[::-1])
    sink_b = b.register_memory(SINK, SIZE, Access.REMOTE_WRITE | Access.LOCAL_WRITE)
    source_b = b.register_memory(SOURCE, SIZE, Access.REMOTE_READ)
    sink_a = a.register_memory(SINK, SIZE, Access.LOCAL_WRITE)
    engine_a, engine_b = a.engine, b.engine
    engine_a.records = engine_b.records = 0

    a.post_write(0, sink_b, 0, SOURCE, SIZE)
    pair.run_until(lambda: pair.count(Side.B, WriteArrived) == 1)
    tagged = segments(SIZE, TAGGED_HEADER_LENGTH, mulpdu)
    assert engine_b.records == (tagged if segment_reports else 1)
    assert [(e.stag, e.length) for e in pair.of(Side.B, WriteArrived)] == [(sink_b, SIZE)]

    b.post_recv(0, SINK + SIZE, SIZE)
    a.post_send(0, SOURCE, SIZE)
    pair.run_until(lambda: pair.count(Side.B, ReceiveCompletion) == 1)
    untagged = segments(SIZE, UNTAGGED_HEADER_LENGTH, mulpdu)
    assert engine_b.records == (tagged + untagged if segment_reports else 2)
    assert [(e.address, e.length) for e in pair.of(Side.B, ReceiveCompletion)] == [(SINK + SIZE, SIZE)]
    assert b.memory.read(SINK, SIZE) == data and b.memory.read(SINK + SIZE, SIZE) == data

    wr_id = a.post_read(0, sink_a, 0, source_b, 0, SIZE)
    pair.run_until(lambda: pair.count(Side.A, ReadCompletion) == 1)
    # The Read Request is one segment on QN 1 (B's record); the Read Response the Read's size, tagged (A's).
    assert engine_b.records == (tagged + untagged + segments(READ_REQUEST_LENGTH, UNTAGGED_HEADER_LENGTH, mulpdu)
                                if segment_reports else 3)
    assert engine_a.records == (tagged if segment_reports else 1)
    assert [(e.wr_id, e.length) for e in pair.of(Side.A, ReadCompletion)] == [(wr_id, SIZE)]
    assert a.memory.read(SINK, SIZE) == data[::-1]

    # B's association learned every TSN A sent, named or counted: its SHUTDOWN ACK answers A's SHUTDOWN.
    tracker = b._association._tracker
    assert tracker.cumulative_tsn == tracker.highest_received and not tracker.has_gaps
    finished = pair.close()
    assert all(isinstance(event, Closed) for event in finished.values()), finished
