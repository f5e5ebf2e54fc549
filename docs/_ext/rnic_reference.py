"""Reference tables generated from the code at build time.

Directives (each takes a dotted Python name):

* ``rnic-register-map``: the AXI4-Lite map a ``RegisterMap`` factory builds (abi.rx.register_map...);
* ``rnic-record``: one ``Struct`` constant (a PARAMS word...);
* ``rnic-records``: every record layout of an ABI module (its ``*_layout`` functions at their default
  arguments and its ``Struct`` constants), field by field with bit offsets;
* ``rnic-enums``: every enum of a module, members with their values and documentation comments;
* ``rnic-constants``: a module's documented constants (``#:`` comments), values as the code has them;
* ``rnic-error-numbers``: the RFC error-number tables of ``model.errors``;
* ``rnic-transitions``: a state machine's transition table ((state, trigger) -> handler, next, RFC);
* ``rnic-automodules``: ``automodule`` for a package and every module under it.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def _resolve(dotted: str):
    module_name, _, attribute = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError):
        return importlib.import_module(dotted)


def _attribute_docs(module_name: str) -> dict[tuple[str, str], str]:
    analyzer = ModuleAnalyzer.for_module(module_name)
    return {key: " ".join(line.strip() for line in lines if line.strip())
            for key, lines in analyzer.find_attr_docs().items()}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _list_table(title: str, header: list[str], rows: list[list[str]], widths: str | None = None) -> list[str]:
    lines = [f".. list-table:: {title}", "   :header-rows: 1"]
    if widths:
        lines.append(f"   :widths: {widths}")
    lines.append("")
    for row in [header, *rows]:
        lines.append(f"   * - {_cell(row[0]) or ' '}")
        lines.extend(f"     - {_cell(cell) or ' '}" for cell in row[1:])
    lines.append("")
    return lines


class _GeneratedDirective(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self):
        lines = self.generate(self.arguments[0])
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source=f"<generated from {self.arguments[0]}>"),
                                 container)
        return container.children

    def generate(self, dotted: str) -> list[str]:
        raise NotImplementedError


def _flat_fields(struct, prefix: str = "", base: int = 0):
    from abi.layout import Array, Struct, member_width
    for name, member in struct:
        offset = base + struct.offset(name)
        if isinstance(member, Struct):
            yield from _flat_fields(member, f"{prefix}{name}.", offset)
        elif isinstance(member, Array):
            width = member_width(member.element)
            for index in range(member.count):
                element = member.element
                if isinstance(element, Struct):
                    yield from _flat_fields(element, f"{prefix}{name}[{index}].", offset + index * width)
                else:
                    yield f"{prefix}{name}[{index}]", offset + index * width, width, ""
        else:
            kind = member.__name__ if isinstance(member, type) and issubclass(member, enum.Enum) else ""
            yield f"{prefix}{name}", offset, member_width(member), kind


def _record_table(title: str, struct) -> list[str]:
    rows = [[f"``{name}``", f"{offset + width - 1}:{offset}" if width > 1 else str(offset), str(width),
             f":class:`{kind}`" if kind else ""] for name, offset, width, kind in _flat_fields(struct)]
    return _list_table(f"{title} ({struct.size} bits, {(struct.size + 7) // 8} bytes)",
                       ["field", "bits", "width", "enum"], rows, "40 20 10 30")


def _keyword_arguments(text: str) -> dict:
    """``name=literal, ...`` as a dict."""
    call = ast.parse(f"f({text})", mode="eval").body
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}


class RegisterMapDirective(_GeneratedDirective):
    """The map at the factory's default arguments, or those of the ``arguments`` option; windows list their
    write layout's words."""

    option_spec = {"arguments": directives.unchanged}

    def generate(self, dotted):
        from abi.register_file import COMMIT_OFFSET, DEVICE_ID, ID_OFFSET, PARAMS_OFFSET
        factory = _resolve(dotted)
        arguments = {name: parameter.default for name, parameter in inspect.signature(factory).parameters.items()}
        arguments.update(_keyword_arguments(self.options.get("arguments", "")))
        register_map = factory(**arguments)
        parameters = ", ".join(f"{name}={value}" for name, value in arguments.items())
        rows = [[f"0x{ID_OFFSET:03X}", "``ID``", "read only", f"0x{DEVICE_ID:08X}"],
                [f"0x{PARAMS_OFFSET:03X}", "``PARAMS``", "read only", "the engine's build parameters"]]
        rows += [[f"0x{offset:03X}", f"``{name}``", "read/write", f"configuration, {bits} bits"]
                 for name, (offset, bits) in register_map.config.items()]
        rows += [[f"0x{offset:03X}", f"``{name}``", "read only", "counter, 32 bits, wrapping"]
                 for name, offset in register_map.counters.items()]
        for name, window in register_map.tables.items():
            last = window.base + 4 * (window.words - 1)
            rows.append([f"0x{window.base:03X}-0x{last:03X}", f"``{name}``", "write",
                         f"table window: {window.layout.size}-bit write staged in {window.words} words"])
            rows.append([f"0x{window.base + COMMIT_OFFSET:03X}", f"``{name}`` COMMIT", "read/write",
                         "write: push the staged row; read: 1 while it is pending"])
        lines = _list_table(f"``{dotted}({parameters})``", ["offset", "register", "access", "meaning"], rows,
                            "20 30 15 35")
        for name, window in register_map.tables.items():
            lines += _record_table(f"``{name}`` table write", window.layout)
        return lines


class RecordDirective(_GeneratedDirective):
    """One ``Struct`` constant, field by field."""

    def generate(self, dotted):
        return _record_table(f":data:`~{dotted}`", _resolve(dotted))


class RecordsDirective(_GeneratedDirective):
    """Every ``*_layout`` function (at its defaults) and ``Struct`` constant of a module, in source order."""

    def generate(self, dotted):
        from abi.layout import Struct
        module = importlib.import_module(dotted)
        lines = []
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, Struct):
                struct, title = value, f":data:`~{dotted}.{name}`"
            elif callable(value) and name.endswith("_layout"):
                signature = inspect.signature(value)
                if any(p.default is inspect.Parameter.empty for p in signature.parameters.values()):
                    arguments = {"entries": 16, "streams": 8}
                    struct = value(*(arguments[p] for p in signature.parameters
                                     if signature.parameters[p].default is inspect.Parameter.empty))
                    shown = ", ".join(f"{p}={arguments[p]}" for p in signature.parameters
                                      if signature.parameters[p].default is inspect.Parameter.empty)
                    title = f":func:`~{dotted}.{name}` ({shown})"
                else:
                    struct, title = value(), f":func:`~{dotted}.{name}`"
            else:
                continue
            lines += [".. rubric:: " + name, ""] + _record_table(title, struct)
        return lines


class EnumsDirective(_GeneratedDirective):
    def generate(self, dotted):
        module = importlib.import_module(dotted)
        docs = _attribute_docs(dotted)
        lines = []
        for name in module.__all__:
            value = getattr(module, name)
            if not (isinstance(value, type) and issubclass(value, enum.Enum)):
                continue
            summary = (inspect.getdoc(value) or "").split("\n\n")[0]
            rows = [[f"``{member.name}``", f"{int(member.value)} (0x{int(member.value):X})",
                     docs.get((name, member.name), "")] for member in value]
            lines += [".. rubric:: " + name, "", summary, ""]
            lines += _list_table(f":class:`~{dotted}.{name}`", ["member", "value", "meaning"], rows, "30 15 55")
        return lines


class ConstantsDirective(_GeneratedDirective):
    def generate(self, dotted):
        module = importlib.import_module(dotted)
        docs = _attribute_docs(dotted)
        rows = []
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, (int, bytes, tuple, frozenset, str)) and not isinstance(value, enum.Enum):
                shown = repr(sorted(value)) if isinstance(value, frozenset) else repr(value)
                rows.append([f"``{name}``", f"``{shown}``", docs.get(("", name), "")])
        return _list_table(f"Constants of :mod:`{dotted}`", ["name", "value", "meaning"], rows, "25 30 45")


class ErrorNumbersDirective(_GeneratedDirective):
    """The RFC error tables of ``model.errors`` (the argument names the module)."""

    def generate(self, dotted):
        module = importlib.import_module(dotted)
        lines = []
        for table in (module.DdpError, module.RdmapError, module.LlpError):
            rows = [[f"``{member.name}``", f"{member.value.layer.name} ({int(member.value.layer)})",
                     f"0x{member.value.etype:X}", f"0x{member.value.code:02X}", module.error_name(*member.value)]
                    for member in table]
            summary = (inspect.getdoc(table) or "").split("\n\n")[0]
            lines += [".. rubric:: " + table.__name__, "", summary, ""]
            lines += _list_table(f":class:`~{dotted}.{table.__name__}`",
                                 ["member", "layer", "type", "code", "name as printed"], rows, "30 15 10 10 35")
        return lines


class TransitionsDirective(_GeneratedDirective):
    """A ``TRANSITIONS`` dict: (state, trigger) -> row with a handler, a next state or phase and an RFC."""

    def generate(self, dotted):
        table = _resolve(dotted)
        rows = []
        for (state, trigger), row in table.items():
            following = getattr(row, "next_state", getattr(row, "next_phase", None))
            rows.append([f"``{state.name}``", f"``{getattr(trigger, 'name', trigger)}``",
                         f"``{row.handler.__name__}``", f"``{following.name}``" if following is not None else "(stays)",
                         row.rfc])
        return _list_table(f"``{dotted}`` ({len(rows)} rows)", ["state", "trigger", "handler", "next", "RFC"], rows,
                           "18 22 25 15 20")


_attribute_comments: dict[str, list[str]] = {}


def _keep_attribute_comment(app, what, name, obj, options, lines):
    """A ``#:`` comment is prose: napoleon (for the gateware's Ports sections) would read ``word: text`` as a
    type. Kept before napoleon runs, put back after."""
    if what in ("attribute", "data"):
        _attribute_comments[name] = list(lines)


def _restore_attribute_comment(app, what, name, obj, options, lines):
    if what in ("attribute", "data") and name in _attribute_comments:
        lines[:] = _attribute_comments.pop(name)


def setup(app):
    app.connect("autodoc-process-docstring", _keep_attribute_comment, priority=400)
    app.connect("autodoc-process-docstring", _restore_attribute_comment, priority=600)
    app.add_directive("rnic-register-map", RegisterMapDirective)
    app.add_directive("rnic-record", RecordDirective)
    app.add_directive("rnic-records", RecordsDirective)
    app.add_directive("rnic-enums", EnumsDirective)
    app.add_directive("rnic-constants", ConstantsDirective)
    app.add_directive("rnic-error-numbers", ErrorNumbersDirective)
    app.add_directive("rnic-transitions", TransitionsDirective)
    app.add_directive("rnic-automodules", AutomodulesDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


class AutomodulesDirective(_GeneratedDirective):
    """``automodule`` for the package and every module under it, in name order, each under a heading."""

    def generate(self, dotted):
        import pkgutil
        package = importlib.import_module(dotted)
        names = [dotted] + sorted(module.name for module in pkgutil.walk_packages(package.__path__, dotted + "."))
        lines = []
        for name in names:
            lines += [f"``{name}``", "~" * (len(name) + 4), "", f".. automodule:: {name}", ""]
        return lines
