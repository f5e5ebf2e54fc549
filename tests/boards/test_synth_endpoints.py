"""Endpoint slacks from nextpnr's detailed timing report (boards/synth.py), on a hand-written report."""

import pytest

from boards.synth import _endpoint_slacks

REPORT = {"detailed_net_timings": [
    {"net": "a", "driver": "block.x_LUT4_Z", "port": "F", "endpoints": [
        # a flip-flop's clock enable, reached at 7.0 ns at the latest
        {"cell": "block.q.source__payload_TRELLIS_FF_Q_3", "port": "CE", "delay": [2.0, 7.0]},
        # a LUT input: not a clocked endpoint
        {"cell": "block.y_LUT4_Z", "port": "A", "delay": [1.0, 9.0]},
        # a distributed RAM's write enable
        {"cell": "block.fifo.storage.0.1$DPRAM_COMB0", "port": "WRE", "delay": [1.0, 5.0]},
    ]},
    {"net": "b", "driver": "block.z_LUT4_Z", "port": "F", "endpoints": [
        # the same flip-flop input reached on another net later: the latest counts
        {"cell": "block.q.source__payload_TRELLIS_FF_Q_3", "port": "CE", "delay": [2.0, 7.5]},
        {"cell": "block.r_TRELLIS_FF_Q", "port": "DI", "delay": [0.5, 3.0]},
    ]},
]}


def test_slack_is_the_period_minus_the_latest_arrival_at_clocked_inputs():
    endpoints = _endpoint_slacks(REPORT, 125.0)  # 8 ns
    assert [(cell, port) for _, cell, port in endpoints] == [
        ("block.q.source__payload_TRELLIS_FF_Q_3", "CE"),
        ("block.fifo.storage.0.1$DPRAM_COMB0", "WRE"),
        ("block.r_TRELLIS_FF_Q", "DI"),
    ]
    assert [slack for slack, _, _ in endpoints] == pytest.approx([0.5, 3.0, 5.0])
