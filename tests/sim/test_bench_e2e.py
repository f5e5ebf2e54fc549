"""`rnic bench e2e`: the goodput table over a loss sweep and its plot (PNG, matplotlib from the 'plot' extra)."""

import struct
import sys

import pytest

from sim.cli import main
from sim.commands.bench_e2e import BenchRow, goodput_series

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"  # PNG specification (RFC 2083) 3.1


def _table_rows(out: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("|")] for line in out.splitlines()
            if line.strip().endswith(tuple("0123456789")) and "|" in line]


def test_the_table_has_a_row_per_message_size_and_loss(capsys):
    assert main(["bench", "e2e", "--total", "65536", "--losses", "0", "0.02", "--no-plot"]) == 0
    out = capsys.readouterr().out
    rows = _table_rows(out)
    assert [(row[0], row[1]) for row in rows] == [("4096B", "0.0%"), ("4096B", "2.0%"),
                                                  ("1048576B", "0.0%"), ("1048576B", "2.0%")]
    assert [int(row[2]) for row in rows] == [16, 16, 1, 1]  # 64 KiB in 4 KiB messages; one message at least
    assert "MB/s wall" in out and "MB/s sim" in out and "plot" not in out


def test_the_plot_is_a_png_beside_the_table(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "goodput.png"
    assert main(["bench", "e2e", "--total", "16384", "--losses", "0", "0.01", "--plot", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"plot: {path}"
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (700, 450)  # 7 x 4.5 inches at 100 dpi


def test_without_matplotlib_it_names_the_extra_before_running(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # importlib finds no such module
    assert main(["bench", "e2e", "--total", "4096"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert "pip install 'rnic-sctp[plot]'" in line and "--no-plot" in line


def test_the_plot_draws_simulated_goodput_and_leaves_stalled_cells_out():
    rows = [BenchRow(4096, 0.0, 10, 1.0, 0.5, 0), BenchRow(4096, 0.05, 10, 1.0, 4.0, 7),
            BenchRow(1 << 20, 0.0, 2, 1.0, 0.25, 0), BenchRow(1 << 20, 0.05, 2, 9.0, 600.0, 0, stalled="no progress")]
    assert goodput_series(rows) == {4096: [(0.0, 40960 / 0.5 / 1e6), (5.0, 40960 / 4.0 / 1e6)],
                                    1 << 20: [(0.0, 2 * 2**20 / 0.25 / 1e6)]}


@pytest.mark.parametrize("value, message", [("1", "not below 1"), ("-0.1", "not a probability"),
                                            ("x", "not a number")])
def test_a_bad_loss_rate_is_refused_before_running(value, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "e2e", "--losses", value])
    assert exit_.value.code == 2 and message in capsys.readouterr().err.splitlines()[-1]


def test_the_default_plot_file_is_checked_only_when_a_plot_is_wanted(tmp_path, monkeypatch, capsys):
    """From a directory where bench-e2e.png cannot be written (it is a directory there), --no-plot still runs;
    a plot to the default file is refused before running."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench-e2e.png").mkdir()
    assert main(["bench", "e2e", "--total", "4096", "--losses", "0", "--no-plot"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "e2e", "--total", "4096", "--losses", "0"])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "argument --plot: bench-e2e.png is a directory" in captured.err.splitlines()[-1]


def test_plot_and_no_plot_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "e2e", "--plot", "x.png", "--no-plot"])
    assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
