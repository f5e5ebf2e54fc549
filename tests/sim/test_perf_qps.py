"""`rnic perf --qps N` (sim/commands/perf.py): N queue pairs measured at once, a row per pair and one for all.

The independent expectations: after the concurrent run, each pair's sink
region holds exactly the bytes its source's region holds (read back from
both regions, not from the checker), the pairs' bytes all differ, and the
tables' per-pair bytes are size x iterations and sum to the row "all".  A
pair whose Writes land in another pair's region fails the run, named.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from driver import LinkConfig, open_fabric
from sim.cli import main
from sim.commands import perf
from sim.commands.perf import PerfFailed, PerfPlan, rows_from_json

PAIR_ROW = re.compile(r"^\s+(\d+|all)\s+(\d+)\s+(\d+)\s+(\d+)((?:\s+[\d.e+-]+){5})$")
"""A bandwidth row of a multi-pair table: pair, #bytes, #iterations, bytes moved, the five figures (of link third)."""
LATENCY_ROW = re.compile(r"^\s+(\d+|all)\s+(\d+)\s+(\d+)((?:\s+[\d.]+){10})$")


def pair_rows(out: str, pattern: re.Pattern = PAIR_ROW) -> list[tuple[str, int, int, int]]:
    """(pair, #bytes, #iterations, bytes moved or 0) of every row `pattern` matches."""
    rows = []
    for line in out.splitlines():
        match = pattern.match(line)
        if match:
            moved = int(match.group(4)) if pattern is PAIR_ROW else 0
            rows.append((match.group(1), int(match.group(2)), int(match.group(3)), moved))
    return rows


@pytest.mark.parametrize("backend", ["soft", "engine"])
@pytest.mark.parametrize("test", ["write_bw", "send_bw", "read_bw"])
def test_four_pairs_print_a_row_each_and_their_sum(backend, test, capsys):
    sizes, iters = (64, 3000), 3
    assert main(["perf", "--backend", backend, "--qps", "4", "--test", test, "--sizes", *map(str, sizes),
                 "--iters", str(iters)]) == 0
    out = capsys.readouterr().out
    assert "4 queue pairs at once" in out
    rows = pair_rows(out)
    assert [(pair, size) for pair, size, _, _ in rows] == [
        (pair, size) for size in sizes for pair in ("0", "1", "2", "3", "all")]
    for at in range(0, len(rows), 5):
        *each, whole = rows[at:at + 5]
        size = whole[1]
        assert all(n == iters and moved == size * iters for _, _, n, moved in each)
        assert whole[2] == 4 * iters and whole[3] == sum(moved for *_, moved in each) == 4 * size * iters


def test_four_pairs_ping_pong_at_once_and_the_whole_has_every_sample(capsys):
    assert main(["perf", "--backend", "soft", "--qps", "4", "--test", "send_lat", "--sizes", "64", "--iters",
                 "3"]) == 0
    rows = pair_rows(capsys.readouterr().out, LATENCY_ROW)
    assert [(pair, n) for pair, _, n, _ in rows] == [("0", 3), ("1", 3), ("2", 3), ("3", 3), ("all", 12)]


def run_pairs(backend: str, test: str, size: int, qps: int, cross_wire: bool = False):
    """`qps` pairs connected by `perf.connect_pairs` and `test` run on them at once; `cross_wire`: pair 1's
    sink is given pair 0's region, so that pair 1's source targets pair 0's STag (a broken pair)."""
    fabric = open_fabric(backend, link=LinkConfig())

    async def program():
        pairs = await perf.connect_pairs(fabric, size, 0, qps)
        if cross_wire:
            sink, source = pairs[1]
            pairs[1] = (dataclasses.replace(sink, mr=pairs[0][0].mr, in_offset=pairs[0][0].in_offset), source)
        rows = await perf.measure_pairs(perf.Clock(fabric), pairs, test, size, 3)
        return pairs, rows
    return fabric.backend.run(program)


@pytest.mark.parametrize("backend", ["soft", "engine"])
@pytest.mark.parametrize("test", ["write_bw", "send_bw", "read_bw"])
def test_each_sink_region_holds_its_own_source_s_bytes(backend, test):
    size = 2000
    pairs, rows = run_pairs(backend, test, size, 4)
    assert [row.pair for row in rows] == [0, 1, 2, 3, None] and {row.pairs for row in rows} == {4}
    sent = [source.mr.read(size, 0) for _, source in pairs]
    landed = [sink.mr.read(size, sink.in_offset) for sink, _ in pairs]
    assert landed == sent
    assert len(set(sent)) == 4 and all(any(data) for data in sent)


def test_a_pair_writing_into_another_pair_s_region_fails_the_run():
    with pytest.raises(PerfFailed, match=r"^pair [01]: write_bw 2000: the bytes that landed differ"):
        run_pairs("soft", "write_bw", 2000, 4, cross_wire=True)


def test_the_command_reports_a_broken_pair_as_a_failure(monkeypatch, capsys):
    connect_pairs = perf.connect_pairs

    async def cross_wired(fabric, largest, sink_index=0, qps=1):
        pairs = await connect_pairs(fabric, largest, sink_index, qps)
        sink, source = pairs[2]
        pairs[2] = (dataclasses.replace(sink, mr=pairs[3][0].mr), source)
        return pairs
    monkeypatch.setattr(perf, "connect_pairs", cross_wired)
    assert main(["perf", "--qps", "4", "--test", "write_bw", "--sizes", "500", "--iters", "2"]) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(r"rnic perf: PerfFailed: pair [23]: write_bw 500: the bytes that landed differ[^\n]*\n", err)


def test_more_pairs_than_the_board_s_streams_fail_before_anything_is_timed(capsys):
    """The board's build has 4 DDP streams (its stream table): a fifth pair fails before anything is timed."""
    assert main(["perf", "--backend", "board", "--qps", "5", "--test", "write_bw", "--sizes", "64"]) == 1
    out, err = capsys.readouterr()
    assert err == ("rnic perf: --qps 5: the board backend's device has 4 queue pairs "
                   "(query_device().max_qp)\n")
    assert "RDMA Write bandwidth" not in out


def test_sixteen_pairs_on_engine_build_its_tables_for_them(capsys):
    """Above its default 4, the engine backend is built with a DDP stream per pair and a region row per pair's
    region (`perf.engine_tables`): 16 pairs each move their bytes, and each device offers exactly 16."""
    assert main(["perf", "--backend", "engine", "--qps", "16", "--test", "write_bw", "--sizes", "100",
                 "--iters", "2"]) == 0
    rows = pair_rows(capsys.readouterr().out)
    assert [pair for pair, *_ in rows] == [str(pair) for pair in range(16)] + ["all"]
    assert rows[-1][3] == sum(moved for *_, moved in rows[:-1]) == 16 * 200
    attrs = [device.query_device() for device in open_fabric("engine", **perf.engine_tables(16)).devices]
    assert [(attr.max_qp, attr.max_mr) for attr in attrs] == [(16, 16), (16, 16)]


def test_sixteen_pairs_on_soft_raise_its_streams(capsys):
    assert main(["perf", "--qps", "16", "--test", "write_bw", "--sizes", "100", "--iters", "2"]) == 0
    rows = pair_rows(capsys.readouterr().out)
    assert [pair for pair, *_ in rows] == [str(pair) for pair in range(16)] + ["all"]
    assert rows[-1][3] == sum(moved for *_, moved in rows[:-1]) == 16 * 200


def test_the_qps_limits_are_usage_errors(capsys):
    for argv, message in ((["--qps", "0"], "below the minimum of 1"),
                          (["--qps", "1025"], "above the maximum of 1024 on backend soft"),
                          (["--backend", "engine", "--qps", "1025"], "above the maximum of 1024 on backend engine"),
                          (["--backend", "sim", "--qps", "2"], "above 1 only with --backend soft, engine or board"),
                          (["--client", "127.0.0.1", "--qps", "2"], "not with --client")):
        with pytest.raises(SystemExit) as exit_:
            main(["perf", *argv])
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


def test_the_rows_keep_their_pair_through_json():
    """`perf_program` hands its rows over as JSON (the sim backend): a row's pair survives it."""
    fabric = open_fabric("soft")
    rows = fabric.backend.run(lambda: perf.measure(fabric, PerfPlan(("write_bw", "send_lat"), (64,), 2, qps=2)))
    assert [(row.pair, row.pairs) for row in rows] == [(0, 2), (1, 2), (None, 2)] * 2
    assert rows_from_json(json.dumps([dataclasses.asdict(row) for row in rows])) == rows
