"""Bad input to every `rnic` command: one clear line and a non-zero exit, never a traceback.

Argument errors exit 2 (argparse's usage status) before any work starts; unreadable
or undecodable files exit 1 with the file named. The replay backends (RTL and
model) refuse a bad capture with the same line, before the simulator is started.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG


@pytest.mark.parametrize("argv, message", [
    (["demo", "--loss", "-1"], "not a probability"),
    (["demo", "--loss", "1.5"], "not a probability"),
    (["demo", "--loss", "nan"], "not a probability"),
    (["demo", "--loss", "lots"], "is not a number"),
    (["demo", "--size", "-5"], "below the minimum of 0"),
    (["demo", "--size", "1.5"], "not a whole number"),
    (["demo", "--pcap", "/nonexistent-directory/out.pcap"], "does not exist"),
    (["demo", "--pcap", "."], "is a directory"),
    (["sample-capture", "/nonexistent-directory/out.pcap"], "does not exist"),
    (["bench", "rx", "--payloads", "0"], "below the minimum of 1"),
    (["bench", "rx", "--frames", "0"], "below the minimum of 1"),
    (["bench", "rx", "--widths", "12"], "invalid choice"),
    (["bench", "e2e", "--total", "0"], "below the minimum of 1"),
    (["bench", "model", "--seconds", "0"], "not a number above 0"),
    (["replay", str(SAMPLE_CAPTURE), "--config", str(SAMPLE_CONFIG), "--width", "7"], "invalid choice"),
    (["replay", str(SAMPLE_CAPTURE), "--config", str(SAMPLE_CONFIG), "--gap", "-1"], "below the minimum of 0"),
    (["replay", str(SAMPLE_CAPTURE), "--config", str(SAMPLE_CONFIG), "--gap", "2.5"], "not a whole number"),
    (["replay", str(SAMPLE_CAPTURE), "--config", str(SAMPLE_CONFIG), "--memory-stall", "1"], "not below 1"),
    (["replay", str(SAMPLE_CAPTURE), "--config", str(SAMPLE_CONFIG), "--memory-stall", "-0.1"], "not a probability"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and "Traceback" not in "\n".join(err)


def _replay_error(capsys, capture, *extra) -> str:
    assert main(["replay", str(capture), "--config", str(SAMPLE_CONFIG), *extra]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "", captured
    return lines[0]


@pytest.mark.parametrize("content, message", [
    (b"", "too short for a capture header"),
    (b"hello, this is text\n" * 3, "unknown capture magic"),
    (SAMPLE_CAPTURE.read_bytes()[:100], "claims"),
    (SAMPLE_CAPTURE.read_bytes()[:24], "holds no frame"),
])
def test_replay_refuses_a_bad_capture_alike_on_both_backends(content, message, tmp_path, capsys):
    capture = tmp_path / "bad.pcap"
    capture.write_bytes(content)
    rtl = _replay_error(capsys, capture)
    model = _replay_error(capsys, capture, "--model")
    assert rtl == model and message in rtl and str(capture) in rtl


def test_replay_names_a_missing_file(tmp_path, capsys):
    line = _replay_error(capsys, tmp_path / "absent.pcap", "--model")
    assert "cannot read" in line and "absent.pcap" in line


def test_sample_capture_to_an_unwritable_file_is_one_line(capsys):
    """/proc/version exists and is no directory, but nobody (root included) may write it."""
    assert main(["sample-capture", "/proc/version"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write /proc/version" in err[0]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=12))
def test_any_loss_text_is_accepted_only_as_a_probability(text):
    try:
        value = float(text)
        valid = 0.0 <= value <= 1.0
    except ValueError:
        valid = False
    from sim.cli import build_parser
    parser = build_parser()
    parser.exit = lambda status=0, message=None: (_ for _ in ()).throw(SystemExit(status))
    try:
        args = parser.parse_args(["demo", "--loss", text])
    except SystemExit as exit_:
        assert exit_.code == 2 and not valid
    else:
        assert valid and args.loss == float(text)
