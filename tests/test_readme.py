"""The README stays short and in step with what it names: pyproject.toml's extras, the Makefile's targets,
the `rnic` commands (and their pages in docs/cli), the folders, and its driver program, which runs."""

import argparse
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import build_parser

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def readme_section(title: str) -> str:
    return README.split(f"\n## {title}\n")[1].split("\n## ")[0]


def cli_commands(parser=None, path=()) -> list[str]:
    """Every runnable `rnic` command, as its words joined by spaces ("bench rx")."""
    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [command for name, sub in action.choices.items() for command in cli_commands(sub, (*path, name))]
    return [" ".join(path)]


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 200


def test_the_readme_extras_are_pyproject_s_and_the_makefile_installs_them():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    listed = set(re.findall(r"^\| `([a-z]+)` \|", readme_section("Install and extras"), re.M))
    assert listed == extras
    installed = re.search(r"pip install --quiet -e '\.\[([a-z,]+)\]'", (ROOT / "Makefile").read_text()).group(1)
    assert set(installed.split(",")) == extras


def test_the_readme_s_make_targets_exist():
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.M))
    named = set(re.findall(r"(?:^ +|`)make ([a-z-]+)", README, re.M))
    assert {"demo", "test", "docs"} <= named
    assert named <= targets


def test_the_readme_lists_every_rnic_command_and_each_has_its_page():
    listed = re.findall(r"^\| `rnic ([a-z0-9 -]+)` \|", readme_section("The `rnic` commands"), re.M)
    commands = cli_commands()
    assert sorted(listed) == sorted(commands)
    toctree = (ROOT / "docs" / "cli" / "index.md").read_text()
    for command in commands:
        page = ROOT / "docs" / "cli" / f"{command.replace(' ', '-')}.md"
        assert f":path: {command}\n" in page.read_text(), page
        assert f"\n{page.stem}\n" in toctree, page.stem


def test_the_readme_s_folder_map_is_the_repository_s():
    listed = set(re.findall(r"^    ([a-z_]+)/ ", readme_section("What is here"), re.M))
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    folders = {path.split("/")[0] for path in tracked.splitlines() if "/" in path and not path.startswith(".")}
    assert listed == folders


def test_the_readme_s_driver_program_runs_and_prints_what_it_says():
    program = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    assert len(program.splitlines()) <= 30
    expected = re.search(r"It prints `([^`]*)`", README).group(1)
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_the_readme_s_network_program_runs_as_a_server_and_a_client_process(tmp_path):
    """The section's hello.py as two processes over loopback UDP, on a free port instead of 9899 (another test or
    program may hold that one)."""
    section = readme_section("Two programs on a real network")
    program = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    hello = tmp_path / "hello.py"
    hello.write_text(program.replace("9899", str(port)))
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, str(hello), "server"], cwd=ROOT, env=environment, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        client = subprocess.run([sys.executable, str(hello), "client", "localhost"], cwd=ROOT, env=environment,
                                capture_output=True, text=True, timeout=120)
        out, err = server.communicate(timeout=60)
    finally:
        server.kill()
    assert client.returncode == 0, client.stderr
    assert server.returncode == 0, err
    assert out.strip() == repr(b"hello from another process")


def test_the_base_install_is_without_amaranth():
    """The README's host-driver install: Amaranth comes only with the `hdl` extra (`tests/test_layers.py`
    imports driver, model and abi with Amaranth blocked)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [dependency for dependency in project["dependencies"] if dependency.startswith("amaranth")]
    assert [dependency for dependency in project["optional-dependencies"]["hdl"] if dependency.startswith("amaranth")]


# Runs `rnic` with the arguments given on the command line, Amaranth made unimportable.
_RNIC_WITHOUT_AMARANTH = """
import sys

class NoAmaranth:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "amaranth":
            raise ImportError(f"{name} is blocked")

sys.meta_path.insert(0, NoAmaranth())
from sim.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("arguments", [
    ["demo", "--size", "4096", "--no-progress"],
    ["dissect", "sim/samples/sample.pcap"],
    ["replay", "sim/samples/sample.pcap", "--config", "sim/samples/sample_rx.json", "--model"],
], ids=["demo", "dissect", "replay-model"])
def test_the_commands_the_readme_promises_the_base_install_run_without_amaranth(arguments):
    assert f"`rnic {arguments[0]}" in readme_section("Install and extras")
    result = subprocess.run([sys.executable, "-c", _RNIC_WITHOUT_AMARANTH, *arguments], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
