"""hdl.rx.region_table.RegionTable in Amaranth's simulator: every fault flag and the containment property."""

import gc
import random

import pytest
from amaranth.back import rtlil
from amaranth.sim import Simulator

from hdl.rx.region_table import RegionTable

TO_LIMIT = 1 << 64


def reference(row, index, entries, request, key_bits=8):
    """Each flag as RFC 5041 7.1 (tagged items 1-5) and 8.2 define it, unprioritised; STag = index << key_bits |
    key (8.2 leaves the structure to the implementation)."""
    end = request["to"] + request["length"]
    return {
        "invalid": index >= entries or not row["valid"] or row["key"] != request["stag"] % (1 << key_bits),
        "pd": row["pd"],
        "stream_mismatch": bool(row["stream_bound"]) and (row["association"], row["stream_id"]) !=
        (request["association"], request["stream_id"]),
        "access_denied": not (row["local_write"] if request["local_write"] else row["remote_write"]),
        "below_base": request["to"] < row["base_to"],
        "past_end": end > row["base_to"] + row["length"],
        "wrap": end >= TO_LIMIT,
        "address": (row["host_address"] + request["to"] - row["base_to"]) % TO_LIMIT,
    }


@pytest.mark.parametrize("key_bits", [8, 12, 26])
def test_flags_and_containment(key_bits):
    """Random rows and boundary TOs; every accepted access lies inside its region (RFC 5041 8.3.1 item 3). A
    wrong key differs from the row's in one bit, any of the key's ``key_bits``."""
    rng = random.Random(11)
    entries = 6
    dut = RegionTable(entries, key_bits=key_bits)
    rows = []
    for _ in range(entries):
        length = rng.choice([1, 16, 4096, rng.randrange(1, 1 << 63)])
        base = rng.choice([0, rng.randrange(1 << 50), TO_LIMIT - length, TO_LIMIT - length + 5])
        rows.append({
            "valid": rng.random() > 0.15, "key": rng.randrange(1 << key_bits), "pd": rng.randrange(4),
            "stream_bound": rng.random() < 0.3, "association": rng.randrange(2), "stream_id": rng.randrange(2),
            "remote_read": rng.randrange(2), "remote_write": rng.random() < 0.8, "local_write": rng.random() < 0.8,
            "base_to": base, "length": length, "host_address": rng.randrange(1 << 62),
        })
    requests = []
    for _ in range(300):
        index = rng.choice(list(range(entries)) + [entries, 1 << (31 - key_bits)])
        row = rows[index] if index < entries else rows[0]
        length = rng.choice([0, 1, 8, 100])
        base, end = row["base_to"], row["base_to"] + row["length"]
        to = rng.choice([base - 1, base, end - length, end - length + 1, TO_LIMIT - length,
                         TO_LIMIT - length - 1, rng.randrange(TO_LIMIT)]) % TO_LIMIT
        key = row["key"] if rng.random() < 0.9 else row["key"] ^ 1 << rng.randrange(key_bits)
        requests.append({"stag": index << key_bits | key, "to": to, "length": length, "association": rng.randrange(2),
                         "stream_id": rng.randrange(2), "local_write": rng.randrange(2)})
    results = []

    async def bench(ctx):
        ctx.set(dut.hold, 1)   # a held write waits
        ctx.set(dut.write.valid, 1)
        ctx.set(dut.write.payload, {"index": 0, "entry": rows[0]})
        assert not ctx.get(dut.write.ready)
        ctx.set(dut.hold, 0)
        for index, row in enumerate(rows):
            ctx.set(dut.write.payload, {"index": index, "entry": row})
            await ctx.tick()
        ctx.set(dut.write.valid, 0)
        ctx.set(dut.en, 1)
        for cycle, request in enumerate(requests + [requests[0]] * RegionTable.latency):
            ctx.set(dut.lookup, request)
            # Stall now and then: a frozen pipeline keeps its state.
            while rng.random() < 0.2:
                ctx.set(dut.en, 0)
                await ctx.tick()
                ctx.set(dut.en, 1)
            await ctx.tick()
            if cycle >= RegionTable.latency - 1:
                results.append(ctx.get(dut.result))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    accepted = 0
    for request, result in zip(requests, results, strict=False):
        index = request["stag"] >> key_bits
        row = rows[index] if index < entries else rows[0]
        expected = reference(row, index, entries, request, key_bits)
        got = {name: int(getattr(result, name)) for name in expected}
        if index >= entries:   # no row: only `invalid` means anything
            assert got["invalid"] == 1
            continue
        assert got == {name: int(value) for name, value in expected.items()}, (request, index)
        if not any(got[name] for name in ("invalid", "stream_mismatch", "access_denied", "below_base", "past_end",
                                          "wrap")) and request["length"]:
            accepted += 1
            start = got["address"] - row["host_address"]
            assert 0 <= start and start + request["length"] <= row["length"]
    assert len(results) == len(requests) + 1 and accepted > 10


@pytest.mark.parametrize("key_bits, entries, limit", [(7, 16, "at least 8"), (29, 16, "at most 32"),
                                                      (25, 256, "at most 32"), (8, (1 << 24) + 1, "at most 32")])
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")   # a refused table is never elaborated
def test_a_key_width_outside_its_range_is_refused(key_bits, entries, limit):
    """At least 8 key bits (RFC 5042 5.1: STags hard to guess), and index bits + key bits within the STag's 32."""
    with pytest.raises(ValueError, match=limit) as refused:
        RegionTable(entries, key_bits=key_bits)
    del refused
    gc.collect()   # the refused table goes here, under this test's filter, not in a later test


@pytest.mark.parametrize("entries, key_bits", [(16, 28), (256, 24)])
def test_the_widest_keys_fit_the_stag(entries, key_bits):
    table = RegionTable(entries, key_bits=key_bits)
    assert len(table.write.payload.entry.key) == key_bits
    assert rtlil.convert(table)
