"""Sphinx configuration of the rnic-sctp site (`make docs`)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "rnic-sctp"
author = "the rnic-sctp authors"
copyright = "the rnic-sctp authors, BSD-2-Clause"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
    "rnic_reference",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "README.md", "rfc"]
myst_heading_anchors = 3
# Docstrings name code in single backquotes.
default_role = "literal"
# Each object is documented where it is defined, not again where a package re-exports it.
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
# A subclass documents what it adds; Amaranth's and the standard library's docstrings stay theirs.
autodoc_inherit_docstrings = False
html_theme = "alabaster"
html_title = "rnic-sctp"
# The gateware's classes list their ports as a numpydoc section of their own.
napoleon_custom_sections = [("Ports", "params_style")]
