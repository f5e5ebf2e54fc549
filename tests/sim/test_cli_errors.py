"""Bad input to every `rnic` command: one clear line and a non-zero exit, never a traceback.

Argument errors exit 2 (argparse's usage status) before any work starts; unreadable
or undecodable files exit 1 with the file named. The replay backends (RTL and
model) refuse a bad capture or configuration with the same line, before the
simulator is started, so none of these tests needs Verilator.
"""

import contextlib
import inspect
import io
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hdl.rx.engine import RxEngine
from model.net.pcap import LinkType, write_pcap
from sim.cli import build_parser, main
from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG

REPO = Path(__file__).resolve().parents[2]
REPLAY = ["replay", str(SAMPLE_CAPTURE), "--config", str(SAMPLE_CONFIG)]


def _usage_error(argv: list[str], capsys) -> str:
    """Run `argv`, which must be refused as bad usage: exit 2, the error on the last stderr line."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    return captured.err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, message", [
    # demo
    (["demo", "--loss", "-1"], "not a probability"),
    (["demo", "--loss", "1.5"], "not a probability"),
    (["demo", "--loss", "nan"], "not a probability"),
    (["demo", "--loss", "inf"], "not a probability"),
    (["demo", "--loss", "lots"], "is not a number"),
    (["demo", "--size", "-5"], "below the minimum of 0"),
    (["demo", "--size", "1.5"], "not a whole number"),
    (["demo", "--size", str(2**32)], "above the maximum of 4294967295"),
    (["demo", "--seed", "abc"], "invalid int value"),
    (["demo", "--pcap", "/nonexistent-directory/out.pcap"], "does not exist"),
    (["demo", "--pcap", "."], "is a directory"),
    (["demo", "--colour"], "unrecognized arguments"),
    # dissect
    (["dissect"], "required: capture"),
    (["dissect", "x.pcap", "--udp-port", "0"], "not a UDP port"),
    (["dissect", "x.pcap", "--udp-port", "65536"], "not a UDP port"),
    (["dissect", "x.pcap", "--udp-port", "-1"], "not a UDP port"),
    (["dissect", "x.pcap", "--udp-port", "http"], "not a UDP port"),
    # sample-capture
    (["sample-capture"], "required: output"),
    (["sample-capture", "/nonexistent-directory/out.pcap"], "does not exist"),
    (["sample-capture", "."], "is a directory"),
    # bench
    (["bench"], "required: TARGET"),
    (["bench", "disk"], "invalid choice"),
    (["bench", "rx", "--payloads", "0"], "below the minimum of 1"),
    (["bench", "rx", "--payloads", "-3"], "below the minimum of 1"),
    (["bench", "rx", "--frames", "0"], "below the minimum of 1"),
    (["bench", "rx", "--widths", "12"], "invalid choice"),
    (["bench", "rx", "--target-mhz", "0"], "not a number above 0"),
    (["bench", "rx", "--target-mhz", "nan"], "not a number above 0"),
    (["bench", "rx", "--waves", "lxt"], "invalid choice"),
    (["bench", "e2e", "--total", "0"], "below the minimum of 1"),
    (["bench", "e2e", "--total", "1e6"], "not a whole number"),
    (["bench", "model", "--seconds", "0"], "not a number above 0"),
    (["bench", "model", "--seconds", "inf"], "not a number above 0"),
    (["bench", "model", "--seconds", "-1"], "not a number above 0"),
    # replay
    (["replay", str(SAMPLE_CAPTURE)], "required: --config"),
    ([*REPLAY, "--width", "7"], "invalid choice"),
    ([*REPLAY, "--gap", "-1"], "below the minimum of 0"),
    ([*REPLAY, "--gap", "2.5"], "not a whole number"),
    ([*REPLAY, "--memory-stall", "1"], "not below 1"),
    ([*REPLAY, "--memory-stall", "-0.1"], "not a probability"),
    ([*REPLAY, "--waves", "fsdb"], "invalid choice"),
    # no command
    ([], "required: COMMAND"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, message, capsys):
    assert message in _usage_error(argv, capsys)


@pytest.mark.parametrize("argv, command", [(REPLAY, "replay"), (["bench", "rx", "--widths", "8"], "bench rx")])
def test_an_unknown_waves_setting_is_one_line_and_exit_2_before_any_simulation(argv, command, monkeypatch, capsys):
    monkeypatch.setenv("WAVES", "fsdb")
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"rnic {command}: WAVES='fsdb' is not a waveform setting: fst or vcd "
                                         "(1 or on: fst; 0, off or unset: none)"]


def test_the_model_replay_has_no_waves_to_write(monkeypatch, capsys):
    monkeypatch.setenv("WAVES", "fsdb")
    assert main([*REPLAY, "--model"]) == 0
    assert main([*REPLAY, "--model", "--waves", "vcd"]) == 0
    assert "--waves apply to the RTL engine" in capsys.readouterr().err


def test_bench_rx_refuses_a_payload_whose_frame_overflows_the_engine_buffer(capsys):
    """The frame of an RDMA Write of the largest payload, built by scapy (an encoder nobody here wrote:
    Ethernet, IPv4, SCTP, one DATA chunk padded to 4 bytes, RFC 4960 3.2), fits the engine's store-and-forward
    buffer less one beat; one byte more does not, and is refused before any simulation."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether
    from scapy.layers.sctp import SCTP, SCTPChunkData

    buffer_bytes = inspect.signature(RxEngine).parameters["buffer_bytes"].default
    width = 64
    message = _usage_error(["bench", "rx", "--widths", "8", str(width), "--payloads", "64", "40000"], capsys)
    limit = int(re.search(r"maximum of (\d+) at W = 64", message).group(1))

    def frame_length(payload: int) -> int:
        user_data = bytes(2 + 14 + payload)  # DDP-SSN (RFC 5043 5.2.2), tagged DDP header (RFC 5041 4.2)
        return len(Ether() / IP() / SCTP() / SCTPChunkData(data=user_data))

    assert frame_length(limit) <= buffer_bytes - width < frame_length(limit + 1)


# -- files -------------------------------------------------------------------------------------------


def _file_error(argv: list[str], capsys) -> str:
    """Run `argv`, which must fail on its input: exit 1, one line on stderr, nothing on stdout."""
    assert main(argv) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "", captured
    return lines[0]


BAD_CAPTURES = [
    (b"", "too short for a capture header"),
    (b"hello, this is text\n" * 3, "unknown capture magic"),
    (SAMPLE_CAPTURE.read_bytes()[:100], "claims"),
]


@pytest.mark.parametrize("content, message", BAD_CAPTURES)
def test_dissect_refuses_a_bad_capture_in_one_line(content, message, tmp_path, capsys):
    """Every whole frame before the damage is printed on stdout, then one line names the file and the damage."""
    capture = tmp_path / "bad.pcap"
    capture.write_bytes(content)
    assert main(["dissect", str(capture)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and str(capture) in err[0]


@pytest.mark.parametrize("command", [["dissect"], ["replay", "--config", str(SAMPLE_CONFIG), "--model"]])
def test_a_missing_or_directory_capture_is_named(command, tmp_path, capsys):
    for path, reason in ((tmp_path / "absent.pcap", "No such file"), (tmp_path, "Is a directory")):
        argv = [command[0], str(path), *command[1:]]
        line = _file_error(argv, capsys)
        assert f"cannot read {path}" in line and reason in line


def _replay_error(capsys, capture, config=SAMPLE_CONFIG, *extra) -> str:
    return _file_error(["replay", str(capture), "--config", str(config), *extra], capsys)


def _on_both_backends(capsys, capture, config=SAMPLE_CONFIG) -> str:
    """The line both replay backends refuse the input with: the same one."""
    rtl = _replay_error(capsys, capture, config)
    model = _replay_error(capsys, capture, config, "--model")
    assert rtl == model
    return rtl


@pytest.mark.parametrize("content, message", [*BAD_CAPTURES, (SAMPLE_CAPTURE.read_bytes()[:24], "holds no frame")])
def test_replay_refuses_a_bad_capture_alike_on_both_backends(content, message, tmp_path, capsys):
    capture = tmp_path / "bad.pcap"
    capture.write_bytes(content)
    line = _on_both_backends(capsys, capture)
    assert message in line and str(capture) in line


@pytest.mark.parametrize("linktype", [LinkType.RAW, LinkType.IPV4, 113])
def test_replay_refuses_a_capture_that_is_not_ethernet(linktype, tmp_path, capsys):
    """The engine takes Ethernet II frames (link type 1 of the tcpdump.org list); raw IP (101, 228) and
    Linux cooked (113) captures are refused by name, not fed to it as if they were Ethernet."""
    capture = tmp_path / "raw.pcap"
    capture.write_bytes(write_pcap([(0.0, bytes.fromhex("4500001c") + bytes(24))], linktype=linktype))
    line = _on_both_backends(capsys, capture)
    assert f"frame #0 has link type {int(linktype)}" in line and "Ethernet frames (link type 1) only" in line


@pytest.mark.parametrize("content, message", [
    ("{", "not JSON"),
    ('{"local_ip": "10.0.0.2"}', "missing 'local_mac'"),
    ("[]", "expected an object"),
])
def test_replay_refuses_a_bad_config_alike_on_both_backends(content, message, tmp_path, capsys):
    config = tmp_path / "bad.json"
    config.write_text(content)
    line = _on_both_backends(capsys, SAMPLE_CAPTURE, config)
    assert message in line and str(config) in line


def test_replay_refuses_a_config_that_is_not_text(tmp_path, capsys):
    config = tmp_path / "binary.json"
    config.write_bytes(b"\xff\xfe\x00\x01")
    line = _on_both_backends(capsys, SAMPLE_CAPTURE, config)
    assert "not a JSON text file" in line and str(config) in line


def test_replay_names_a_missing_or_directory_config(tmp_path, capsys):
    assert "cannot read" in _on_both_backends(capsys, SAMPLE_CAPTURE, tmp_path / "absent.json")
    assert "Is a directory" in _on_both_backends(capsys, SAMPLE_CAPTURE, tmp_path)


def _sample_config() -> dict:
    return json.loads(SAMPLE_CONFIG.read_text())


def _write_config(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    return path


def test_replay_refuses_a_region_past_the_top_of_host_memory_on_both_backends(tmp_path, capsys):
    """A region whose host address + length passes 2**64 once reached the model and raised OverflowError
    in the memory digest; 64-bit host addresses cannot hold it."""
    document = _sample_config()
    document["regions"][0]["host_address"] = hex(2**64 - 16)
    line = _on_both_backends(capsys, SAMPLE_CAPTURE, _write_config(tmp_path, document))
    assert "regions[0]: host_address + length passes 2**64" in line


def test_replay_refuses_two_associations_on_the_same_ports_and_peer(tmp_path, capsys):
    document = _sample_config()
    twin = dict(document["associations"][0], index=1, tag="0x01020301")
    document["associations"][1] = twin
    line = _on_both_backends(capsys, SAMPLE_CAPTURE, _write_config(tmp_path, document))
    assert "associations[0] and associations[1] both have local port 5002, peer port 5001" in line


def _more_regions(document: dict, count: int) -> dict:
    template = document["regions"][0]
    document["regions"] = [dict(template, stag=hex(i << 8 | 0x42), host_address=hex(0x100000 + i * 0x4000))
                           for i in range(count)]
    return document


def _more_buffers(document: dict, count: int) -> dict:
    template = document["buffers"][0]
    document["buffers"] = [dict(template, host_address=hex(0x200000 + i * 0x1000)) for i in range(count)]
    return document


def _stag_index(document: dict, stag: str) -> dict:
    document["regions"][1]["stag"] = stag
    return document


ENGINE_DEFAULTS = {name: parameter.default for name, parameter in inspect.signature(RxEngine).parameters.items()}


@pytest.mark.parametrize("change, reason", [
    (lambda d: _more_regions(d, ENGINE_DEFAULTS["regions"] + 1), f"index {ENGINE_DEFAULTS['regions']} >= "),
    (lambda d: _more_buffers(d, ENGINE_DEFAULTS["buffers_per_queue"] + 1),
     f"more than {ENGINE_DEFAULTS['buffers_per_queue']} buffers per queue"),
    (lambda d: _stag_index(d, hex(ENGINE_DEFAULTS["regions"] << 8 | 7)), f"index {ENGINE_DEFAULTS['regions']} >="),
    (lambda d: _stag_index(d, "0x0199"), "STags 0x142 and 0x199 share table index 1"),
])
def test_a_config_that_fits_only_the_model_says_so_and_prints_the_rtl_limits(change, reason, tmp_path, capsys):
    """The RTL refuses it (exit 1, one line); the model runs it and says, in one line on stderr, that
    the RTL engine would not. Both lines give the reason and the RTL engine's table sizes, which are
    RxEngine's own defaults (hdl/rx/engine.py), the engine `rnic replay` builds."""
    config = _write_config(tmp_path, change(_sample_config()))
    rtl = _replay_error(capsys, SAMPLE_CAPTURE, config)
    assert "does not fit the RTL engine" in rtl
    assert main(["replay", str(SAMPLE_CAPTURE), "--config", str(config), "--model"]) == 0
    captured = capsys.readouterr()
    note = captured.err.strip().splitlines()
    assert len(note) == 1 and "fits the model only, not the RTL engine" in note[0]
    assert captured.out.startswith("#0 ")
    for line in (rtl, note[0]):
        assert reason in line
        assert f"association indices below {ENGINE_DEFAULTS['associations']}" in line
        assert f"stream ids below {ENGINE_DEFAULTS['stream_ids']}" in line
        assert f"{ENGINE_DEFAULTS['regions']} regions" in line
        assert f"{ENGINE_DEFAULTS['buffers_per_queue']} buffers per stream and QN" in line


@pytest.mark.parametrize("argv", [["sample-capture"], ["demo", "--pcap"], ["bench", "e2e", "--plot"]])
def test_an_unwritable_output_file_is_refused_before_the_run(argv, capsys):
    """/proc/version exists and is no directory, but nobody (root included) may write it."""
    assert "cannot write /proc/version" in _usage_error([*argv, "/proc/version"], capsys)


def test_checking_an_output_file_leaves_it_as_it_was(tmp_path):
    existing, new = tmp_path / "kept.pcap", tmp_path / "new.pcap"
    existing.write_bytes(b"old bytes")
    assert _parses(["sample-capture", str(existing)]) is not None
    assert _parses(["demo", "--pcap", str(new)]) is not None
    assert existing.read_bytes() == b"old bytes" and not new.exists()


# -- the whole command line ----------------------------------------------------------------------------


def test_version_is_the_packaged_one(capsys):
    tomllib = pytest.importorskip("tomllib")
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out.strip() == f"rnic {version}"


def test_an_interrupt_is_one_line_and_exit_130(monkeypatch, capsys):
    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr("sim.commands.bench_model.run_model_bench", interrupted)
    assert main(["bench", "model"]) == 130  # 128 + SIGINT
    captured = capsys.readouterr()
    assert captured.err.strip() == "rnic bench: interrupted" and "Traceback" not in captured.err


def _parses(argv: list[str]):
    """The parsed arguments, or None when argparse refused `argv` with its usage status."""
    parser = build_parser()
    try:
        return parser.parse_args(argv)
    except SystemExit as exit_:
        assert exit_.code == 2, argv
        return None


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _int_or_none(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


#: Every numeric option: (command, option, attribute, what Python's own float()/int() make of a text
#: and the range docs/cli/index.md gives the option); any other text must be refused with exit 2.
NUMERIC_OPTIONS = [
    (["demo"], "--loss", "loss", _float_or_none, lambda v: 0 <= v <= 1),
    (["demo"], "--size", "size", _int_or_none, lambda v: 0 <= v < 1 << 32),
    (["bench", "model"], "--seconds", "seconds", _float_or_none, lambda v: 0 < v < float("inf")),
    (["bench", "e2e"], "--total", "total", _int_or_none, lambda v: v >= 1),
    (["bench", "rx"], "--frames", "frames", _int_or_none, lambda v: v >= 1),
    (["bench", "rx"], "--target-mhz", "target_mhz", _float_or_none, lambda v: 0 < v < float("inf")),
    (REPLAY, "--gap", "gap", _int_or_none, lambda v: v >= 0),
    (REPLAY, "--memory-stall", "memory_stall", _float_or_none, lambda v: 0 <= v < 1),
]

NUMBER_LIKE = st.one_of(
    st.text(alphabet="0123456789.-+eExXabfinNA_ ", max_size=10),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(option=st.sampled_from(NUMERIC_OPTIONS), text=NUMBER_LIKE)
def test_any_numeric_option_value_is_accepted_only_in_its_range(option, text):
    command, flag, attribute, convert, in_range = option
    if text.startswith("-") and _float_or_none(text) is None:
        return  # argparse reads it as another option: not a value this test is about
    value = convert(text)
    valid = value is not None and in_range(value)
    args = _parses([*command, f"{flag}={text}"])
    assert (args is not None) == valid, (flag, text)
    if valid:
        assert getattr(args, attribute) == value


WORDS = ["demo", "dissect", "replay", "bench", "rx", "e2e", "model", "sample-capture", "--loss", "--size",
         "--seed", "--pcap", "--udp", "--no-progress", "--json", "--udp-port", "--config", "--width", "--gap",
         "--memory-stall", "--model", "--bytes", "--widths", "--payloads", "--frames", "--synth", "--target-mhz",
         "--seconds", "--total", "--version", "--waves", "fst", "vcd", "0", "1", "-1", "8", "0.5", "nan", "x.pcap",
         "/nonexistent/x"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=6)), max_size=7))
def test_any_command_line_parses_or_is_refused_as_usage(argv):
    """argparse and the argument types raise nothing but SystemExit(2) (or 0 for --version), whatever the words."""
    try:
        build_parser().parse_args(argv)
    except SystemExit as exit_:
        assert exit_.code in (0, 2)


def _run_main(argv: list[str]) -> tuple[int, str, str]:
    """main(argv), its exit status, stdout and stderr (hypothesis examples cannot share capsys)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def _runs_or_refuses_in_one_line(argv: list[str]) -> None:
    status, out, err = _run_main(argv)
    assert status in (0, 1), err
    if status == 1:
        assert len(err.strip().splitlines()) == 1 and out == "", err


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_replay_model_on_a_mutated_config_runs_or_refuses_in_one_line(data):
    """Any value put into any field of the sample configuration: the model replay prints its report (exit 0)
    or refuses in one line (exit 1), whatever the value."""
    document = _sample_config()
    section = data.draw(st.sampled_from(["associations", "streams", "regions", "buffers", None]))
    target = document if section is None else data.draw(st.sampled_from(document[section]))
    key = data.draw(st.sampled_from(sorted(target)))
    target[key] = data.draw(st.one_of(
        st.integers(-1, 2**66), st.integers(0, 2**64).map(hex), st.text(max_size=6), st.none(), st.booleans(),
        st.lists(st.integers(0, 3), max_size=2)))
    with tempfile.TemporaryDirectory() as scratch:
        config = _write_config(Path(scratch), document)
        _runs_or_refuses_in_one_line(["replay", str(SAMPLE_CAPTURE), "--config", str(config), "--model"])


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_replay_model_on_a_damaged_capture_runs_or_refuses_in_one_line(data):
    """Bytes of the sample capture overwritten, then the file cut anywhere: exit 0 or one line."""
    capture = bytearray(SAMPLE_CAPTURE.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        capture[data.draw(st.integers(0, len(capture) - 1))] = data.draw(st.integers(0, 255))
    capture = capture[:data.draw(st.integers(0, len(capture)))]
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "damaged.pcap"
        path.write_bytes(capture)
        _runs_or_refuses_in_one_line(["replay", str(path), "--config", str(SAMPLE_CONFIG), "--model"])


def _commands(parser, path=()):
    """(command words, subparser) of every runnable command of `parser`."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))
            return
    yield path, parser


def test_the_command_line_page_lists_every_command_and_option():
    """The documentation's command-line table (docs/cli/index.md) has a row per command naming each of its
    options."""
    section = (REPO / "docs" / "cli" / "index.md").read_text()
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `rnic ([a-z0-9 -]+?)(?: [A-Z][^`]*)?` \|", line)
        if match:
            rows[match.group(1)] = line
    commands = dict(_commands(build_parser()))
    assert set(rows) == {" ".join(path) for path in commands}
    for path, parser in commands.items():
        options = {option for action in parser._actions for option in action.option_strings
                   if option.startswith("--") and option != "--help"}
        row = rows[" ".join(path)]
        assert {option for option in options if not re.search(rf"(?<![\w-]){option}(?![\w-])", row)} == set(), path
