"""Tables at scale (issue 30 item 5): every queue pair and every region a device has, traffic on a random subset,
and isolation among them.

The engine backend mirrors an `hdl.rnic.Rnic` built with the same tables: by default the ECPIX-5 build's (4 DDP
streams, 16 region rows, 8 posted buffers per queue) and here also the ECPIX-5's target for issue 30 (256 streams,
1024 region rows, 16 buffers per queue).  The limits are the device's own (`query_device()`): one queue pair more
finds every DDP stream in use, one region more raises `OutOfResources`.  The expectations are the RFCs': a Write
lands exactly where its STag and Tagged Offset say (RFC 5041 4.2, 8.3.1); a Write with another protection
domain's STag, with a stale key or past a region's end gets RFC 5041 7.2's Tagged Buffer Error (DDP layer 1,
type 0x1: codes 0x02, 0x00, 0x01) and places nothing, and only its own queue pair ends (RFC 5043 8: a DDP stream
per queue pair).  Memory is compared byte for byte over every region and the pages between them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from driver import (SGE, CMEventType, ConnParam, InvalidArgument, OutOfResources, SendWR, WCStatus, WROpcode,
                    open_fabric, run)
from model.ddp.negotiation import LocalResources
from tests.driver.harness import ALL_ACCESS

DDP = 1
REGION_BYTES = 4096
SOURCE_BYTES = 1 << 16
"""The client's region: this many bytes to write from, as many again where its Reads land."""
ECPIX5_TABLES = {"streams": 256, "regions": 1024, "buffers_per_queue": 16}
SHAPES = [pytest.param({}, id="default"), pytest.param(ECPIX5_TABLES, id="ecpix5")]


@dataclass
class Scale:
    """Every queue pair the devices have (the client writes, the server is written) and every region the server
    has room for, each in one of two protection domains."""

    fabric: object
    server_pds: list
    client_mr: object
    server_qps: list = field(default_factory=list)   # (qp, pd index) per pair
    client_ids: list = field(default_factory=list)
    client_cqs: list = field(default_factory=list)
    regions: list = field(default_factory=list)       # (mr, pd index)
    extra_connect: object = None
    extra_region: str = ""

    def server_memory(self) -> bytes:
        """The server's memory from its first region's start to its last one's end: regions and the pages between."""
        low = min(mr.buf for mr, _ in self.regions)
        high = max(mr.buf + mr.length for mr, _ in self.regions)
        return self.fabric.devices[0].backend.read(low, high - low)


async def open_everything(fabric) -> Scale:
    server_device, client_device = fabric.devices
    attr = server_device.query_device()
    server_pds = [server_device.alloc_pd(), server_device.alloc_pd()]
    client_pd = client_device.alloc_pd()
    scale = Scale(fabric, server_pds, client_pd.reg_mr(2 * SOURCE_BYTES, ALL_ACCESS))
    listener = server_device.create_id()
    listener.listen()
    server_cq = server_device.create_cq(1 << 16)
    for pair in range(attr.max_qp):
        cq = client_device.create_cq(64)
        cm_id = client_device.create_id()
        cm_id.create_qp(client_pd, cq)
        cm_id.connect(server_device.address, ConnParam())
        request = await listener.get_cm_event()
        assert request.event_type is CMEventType.CONNECT_REQUEST, (pair, request)
        scale.server_qps.append((request.id.create_qp(server_pds[pair % 2], server_cq), pair % 2))
        request.id.accept()
        for end in (cm_id, request.id):
            event = await end.get_cm_event()
            assert event.event_type is CMEventType.ESTABLISHED, (pair, event)
        scale.client_ids.append(cm_id)
        scale.client_cqs.append(cq)
    # One queue pair more: every DDP stream of the association is in use (RFC 5043 8).
    extra = client_device.create_id()
    extra.create_qp(client_pd, client_device.create_cq(4))
    extra.connect(server_device.address, ConnParam())
    scale.extra_connect = await extra.get_cm_event()
    for row in range(attr.max_mr):
        pd = row % 2
        scale.regions.append((server_pds[pd].reg_mr(REGION_BYTES, ALL_ACCESS), pd))
    try:
        server_pds[0].reg_mr(REGION_BYTES, ALL_ACCESS)
    except OutOfResources as error:
        scale.extra_region = str(error)
    return scale


def fill(scale: Scale, rng: random.Random) -> bytearray:
    """Every region filled with random bytes; the server's memory as expected from now on."""
    for mr, _ in scale.regions:
        mr.write(rng.randbytes(mr.length))
    return bytearray(scale.server_memory())


def write(scale: Scale, pair: int, wr_id: int, length: int, address: int, rkey: int, source_offset: int = 0) -> None:
    """A Write, then a one-byte Read of its first byte: the Read's response follows the Write's placement on the
    stream (RFC 5040 5.3: a Read Request after a Write is processed after it), so its completion says the Write
    landed."""
    mr = scale.client_mr
    scale.client_ids[pair].qp.post_send([
        SendWR(wr_id, WROpcode.RDMA_WRITE, [SGE(mr.buf + source_offset, length, mr.lkey)],
               remote_addr=address, rkey=rkey),
        SendWR(wr_id, WROpcode.RDMA_READ, [SGE(mr.buf + SOURCE_BYTES + pair, 1, mr.lkey)],
               remote_addr=address, rkey=rkey)])


@pytest.mark.parametrize("tables", SHAPES)
def test_every_queue_pair_and_region_then_traffic_on_a_random_subset(tables):
    """Open the device's every queue pair and register its every region (one more of each is refused), then
    Writes from a random subset of the pairs, each into a random region of its own protection domain at a random
    offset: every byte lands where its STag and TO say and nothing else changes."""
    rng = random.Random(30)

    async def main(fabric):
        scale = await open_everything(fabric)
        attrs = [device.query_device() for device in fabric.devices]
        expected = fill(scale, rng)
        low = min(mr.buf for mr, _ in scale.regions)
        pairs = rng.sample(range(len(scale.server_qps)), min(32, len(scale.server_qps)))
        source = rng.randbytes(SOURCE_BYTES)
        scale.client_mr.write(source)
        for wr_id, pair in enumerate(pairs):
            pd = scale.server_qps[pair][1]
            mr, _ = rng.choice([region for region in scale.regions if region[1] == pd])
            length = rng.randint(1, mr.length)
            offset = rng.randint(0, mr.length - length)
            at = rng.randint(0, SOURCE_BYTES - length)
            write(scale, pair, wr_id, length, mr.buf + offset, mr.rkey, at)
            start = mr.buf + offset - low
            expected[start:start + length] = source[at:at + length]
        statuses = []
        for pair in pairs:
            statuses += [(wc.opcode.name, wc.status) for wc in await scale.client_cqs[pair].wait(2)]
        return attrs, scale, statuses, bytes(expected)

    attrs, scale, statuses, expected = run(main, "engine", **tables)
    assert attrs[0].max_qp == attrs[1].max_qp == tables.get("streams", 4)
    assert attrs[0].max_mr == tables.get("regions", 16) - 1
    assert len(scale.server_qps) == attrs[0].max_qp and len(scale.regions) == attrs[0].max_mr
    assert len({mr.rkey for mr, _ in scale.regions}) == len(scale.regions)
    assert scale.extra_connect.event_type is CMEventType.CONNECT_ERROR
    assert "DDP streams are in use" in scale.extra_connect.reason
    assert "region" in scale.extra_region
    assert statuses == [("RDMA_WRITE", WCStatus.SUCCESS), ("RDMA_READ", WCStatus.SUCCESS)] * (len(statuses) // 2)
    assert len(statuses) == 2 * min(32, attrs[0].max_qp)
    assert scale.server_memory() == expected


@pytest.mark.parametrize("tables", SHAPES)
def test_isolation_among_every_queue_pair_and_region(tables):
    """With every pair open and every region registered: a Write with a region of the other protection domain
    (RFC 5041 7.2, DDP 0x1/0x02), with the STag of a deregistered region whose row now holds another region
    (0x1/0x00: its key was drawn afresh), and one ending past its region (0x1/0x01) each fail, place nothing
    and end their own queue pair only: another pair's Write then lands."""
    rng = random.Random(5042)

    async def main(fabric):
        scale = await open_everything(fabric)
        stale_mr, stale_pd = scale.regions.pop(rng.randrange(len(scale.regions)))
        stale = stale_mr.rkey
        stale_mr.dereg()
        scale.regions.append((scale.server_pds[stale_pd].reg_mr(REGION_BYTES, ALL_ACCESS), stale_pd))
        expected = fill(scale, rng)
        scale.client_mr.write(rng.randbytes(SOURCE_BYTES))
        victims = rng.sample(range(len(scale.server_qps)), 4)
        other_pd, stale_pair, past_end, healthy = victims

        def region_of(pd: int):
            return rng.choice([mr for mr, region_pd in scale.regions if region_pd == pd])

        foreign = region_of(1 - scale.server_qps[other_pd][1])
        write(scale, other_pd, 1, 64, foreign.buf, foreign.rkey)
        fresh = scale.regions[-1][0]
        write(scale, stale_pair, 2, 64, fresh.buf, stale)
        own = region_of(scale.server_qps[past_end][1])
        write(scale, past_end, 3, 100, own.buf + own.length - 50, own.rkey)
        failures = {}
        for pair in (other_pd, stale_pair, past_end):
            completions = await scale.client_cqs[pair].wait(2)
            failures[pair] = [(wc.status, tuple(wc.error)) for wc in completions if not wc.ok]
            event = await scale.client_ids[pair].get_cm_event()
            failures[pair].append(event.event_type)
        untouched = scale.server_memory() == bytes(expected)
        target = region_of(scale.server_qps[healthy][1])
        write(scale, healthy, 4, 32, target.buf + 8, target.rkey)
        healthy_completions = [(wc.opcode.name, wc.status) for wc in await scale.client_cqs[healthy].wait(2)]
        low = min(mr.buf for mr, _ in scale.regions)
        expected[target.buf + 8 - low:target.buf + 40 - low] = scale.client_mr.read(32)
        return (stale, fresh.rkey, failures, (other_pd, stale_pair, past_end), untouched, healthy_completions,
                scale.server_memory() == bytes(expected))

    stale, fresh, failures, (other_pd, stale_pair, past_end), untouched, healthy, landed = run(main, "engine",
                                                                                              **tables)
    assert stale >> 8 == fresh >> 8 and stale != fresh   # the freed row, another key (RFC 5042 5.1)
    error = WCStatus.REM_ACCESS_ERR
    assert failures[other_pd] == [(error, (DDP, 0x1, 0x02)), CMEventType.DISCONNECTED]
    assert failures[stale_pair] == [(error, (DDP, 0x1, 0x00)), CMEventType.DISCONNECTED]
    assert failures[past_end] == [(error, (DDP, 0x1, 0x01)), CMEventType.DISCONNECTED]
    assert untouched, "a refused Write changed the server's memory"
    assert healthy == [("RDMA_WRITE", WCStatus.SUCCESS), ("RDMA_READ", WCStatus.SUCCESS)]
    assert landed


@pytest.mark.parametrize("options, message", [
    ({"regions": 1}, "regions 1 is not within 2..16777216"),
    ({"regions": 1 << 25}, "regions 33554432 is not within 2..16777216"),
    ({"regions": "16"}, "regions must be an int"),
    ({"buffers_per_queue": 12}, "buffers_per_queue 12 is not a power of two"),
    ({"buffers_per_queue": 1}, "buffers_per_queue 1 is not within 2..65536"),
    ({"streams": 0x10000}, "streams 65536 is not within 1..65535"),
    # 1024 rows take 10 of the STag's 32 bits (abi.rx.check_key_bits)
    ({"regions": 1024, "key_bits": 23}, "key_bits 23 is not within 8..22"),
    ({"key_bits": 23, "regions": 1024}, "key_bits 23 is not within 8..22"),
    ({"buffers_per_queue": 4, "resources": LocalResources(ird=4, ord=4)}, "a stream keeps IRD \\+ 1 Read Request"),
])
def test_tables_the_engine_cannot_be_built_with_are_refused(options, message):
    with pytest.raises(InvalidArgument, match=message):
        open_fabric("engine", **options)


def test_the_engine_s_default_ird_and_ord_follow_its_buffers():
    """A stream keeps IRD + 1 Read Request buffers posted (RFC 5040 4.2): with 16 per queue, IRD and ORD 15."""
    attr = open_fabric("engine", buffers_per_queue=16).devices[0].query_device()
    assert (attr.max_qp_rd_atom, attr.max_qp_init_rd_atom) == (15, 15)
    attr = open_fabric("engine").devices[0].query_device()
    assert (attr.max_qp_rd_atom, attr.max_qp_init_rd_atom) == (7, 7)


@pytest.mark.parametrize("backend", ["soft", "board"])
def test_only_the_engine_backend_takes_its_tables(backend):
    with pytest.raises(InvalidArgument, match="regions"):
        open_fabric(backend, regions=64, serial="x", ethernet="y")
