"""The layers depend one way (README "What is here"): abi, model and hdl import nothing else of the project
but abi.

abi is the contract between gateware and host in plain Python: the gateware builds its layouts from it, the
scoreboard model (model/engine) and the driver read the register map, records and enums from it. driver uses
model and abi; sim joins the layers; boards uses hdl. Neither abi, nor model, nor driver needs Amaranth: a host
driver installs without the HDL.
"""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("abi", "model", "hdl", "driver", "sim", "boards", "scripts", "tests")


def project_imports(package: str) -> dict[str, set[str]]:
    """For every module of ``package``: the project packages (dotted, top two levels) it imports."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(ROOT))] = {name for name in names if name.split(".")[0] in PROJECT}
    return found


@pytest.mark.parametrize("package, allowed", [
    ("abi", ("abi",)),
    ("model", ("model", "abi")),
    ("hdl", ("hdl", "abi")),
    ("boards", ("boards", "hdl", "abi")),
    ("driver", ("driver", "model", "abi")),
])
def test_layer_imports_only_what_it_may(package, allowed):
    for module, names in project_imports(package).items():
        outside = {name for name in names if name.split(".")[0] not in allowed}
        assert not outside, f"{module} imports {sorted(outside)}"


# Imports every module of the packages named on the command line with Amaranth made unimportable.
_WITHOUT_AMARANTH = textwrap.dedent("""
    import importlib, pkgutil, sys

    class NoAmaranth:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "amaranth":
                raise ImportError(f"{name} is blocked")

    sys.meta_path.insert(0, NoAmaranth())
    for package_name in sys.argv[1:]:
        package = importlib.import_module(package_name)
        for module in pkgutil.walk_packages(package.__path__, package_name + "."):
            importlib.import_module(module.name)
        print(package_name, "imported")
""")


@pytest.mark.parametrize("package", ["abi", "model", "driver"])
def test_the_host_side_imports_without_amaranth(package):
    """Every module of abi, model and driver imports in an interpreter where Amaranth cannot be imported."""
    result = subprocess.run([sys.executable, "-c", _WITHOUT_AMARANTH, package], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"{package} imported" in result.stdout


def test_blocking_amaranth_is_seen():
    """The check above would notice a module that needs Amaranth: hdl does."""
    result = subprocess.run([sys.executable, "-c", _WITHOUT_AMARANTH, "hdl"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "amaranth is blocked" in result.stderr
