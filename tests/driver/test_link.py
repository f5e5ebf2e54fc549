"""The host's end of the control link (driver/link.py): SLIP as RFC 1055 spells it, requests as abi/
documents them, the zero-run coding of record bodies (abi.link, version 7) against a decoder written here,
and a pyserial port that only echoes (``loop://``) never taken for a board."""

import itertools
import random
import struct
import zlib

import pytest
import serial

from abi.link import (LINK_MAGIC, LINK_VERSION, REQUEST_DATA_BYTES, LinkQueue, Op, Status, TxInput, zero_run_decode,
                      zero_run_encode)
from abi.rx import register_map, report_bytes
from abi.tx import tsn_request_bytes, work_request_bytes
from driver.link import (LinkClient, LinkError, LinkTimeout, Polled, SerialLink, SlipFrames, decode_response,
                         encode_request, slip_encode)


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


def naive_zero_run_decode(coded: bytes) -> bytes:
    """docs/architecture/control-link.md's rule read literally: 0x00 then n (1..255) is n zeros, any other
    byte is itself."""
    out, rest = [], list(coded)
    while rest:
        byte = rest.pop(0)
        if byte != 0:
            out.append(byte)
        else:
            count = rest.pop(0)
            assert 1 <= count <= 255
            out.extend([0] * count)
    return bytes(out)


def with_zero_runs(rng: random.Random, size: int) -> bytes:
    """Random bytes, about half of them in zero runs of random lengths (up to 600: past one count byte)."""
    data = bytearray()
    while len(data) < size:
        if rng.random() < 0.5:
            data += bytes(rng.choice((1, 2, 3, rng.randrange(1, 256), rng.randrange(250, 600))))
        else:
            data += bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 8)))
    return bytes(data[:size])


def test_zero_run_coding_round_trips_against_a_naive_decoder():
    """Property over 500 random byte strings with zero runs (none to past 255): abi's coding decodes back by
    the naive decoder and by abi's, in the fewest bytes the rule allows."""
    rng = random.Random(7)
    for _ in range(500):
        data = with_zero_runs(rng, rng.randrange(0, 1200))
        coded = zero_run_encode(data)
        assert naive_zero_run_decode(coded) == data
        assert zero_run_decode(coded) == data
        # Each run costs 2 bytes for each 255 of it begun, every other byte 1: the coding's longest runs.
        zero_runs = [len(list(run)) for zero, run in itertools.groupby(data, lambda byte: byte == 0) if zero]
        assert len(coded) == sum(1 for byte in data if byte) + sum(2 * -(-run // 255) for run in zero_runs)


def test_zero_run_coding_of_every_run_length():
    for length in range(1, 600):
        data = b"\x07" + bytes(length) + b"\x09"
        coded = zero_run_encode(data)
        assert naive_zero_run_decode(coded) == data
        full, rest = divmod(length, 255)
        assert coded == b"\x07" + b"\x00\xff" * full + (bytes([0, rest]) if rest else b"") + b"\x09"
    assert zero_run_encode(bytes(3)) == b"\x00\x03"          # a record ending in zeros ends in a run
    assert zero_run_encode(b"") == b""


@pytest.mark.parametrize("coded", [b"\x00", b"\x05\x00", b"\x00\x00", b"\x00\x00\x03", b"\x00\x02\x00"])
def test_a_zero_without_its_count_does_not_decode(coded):
    with pytest.raises(ValueError):
        zero_run_decode(coded)


def answer(request_wire: bytes, status: int, body: bytes) -> bytes:
    """A board's response to the request ``request_wire``: ``body`` as it goes on the wire."""
    (frame,) = SlipFrames().feed(request_wire)
    response = bytes([frame[0], frame[1] | 0x80, status]) + body
    return slip_encode(response + struct.pack("<I", zlib.crc32(response)))


def run_one(exchange, status: int, body: bytes):
    """Run ``exchange`` (one request) against a board that answers it ``status`` and ``body`` (as sent); the
    request's frame and the exchange's result."""
    action = next(exchange)
    request = action.data
    exchange.send(None)
    try:
        exchange.send(answer(request, status, body))
    except StopIteration as stop:
        (frame,) = SlipFrames().feed(request)
        return frame, stop.value
    raise AssertionError("the exchange wanted more than one response")


def test_a_record_is_pushed_zero_run_coded():
    """PUSH_RECORD's data is the record zero-run coded: a work request of mostly zeros goes in a few bytes."""
    record = bytearray(work_request_bytes())
    record[0], record[5], record[20] = 0x11, 0x22, 0x33
    frame, pushed = run_one(LinkClient(baud=3_000_000).push_record(TxInput.WORK, bytes(record)), Status.OK, b"")
    tail = work_request_bytes() - 21
    assert frame[8:-4] == bytes([0x11, 0, 4, 0x22, 0, 14, 0x33, 0, tail]) and pushed is True


def test_pops_and_polls_are_decoded():
    """The bodies of POP_REPORT and POLL come zero-run coded; the client hands up the records decoded."""
    rng = random.Random(3)
    reports = [with_zero_runs(rng, report_bytes()) for _ in range(3)] + [bytes(report_bytes())]
    body = b"".join(report + bytes(-len(report) % 8) for report in reports[:-1]) + reports[-1]
    client = LinkClient(baud=3_000_000)
    _, popped = run_one(client.pop_reports(1000), Status.OK, zero_run_encode(body))
    assert popped == reports
    polled_body = struct.pack("<II", LinkQueue.REPORT | LinkQueue.ACK, 0x1000) + body
    frame, polled = run_one(client.poll(0, 1000), Status.OK, zero_run_encode(polled_body))
    assert polled == Polled(LinkQueue.REPORT | LinkQueue.ACK, 0x1000, tuple(reports))
    with pytest.raises(LinkError, match="zero-run"):
        run_one(client.pop_reports(1000), Status.OK, zero_run_encode(body) + b"\x00")


def test_a_board_of_another_link_version_is_refused():
    for version, refused in ((LINK_VERSION - 1, True), (LINK_VERSION, False)):
        body = LINK_MAGIC + bytes([version, 16]) + REQUEST_DATA_BYTES.to_bytes(2, "little")
        if refused:
            with pytest.raises(LinkError, match=f"version {version}, this host's {LINK_VERSION}"):
                run_one(LinkClient(baud=3_000_000).ping(), Status.OK, body)
        else:
            assert run_one(LinkClient(baud=3_000_000).ping(), Status.OK, body)[1].version == LINK_VERSION


def test_the_model_board_codes_record_bodies_and_decodes_pushes():
    """sim/board_model.py's link (the `board` backend without hardware) as the gateware's: PING says version 7,
    a pop's body goes as abi codes it and its retry (same seq and op) comes back byte for byte, a PUSH_RECORD's
    data is decoded, and data that does not decode to one record is BAD_REQUEST."""
    from model.rnic.link import Side
    from model.rnic.pair import IPS, MACS
    from sim.board_model import ModelBoard

    board = ModelBoard(MACS[Side.A], IPS[Side.A])
    port = board.serial
    rng = random.Random(11)
    reports = [with_zero_runs(rng, report_bytes()) for _ in range(2)] + [bytes(report_bytes())] * 6
    board.reports.extend(reports)

    def exchange(seq: int, op: Op, address: int = 0, length: int = 0, data: bytes = b""):
        port.write(encode_request(seq, op, address, length, data))
        wire = port.read(port.in_waiting)
        (frame,) = SlipFrames().feed(wire)
        return wire, decode_response(frame)

    _, ping = exchange(1, Op.PING)
    assert ping.body[4] == LINK_VERSION == 7
    wire, popped = exchange(2, Op.POP_REPORT, 0, 1000)
    body = b"".join(report + bytes(-len(report) % 8) for report in reports[:-1]) + reports[-1]
    assert popped.body == zero_run_encode(body) and naive_zero_run_decode(popped.body) == body
    assert exchange(2, Op.POP_REPORT, 0, 1000)[0] == wire
    assert exchange(3, Op.POP_REPORT, 0, 1000)[1].status == Status.EMPTY
    pushed = []   # what the board's control takes, in place of its transmit engine's model
    board.control.push_record = lambda stream, data: pushed.append((stream, data)) or True
    record = bytes(work_request_bytes() - 1) + b"\x07"
    assert exchange(4, Op.PUSH_RECORD, TxInput.WORK, 0, zero_run_encode(record))[1].status == Status.OK
    assert pushed == [(TxInput.WORK, record)]
    for seq, data in enumerate((b"\x00", zero_run_encode(record[1:]), zero_run_encode(record) + b"\x01",
                                b"\x00\x00" + zero_run_encode(record), record), start=5):
        assert exchange(seq, Op.PUSH_RECORD, TxInput.WORK, 0, data)[1].status == Status.BAD_REQUEST, data
    assert len(pushed) == 1
