"""The layers depend one way (README "What is here"): model and hdl import nothing else of the project.

The one exception is the engine ABI: the scoreboard model (model/engine) reads
the register map, records and enums from hdl/abi.py, the contract it checks
the gateware against. driver uses model (and may use the ABI); sim joins the layers; boards uses hdl.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("model", "hdl", "driver", "sim", "boards", "scripts", "tests")


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
    ("model", ("model",)),
    ("hdl", ("hdl",)),
    ("boards", ("boards", "hdl")),
    ("driver", ("driver", "model")),
])
def test_layer_imports_only_what_it_may(package, allowed):
    for module, names in project_imports(package).items():
        outside = {name for name in names if name.split(".")[0] not in allowed}
        if module.startswith(("model/engine/", "driver/")):
            outside.discard("hdl.abi")  # the ABI the scoreboard checks the gateware against
        assert not outside, f"{module} imports {sorted(outside)}"


def test_the_abi_imports_no_gateware_block():
    """hdl/abi.py is importable by a host driver without the receive path's blocks."""
    names = project_imports("hdl")["hdl/abi.py"]
    assert names <= {"hdl.bus.register_file"}, names
