"""The host's end of the control link (driver/link.py): SLIP as RFC 1055 spells it, requests as abi/
documents them, and a pyserial port that only echoes (``loop://``) never taken for a board."""

import struct
import zlib

import pytest
import serial

from abi.link import Op, Status, TxInput
from abi.rx import register_map
from abi.tx import tsn_request_bytes
from driver.link import LinkClient, LinkTimeout, SerialLink, SlipFrames, decode_response, encode_request, slip_encode


def test_slip_escapes_end_and_esc_and_brackets_frames():
    # RFC 1055: END (0xC0) becomes ESC ESC_END (0xDB 0xDC), ESC (0xDB) becomes ESC ESC_ESC (0xDB 0xDD).
    assert slip_encode(b"\x01\xc0\x02\xdb\x03") == bytes.fromhex("c0 01 dbdc 02 dbdd 03 c0")


def test_slip_frames_skip_empty_frames_and_mark_bad_escapes():
    frames = SlipFrames()
    assert frames.feed(bytes.fromhex("c0c0 0102 dbdc")) == []
    assert frames.feed(bytes.fromhex("03 c0 c0 04 db05 06 c0 07")) == [b"\x01\x02\xc0\x03", None]
    assert frames.feed(b"\xc0") == [b"\x07"]


def test_request_layout():
    wire = encode_request(7, Op.REG_WRITE, 0x410, 0, b"\x78\x56\x34\x12")
    body = bytes([7, 0x02, 0x10, 0x04, 0, 0, 0, 0, 0x78, 0x56, 0x34, 0x12])
    assert SlipFrames().feed(wire) == [body + struct.pack("<I", zlib.crc32(body))]


def test_response_needs_its_crc():
    body = bytes([7, 0x81, 0]) + b"\x01\x02\x03\x04"
    good = body + struct.pack("<I", zlib.crc32(body))
    assert decode_response(good).body == b"\x01\x02\x03\x04"
    assert decode_response(good[:-1] + bytes([good[-1] ^ 1])) is None


def test_an_echoing_port_is_not_a_board():
    """pyserial's loop:// returns every byte written: the request itself, whose CRC is good, must not pass
    for the response (the board's responses carry op | 0x80)."""
    port = serial.serial_for_url("loop://", timeout=0.01)
    with pytest.raises(LinkTimeout):
        SerialLink(port, baud=1e6, latency=0.01, retries=1)


def test_a_record_of_the_wrong_length_is_not_sent():
    """PUSH_RECORD carries exactly one record of its stream (abi.tx.tsn_request_layout: 5 bytes for TSN)."""
    client = LinkClient(baud=3_000_000)
    with pytest.raises(ValueError, match="TSN record is 5 bytes"):
        next(client.push_record(TxInput.TSN, bytes(tsn_request_bytes() - 1)))
    record = bytes(range(1, tsn_request_bytes() + 1))
    (frame,) = SlipFrames().feed(next(client.push_record(TxInput.TSN, record)).data)
    # seq u8, op u8, address u32le (the stream), length u16le, the record, the CRC (docs/architecture/control-link.md)
    assert frame[1] == Op.PUSH_RECORD and struct.unpack_from("<I", frame, 2)[0] == TxInput.TSN
    assert frame[8:-4] == record


def run_against_staging_words(client: LinkClient, exchange, pending: int = 0) -> list[tuple[int, int]]:
    """Run ``exchange`` against a board that answers every request OK (COMMIT reads 0: taken), but the first
    ``pending`` REG_WRITE_WAITs PENDING and the REG_READs after each of them 1 once; the (address, word) of every
    REG_WRITE and REG_WRITE_WAIT, in order, and ``("read", address)`` for every REG_READ."""
    writes, result, reads_due = [], None, 0
    try:
        while True:
            action = exchange.send(result)
            if hasattr(action, "data"):
                (frame,) = SlipFrames().feed(action.data)
                seq, op, address = frame[0], frame[1], struct.unpack_from("<I", frame, 2)[0]
                status, word = Status.OK, 0
                if op in (Op.REG_WRITE, Op.REG_WRITE_WAIT):
                    writes.append((address, struct.unpack_from("<I", frame, 8)[0]))
                if op == Op.REG_WRITE_WAIT and pending:
                    pending, status, reads_due = pending - 1, Status.PENDING, 1
                elif op == Op.REG_READ:
                    writes.append(("read", address))
                    word, reads_due = (1, reads_due - 1) if reads_due else (0, 0)
                body = bytes([seq, op | 0x80, status]) + (struct.pack("<I", word) if op == Op.REG_READ else b"")
                answer = slip_encode(body + struct.pack("<I", zlib.crc32(body)))
                result = None
            else:
                result, answer = answer, b""
    except StopIteration:
        return writes


def test_a_table_row_writes_only_the_staging_words_that_changed():
    """The register file keeps a table's staging words after a commit (hdl/bus/register_file.py)."""
    window = register_map().tables["region"]
    client = LinkClient(baud=3_000_000)
    first = run_against_staging_words(client, client.write_table(window, {"index": 3, "entry": {"valid": 0}}))
    assert [address for address, _ in first] == [window.base + 4 * i for i in range(window.words)] + [window.commit]
    again = run_against_staging_words(client, client.write_table(window, {"index": 4, "entry": {"valid": 0}}))
    assert again == [(window.base, window.encode({"index": 4, "entry": {"valid": 0}})[0]), (window.commit, 1)]


def test_a_commit_is_one_request_unless_the_table_holds_the_row():
    """The COMMIT goes as REG_WRITE_WAIT (abi.link): a table that took the row costs no REG_READ; one the board
    answers PENDING for (the row still held after WAIT_READS reads) is polled with REG_READ until COMMIT reads 0."""
    window = register_map().tables["buffer"]
    row = {"stream": 1, "qn": 0, "address": 0x1000, "length": 64}
    client = LinkClient(baud=3_000_000)
    run_against_staging_words(client, client.write_table(window, row))
    taken = run_against_staging_words(client, client.write_table(window, row))
    assert taken == [(window.commit, 1)]
    held = run_against_staging_words(client, client.write_table(window, row), pending=1)
    assert held == [(window.commit, 1), ("read", window.commit), ("read", window.commit)]
