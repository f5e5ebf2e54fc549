"""`rnic bench usrsctp`: the software RNIC beside usrsctp in one run, MB/s of each and their ratio."""

import pytest

from sim.cli import main
from sim.commands import bench_usrsctp
from sim.commands.bench_usrsctp import BenchFailed, usrsctp_transfer


def _rows(out: str) -> list[list[float]]:
    return [[float(cell) for cell in line.split()] for line in out.splitlines()
            if line.split() and all(cell.replace(".", "").replace("e", "").replace("+", "").replace("-", "").isdigit()
                                    for cell in line.split())]


def test_a_row_per_size_with_each_rate_and_their_ratio(usrsctp, capsys):
    assert main(["bench", "usrsctp", "--sizes", "1434", "65536", "--iters", "4"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert [(int(row[0]), int(row[1])) for row in rows] == [(1434, 4), (65536, 4)]
    for row in rows:
        assert len(row) == 8
        for usrsctp_rate, rnic_rate, ratio in (row[2:5], row[5:8]):
            assert usrsctp_rate > 0 and rnic_rate > 0
            # The ratio is the RNIC's rate over usrsctp's, each printed to 4 significant digits.
            assert ratio == pytest.approx(rnic_rate / usrsctp_rate, rel=2e-3, abs=1e-3)
    assert "wall-clock" in out and "cpu" in out


def test_usrsctp_delivers_every_byte_of_every_message(usrsctp):
    seconds = usrsctp_transfer(100_000, 3)   # messages above usrsctp's 64 KiB read size: partial deliveries
    assert seconds.wall > 0 and seconds.cpu >= 0


def test_bytes_lost_on_the_way_fail_the_measurement(usrsctp, monkeypatch):
    """A transfer whose received bytes differ from the sent ones is an error, not a figure."""
    original = bench_usrsctp.Message

    class Truncated(original):  # every message read arrives one byte short
        def __init__(self, data, *rest):
            super().__init__(data[:-1], *rest)

    monkeypatch.setattr("sim.usrsctp.Message", Truncated)
    with pytest.raises(BenchFailed):
        usrsctp_transfer(4096, 2)


def test_without_libusrsctp_it_names_the_package(monkeypatch, capsys):
    from sim.usrsctp import Stack, UsrsctpUnavailable

    def unavailable():
        raise UsrsctpUnavailable("libusrsctp is not installed: apt-get install libusrsctp-dev")

    monkeypatch.setattr(Stack, "instance", staticmethod(unavailable))
    assert main(["bench", "usrsctp", "--sizes", "1434", "--iters", "1"]) == 1
    assert "libusrsctp-dev" in capsys.readouterr().err


def test_a_size_above_the_software_rnics_largest_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "usrsctp", "--sizes", str((1 << 26) + 1)])
    assert exit_.value.code == 2
    assert "above the maximum" in capsys.readouterr().err


def test_profile_prints_the_software_rnics_call_tree_after_the_table(usrsctp, capsys):
    pytest.importorskip("pyinstrument")
    # Half a MiB: enough of a run for the sampler (one sample a millisecond) to see its frames every time.
    assert main(["bench", "usrsctp", "--sizes", "65536", "--iters", "8", "--profile"]) == 0
    out = capsys.readouterr().out
    table, _, profile = out.partition("sampled by pyinstrument")
    assert len(_rows(table)) == 1
    assert "SoftFabric._service" in profile and "HostPair.advance" in profile   # the run's own frames


def test_profile_without_its_extra_names_it(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sim.toolchain").toolchain.EXTRAS, "profile", ("no_such_profiler_module",))
    assert main(["bench", "usrsctp", "--profile"]) == 1
    assert "'profile' extra" in capsys.readouterr().err
