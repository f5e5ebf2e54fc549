"""The RFC names of the error numbers (model/errors.py), checked against the RFC texts in docs/rfc/ and,
for RDMAP, whose RFC 5040 text is not in the tree, against the IANA RDDP registry (RFC 6580)."""

import re
from pathlib import Path

import pytest

from model.errors import DdpError, LlpError, RdmapError, error_name

RFC = Path(__file__).resolve().parents[2] / "docs" / "rfc"


def _rfc5041_table() -> dict[tuple[int, int], str]:
    """RFC 5041 7.2 as {(type, code): "Type name: code name"}: type in columns 3-6, code in 12-15, text from 24."""
    text = (RFC / "rfc5041.txt").read_text()
    section = text[text.index("7.2.  DDP Error Numbers"):text.index("0x3      Rsvd")]
    table, type_number, type_name = {}, None, ""
    for line in section.splitlines():
        match = re.fullmatch(r"   (0x\w| {3})      (0x\w\w| {4})? +(\S.*)", line)
        if not match:
            continue
        if match.group(1).strip():
            type_number, type_name = int(match.group(1), 16), match.group(3)
        if match.group(2) and match.group(2).strip():
            code = int(match.group(2), 16)
            table[(type_number, code)] = type_name if match.group(1).strip() else f"{type_name}: {match.group(3)}"
    return table


def test_every_ddp_error_number_reads_as_rfc_5041_7_2_names_it():
    table = _rfc5041_table()
    assert len(table) == 12  # Local Catastrophic, 5 tagged, 6 untagged
    assert {(e.etype, e.code) for e in DdpError} == set(table)
    for (etype, code), name in table.items():
        assert error_name(1, etype, code) == name


def test_the_llp_error_numbers_read_as_rfc_6581_8_names_them():
    text = (RFC / "rfc6581.txt").read_text()
    rows = re.findall(r"^      (0x0[5-7])               (.+)$", text, re.MULTILINE)
    assert len(rows) == 3
    assert {e.code for e in LlpError} == {int(code, 16) for code, _ in rows}
    for code, description in rows:  # layer 2, type 0 (RFC 6581 8), registered as "MPA Error" (RFC 6580 3.3)
        assert error_name(2, 0, int(code, 16)) == f"MPA Error: {description}"


#: The IANA "RDMAP Errors" registry (RFC 6580), as "Error-Type-Name / Error-Code-Name" by layer/type/code;
#: it spells out Steering Tag and Tagged Offset, which RFC 5040 abbreviates as STag and TO.
IANA_RDMAP_ERRORS = {
    (0x1, 0x00): "Remote Protection Error / Invalid Steering Tag",
    (0x1, 0x01): "Remote Protection Error / Base or bounds violation",
    (0x1, 0x02): "Remote Protection Error / Access rights violation",
    (0x1, 0x03): "Remote Protection Error / Steering Tag not associated with RDMAP Stream",
    (0x1, 0x04): "Remote Protection Error / Tagged Offset wrap",
    (0x1, 0x09): "Remote Protection Error / Steering Tag cannot be invalidated",
    (0x1, 0xFF): "Remote Protection Error / Unspecified Error",
    (0x2, 0x05): "Remote Operation Error / Invalid RDMAP version",
    (0x2, 0x06): "Remote Operation Error / Unexpected OpCode",
    (0x2, 0x07): "Remote Operation Error / Catastrophic error, localized to RDMAP Stream",
    (0x2, 0x08): "Remote Operation Error / Catastrophic error, global",
    (0x2, 0x09): "Remote Operation Error / Steering Tag cannot be Invalidated",
    (0x2, 0xFF): "Remote Operation Error / Unspecified Error",
}


@pytest.mark.parametrize("number, registered", IANA_RDMAP_ERRORS.items())
def test_every_rdmap_error_number_reads_as_registered(number, registered):
    abbreviated = registered.replace(" / ", ": ").replace("Steering Tag", "STag").replace("Tagged Offset", "TO")
    assert error_name(0, *number) == abbreviated


def test_the_rdmap_error_table_is_the_registry():
    assert {(e.etype, e.code) for e in RdmapError if e.etype} == set(IANA_RDMAP_ERRORS)


@pytest.mark.parametrize("code", [0x00, 0x42, 0xFF])
def test_rdmap_local_catastrophic_takes_any_code(code):
    """The registry's 0x0/0x0/ALL: Local Catastrophic Error whatever the code."""
    assert error_name(0, 0, code) == "Local Catastrophic Error"


@pytest.mark.parametrize("number, expected", [
    ((1, 1, 0x09), "Tagged Buffer Error: undefined code 0x09"),
    ((1, 0, 0x01), "Local Catastrophic: undefined code 0x01"),
    ((0, 3, 0x00), "undefined layer 0 type 3"),
    ((5, 0, 0x00), "undefined layer 5 type 0"),
])
def test_numbers_no_rfc_defines_are_said_to_be_undefined(number, expected):
    assert error_name(*number) == expected
