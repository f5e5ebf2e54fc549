"""The control link: the host's requests over the UART, executed against the board's engine, memory and MAC.

::

    uart_rx ─► UartRx ─► SlipDecoder ─► request buffer (header registers, data RAM, CRC-32 check)
                                                │ a whole request whose CRC matched
                                                ▼
               axil (AXI4-Lite manager) ◄── executor ──► memory (byte port of the host memory)
    report, ack, exceptions (pops) ───────►  │   │  ──► frames (raw Ethernet frames to the MAC)
    completions, refusals (pops) ───────►    │   ├──► pushes (requests to the transmit engine)
    mac_counters ───────────────────────►    │   └──► hold RAM (the body of the response)
                                             ▼
    uart_tx ◄─ UartTx ◄─ SlipEncoder ◄─ CrcAppender ◄─ ZeroRunEncoder ◄─ response bytes

The wire format and the operations are :mod:`abi.link`'s. One
request is handled at a time: bytes that arrive while one is executed or
answered are dropped (the frame they belong to is not executed; the host
retries). A request is executed only once its CRC matched, so a corrupted
write never reaches the engine. A retry of the last request (same ``seq``
and ``op``) of a :data:`~abi.link.REPLAYED_OPS` op is answered with
the status and body the first execution left, without executing it again.

Responses other than a memory read take their body from the hold RAM
(``hold_bytes``): the register word, the counters, the records of a pop (as
many as wait and fit in the request's ``length`` and the hold RAM), a popped
exception packet (cut, and flagged so, past the hold RAM), POLL's flags of
the streams that hold a record and the register it names (then, with a
``length``, the reports it popped behind them).

REG_WRITE_WAIT is a REG_WRITE followed by reads of the same register, one
after the other, until one reads 0 (OK) or ``WAIT_READS`` did not (PENDING):
a table's COMMIT written so answers once the table took the row.

The transmit engine's request streams (:class:`~abi.link.TxInput`) take a
record of PUSH_RECORD, gathered from the request's bytes into one register;
its record streams (:class:`~abi.link.TxOutput`) give one to POP_RECORD.

Link version 7 codes zero runs (:func:`abi.link.zero_run_encode`): the body
of a response of :data:`~abi.link.ZERO_RUN_RESPONSES` goes through the
``ZeroRunEncoder`` on its way out, before the CRC (which covers the coded
bytes); PUSH_RECORD's data is decoded as it is gathered, the register
cleared first and each run skipped over, and refused (BAD_REQUEST) unless it
makes exactly one record of its stream. The hold RAM keeps bodies decoded,
so a retried pop is coded again to the same bytes.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import crc, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.link import (CRC_BYTES, HOLD_BYTES, LINK_MAGIC, LINK_VERSION, PING_BODY_BYTES, POLL_BODY_BYTES, REPLAYED_OPS,
                      REQUEST_DATA_BYTES, REQUEST_HEADER_BYTES, RESPONSE_FLAG, WAIT_READS, ZERO_RUN_RESPONSES,
                      LinkQueue, Op, Status, TxInput, TxOutput, tx_input_bytes, tx_output_bytes)
from abi.rx import ack_bytes, exception_record_layout, report_bytes
from hdl.bus.axi import Axi4LiteSignature, Resp
from hdl.bus.axis import AxiStreamSignature, PacketToAxiStream, axis_payload_layout
from hdl.layout import struct_layout
from hdl.link.host_memory import byte_port_signature
from hdl.link.slip import SlipDecoder, SlipEncoder, frame_byte_layout
from hdl.link.uart import UartRx, UartTx
from hdl.link.zero_run import ZeroRunEncoder, coded_byte_layout
from hdl.mac.mac import mac_counters_layout
from hdl.stream.queue import Queue

__all__ = ["ControlLink", "CrcAppender"]

#: The request buffer: the largest data and its CRC.
REQUEST_BUFFER_BYTES = REQUEST_DATA_BYTES + CRC_BYTES
#: Header bytes kept in registers: the header and the first data word (a register write's value).
_KEPT_BYTES = REQUEST_HEADER_BYTES + 4
#: The ports of the transmit engine's streams, in TxInput and TxOutput order.
_PUSH_PORTS = ("push_work", "push_read_response", "push_control", "push_tsn", "push_peer_sack")
_POP_PORTS = ("completions", "tsn_refused", "read_responses_refused", "transport_stopped")
assert len(_PUSH_PORTS) == len(TxInput) and len(_POP_PORTS) == len(TxOutput)


class CrcAppender(wiring.Component):
    """Frames of bytes in, the same frames with their CRC-32 (``zlib.crc32``, least significant byte first) out.

    Ports
    -----
    sink, source : ``stream.Signature(frame_byte_layout())``
    """

    def __init__(self):
        super().__init__({"sink": In(stream.Signature(frame_byte_layout())),
                          "source": Out(stream.Signature(frame_byte_layout()))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = checksum = crc.catalog.CRC32_ETHERNET(8).create()
        first = Signal(init=1)
        index = Signal(2)
        m.d.comb += checksum.data.eq(self.sink.payload.data)
        with m.FSM():
            with m.State("BYTES"):
                m.d.comb += [self.source.payload.data.eq(self.sink.payload.data),
                             self.source.valid.eq(self.sink.valid), self.sink.ready.eq(self.source.ready)]
                with m.If(self.sink.valid & self.source.ready):
                    m.d.comb += [checksum.valid.eq(1), checksum.start.eq(first)]
                    m.d.sync += first.eq(0)
                    with m.If(self.sink.payload.last):
                        m.d.sync += index.eq(0)
                        m.next = "CRC"
            with m.State("CRC"):
                m.d.comb += [self.source.payload.data.eq(checksum.crc.word_select(index, 8)),
                             self.source.payload.last.eq(index == 3), self.source.valid.eq(1)]
                with m.If(self.source.ready):
                    m.d.sync += index.eq(index + 1)
                    with m.If(index == 3):
                        m.d.sync += first.eq(1)
                        m.next = "BYTES"
        return m


def _ping_word(memory_bytes: int) -> int:
    body = LINK_MAGIC + bytes([LINK_VERSION, memory_bytes.bit_length() - 1]) + REQUEST_DATA_BYTES.to_bytes(2, "little")
    assert len(body) == PING_BODY_BYTES
    return int.from_bytes(body, "little")


class ControlLink(wiring.Component):
    """The board's end of the control link; see the module docs and :mod:`abi.link`.

    Parameters
    ----------
    divisor : int
        UART clocks per bit (:func:`hdl.link.uart.uart_divisor`).
    memory_bytes : int
        The host memory behind ``memory`` (a power of two).
    width_bytes : int
        ``W`` of ``exceptions`` and ``frames`` (the engine's and the MAC's).
    hold_bytes : int
        The hold RAM: the longest exception packet kept whole is this less 8 bytes.

    Ports
    -----
    uart_rx : ``In(1, init=1)``, uart_tx : ``Out(1, init=1)``
    axil : ``Out(Axi4LiteSignature(addr_width=register_bits, data_width=32))``
        To the engine's register file.
    memory : ``Out(byte_port_signature(memory_bytes))``
    report, ack : ``In(AxiStreamSignature(report_bytes()))``, ``In(AxiStreamSignature(ack_bytes()))``
    exceptions : ``In(AxiStreamSignature(W, exception_record_layout().size))``
    frames : ``Out(AxiStreamSignature(W))``
        Raw frames of SEND_FRAME, to the MAC; ``tvalid`` and ``tdata`` from flip-flops.
    mac_counters : ``In(mac_counters_layout())``
    push_work, push_read_response, push_control, push_tsn, push_peer_sack : ``Out(AxiStreamSignature(...))``
        The transmit engine's request streams (:class:`~abi.link.TxInput`), a record a transfer; a stream left
        unconnected (``push_peer_sack`` of an RNIC without the transport unit) never has room.
    completions, tsn_refused, read_responses_refused, transport_stopped : ``In(AxiStreamSignature(...))``
        Its record streams (:class:`~abi.link.TxOutput`); one left unconnected is always empty.
    """

    def __init__(self, *, divisor: int, memory_bytes: int, width_bytes: int = 8, hold_bytes: int = HOLD_BYTES,
                 register_bits: int = 13):
        if hold_bytes % width_bytes or hold_bytes & (hold_bytes - 1) or hold_bytes < 8 * (report_bytes() + 7) // 8:
            raise ValueError(f"hold_bytes must be a power of two holding a report record, not {hold_bytes}")
        if width_bytes != 8:
            raise ValueError(f"the hold RAM's words are 8 bytes, a beat each: W must be 8, not {width_bytes}")
        self._divisor, self._memory_bytes, self._width, self._hold_bytes = divisor, memory_bytes, width_bytes, hold_bytes
        super().__init__({
            "uart_rx": In(1, init=1),
            "uart_tx": Out(1, init=1),
            "axil": Out(Axi4LiteSignature(addr_width=register_bits, data_width=32)),
            "memory": Out(byte_port_signature(memory_bytes)),
            "report": In(AxiStreamSignature(report_bytes())),
            "ack": In(AxiStreamSignature(ack_bytes())),
            "exceptions": In(AxiStreamSignature(width_bytes, exception_record_layout().size)),
            "frames": Out(AxiStreamSignature(width_bytes)),
            "mac_counters": In(mac_counters_layout()),
            **{name: Out(AxiStreamSignature(size)) for name, size in zip(_PUSH_PORTS, tx_input_bytes().values())},
            **{name: In(AxiStreamSignature(size)) for name, size in zip(_POP_PORTS, tx_output_bytes().values())},
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        lane_bits = (width - 1).bit_length()

        # Receive: UART, SLIP, the request buffer.
        m.submodules.uart_rx = uart_rx = UartRx(self._divisor)
        m.submodules.slip_decoder = decoder = SlipDecoder()
        m.d.comb += uart_rx.rx.eq(self.uart_rx)
        wiring.connect(m, uart_rx.source, decoder.sink)
        m.submodules.request_crc = request_crc = crc.catalog.CRC32_ETHERNET(8).create()
        m.submodules.request_data = request_data = memory.Memory(shape=8, depth=REQUEST_BUFFER_BYTES, init=[])
        data_write = request_data.write_port()
        data_read = request_data.read_port(transparent_for=())

        kept = Signal(8 * _KEPT_BYTES)
        count = Signal(range(REQUEST_HEADER_BYTES + REQUEST_BUFFER_BYTES + 2))
        dropped = Signal()
        busy = Signal()
        start = Signal()
        data_length = Signal(range(REQUEST_DATA_BYTES + 1))
        decoded = decoder.source
        m.d.comb += [request_crc.data.eq(decoded.payload.data), data_write.data.eq(decoded.payload.data),
                     data_write.addr.eq(count - REQUEST_HEADER_BYTES)]
        with m.If(decoded.valid & ~decoded.payload.end):
            m.d.comb += [request_crc.valid.eq(1), request_crc.start.eq(count == 0)]
            with m.If((count < _KEPT_BYTES) & ~busy):
                m.d.sync += kept.word_select(count[:4], 8).eq(decoded.payload.data)
            with m.If((count >= REQUEST_HEADER_BYTES) & (count < REQUEST_HEADER_BYTES + REQUEST_BUFFER_BYTES)
                      & ~busy):
                m.d.comb += data_write.en.eq(1)
            with m.If(count < REQUEST_HEADER_BYTES + REQUEST_BUFFER_BYTES + 1):
                m.d.sync += count.eq(count + 1)
            with m.If(busy):
                m.d.sync += dropped.eq(1)
        with m.If(decoded.valid & decoded.payload.end):
            m.d.sync += [count.eq(0), dropped.eq(0)]
            with m.If(~busy):
                m.d.sync += data_length.eq(count - REQUEST_HEADER_BYTES - CRC_BYTES)
            complete = ((count >= REQUEST_HEADER_BYTES + CRC_BYTES)
                        & (count <= REQUEST_HEADER_BYTES + REQUEST_BUFFER_BYTES))
            with m.If(~decoded.payload.error & ~dropped & ~busy & complete & request_crc.match_detected):
                m.d.sync += start.eq(1)
        seq, op, address, length, word = kept[0:8], kept[8:16], kept[16:48], kept[48:64], kept[64:96]

        # Transmit: response bytes, zero-run coding, CRC, SLIP, UART.
        m.submodules.zero_run_encoder = zero_run_encoder = ZeroRunEncoder()
        m.submodules.crc_appender = appender = CrcAppender()
        m.submodules.slip_encoder = encoder = SlipEncoder()
        m.submodules.uart_tx = uart_tx = UartTx(self._divisor)
        wiring.connect(m, appender.source, encoder.sink)
        wiring.connect(m, encoder.source, uart_tx.sink)
        m.d.comb += self.uart_tx.eq(uart_tx.tx)
        # The response bytes go through a queue: a memory read's byte (a block RAM's output and the lane
        # mux) and the CRC of it are then a register apart.
        m.submodules.response_queue = response_queue = Queue(coded_byte_layout(), 2)
        wiring.connect(m, response_queue.source, zero_run_encoder.sink)
        wiring.connect(m, zero_run_encoder.source, appender.sink)
        out = response_queue.sink

        # Raw frames to the MAC.
        m.submodules.frame_queue = frame_queue = Queue(axis_payload_layout(width))
        m.submodules.frame_out = frame_out = PacketToAxiStream(width)
        wiring.connect(m, frame_queue.source, frame_out.packets)
        wiring.connect(m, frame_out.axis, wiring.flipped(self.frames))

        # The hold RAM.
        hold_words = self._hold_bytes // 8
        m.submodules.hold = hold = memory.Memory(shape=64, depth=hold_words, init=[])
        hold_write = hold.write_port()
        hold_read = hold.read_port(transparent_for=())

        # Executor state.
        last_seq, last_op, last_valid = Signal(8), Signal(8), Signal()
        status = Signal(8)
        body_length = Signal(range(max(0x10000, self._hold_bytes + 1)))
        body_from_memory = Signal()
        index = Signal(range(max(0x10000, self._hold_bytes + 1)))
        lane = Signal(3)
        # The AXI4-Lite master's valids and readies are flip-flops and its address and data come
        # straight from the request's registers: the engine's register file decodes them on its own
        # clock edge, across the die from this executor.
        ar_valid, r_ready, aw_valid, w_valid, b_ready = (Signal(name=name) for name in
                                                         ("ar_valid", "r_ready", "aw_valid", "w_valid", "b_ready"))
        m.d.comb += [self.axil.araddr.eq(address), self.axil.arvalid.eq(ar_valid), self.axil.rready.eq(r_ready),
                     self.axil.awaddr.eq(address), self.axil.awvalid.eq(aw_valid), self.axil.wdata.eq(word),
                     self.axil.wstrb.eq(0xF), self.axil.wvalid.eq(w_valid), self.axil.bready.eq(b_ready)]
        beat = Signal(axis_payload_layout(width))
        exception_user = Signal(32)
        exception_bytes = Signal(16)
        packet_base = Signal(range(hold_words))     # the hold word of the current exception packet's header
        length_field = struct_layout(exception_record_layout())["length"]
        exception_length_field = slice(length_field.offset, length_field.offset + length_field.width)
        truncated = Signal()
        memory_bytes = self._memory_bytes
        in_memory = Signal()
        m.d.comb += [data_read.addr.eq(index), hold_read.en.eq(0), hold_read.addr.eq(index[3:])]
        m.d.comb += busy.eq(1)

        def respond(code, body=0, from_memory=0):
            m.d.sync += [status.eq(code), body_length.eq(body), body_from_memory.eq(from_memory), index.eq(0)]
            m.next = "HEADER"

        padded_report = Cat(self.report.tdata, Const(0, 64))
        counters = Cat(self.mac_counters.as_value(), Const(0, 64))
        record_words = {Op.POP_REPORT: (report_bytes() + 7) // 8, Op.POP_ACK: (ack_bytes() + 7) // 8,
                        Op.MAC_COUNTERS: (len(self.mac_counters.as_value()) + 63) // 64}
        fill_last = Signal(range(8))        # the last word of a record
        record_word = Signal(range(8))      # the word of the record FILL writes

        # The transmit engine's streams: a pushed record is gathered into `record`, a popped one comes from
        # its port's tdata.
        pushes = [getattr(self, name) for name in _PUSH_PORTS]
        pops = [getattr(self, name) for name in _POP_PORTS]
        record = Signal(8 * max(tx_input_bytes().values()))
        record_filled = Signal(range(max(tx_input_bytes().values()) + 1))   # the record's bytes decoded so far
        run_next = Signal()  # PUSH_RECORD's coded data: the byte read next is a zero run's count
        coded_byte = Signal(8)   # the byte of PUSH_RECORD's coded data being decoded
        pushing = Signal()   # `record` is offered on the port of `address`
        known_input = address < len(TxInput)
        known_output = address < len(TxOutput)
        push_length = Signal(range(max(tx_input_bytes().values()) + 1))
        pop_length = Signal(range(max(tx_output_bytes().values()) + 1))
        m.d.comb += [push_length.eq(0), pop_length.eq(0)]
        for port, (code, size) in zip(pushes, tx_input_bytes().items()):
            with m.If(address == code):
                m.d.comb += push_length.eq(size)
            m.d.comb += [port.tdata.eq(record[:len(port.tdata)]), port.tkeep.eq(-1), port.tlast.eq(1),
                         port.tvalid.eq(pushing & (address == code))]
        pop_valid = Cat(port.tvalid for port in pops).bit_select(address[:3], 1) & known_output
        pop_words = Signal(range(8))
        padded_pop = Signal(8 * 8 * ((max(tx_output_bytes().values()) + 7) // 8))
        for port, (code, size) in zip(pops, tx_output_bytes().items()):
            with m.If(address == code):
                m.d.comb += [pop_length.eq(size), pop_words.eq((size + 7) // 8 - 1), padded_pop.eq(port.tdata)]
        # A popped record's bytes; POLL's body: the streams holding a record, in LinkQueue's order.
        takes_reports = (op == Op.POP_REPORT) | (op == Op.POLL)    # a POLL with a `length` brings reports too
        record_size = Mux(takes_reports, report_bytes(), Mux(op == Op.POP_ACK, ack_bytes(), pop_length))
        waiting = Cat(self.report.tvalid, self.ack.tvalid, self.exceptions.tvalid, *(port.tvalid for port in pops))
        assert len(waiting) == len(LinkQueue)
        poll_flags = Signal(32)
        wait_reads = Signal(range(WAIT_READS))   # REG_WRITE_WAIT's reads of its register so far, less one

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += busy.eq(start)
                with m.If(start):
                    m.d.sync += [start.eq(0), last_seq.eq(seq), last_op.eq(op), last_valid.eq(1), index.eq(0),
                                 in_memory.eq(address + Mux(op == Op.MEM_READ, length, data_length) <= memory_bytes)]
                    retry = last_valid & (seq == last_seq) & (op == last_op)
                    replayed = Cat(op == code for code in REPLAYED_OPS).any()
                    with m.If(retry & replayed):
                        m.d.sync += index.eq(0)
                        m.next = "HEADER"
                    with m.Else():
                        m.next = "DECODE"
            with m.State("DECODE"):
                no_data = data_length == 0
                with m.Switch(op):
                    with m.Case(Op.PING):
                        with m.If(no_data):
                            m.d.comb += [hold_write.en.eq(1), hold_write.addr.eq(0),
                                         hold_write.data.eq(_ping_word(memory_bytes))]
                            respond(Status.OK, PING_BODY_BYTES)
                        with m.Else():
                            respond(Status.BAD_REQUEST)
                    with m.Case(Op.REG_READ):
                        with m.If(no_data):
                            m.d.sync += ar_valid.eq(1)
                            m.next = "REG_READ"
                        with m.Else():
                            respond(Status.BAD_REQUEST)
                    with m.Case(Op.REG_WRITE, Op.REG_WRITE_WAIT):
                        with m.If(data_length == 4):
                            m.d.sync += [aw_valid.eq(1), w_valid.eq(1), wait_reads.eq(0)]
                            m.next = "REG_WRITE"
                        with m.Else():
                            respond(Status.BAD_REQUEST)
                    with m.Case(Op.MEM_READ):
                        with m.If(~no_data):
                            respond(Status.BAD_REQUEST)
                        with m.Elif(~in_memory):
                            respond(Status.BAD_ADDRESS)
                        with m.Else():
                            respond(Status.OK, length, from_memory=1)
                    with m.Case(Op.MEM_WRITE):
                        with m.If(no_data):
                            respond(Status.BAD_REQUEST)
                        with m.Elif(~in_memory):
                            respond(Status.BAD_ADDRESS)
                        with m.Else():
                            m.next = "MEM_WRITE"
                    with m.Case(Op.POP_REPORT, Op.POP_ACK, Op.MAC_COUNTERS):
                        with m.If(~no_data):
                            respond(Status.BAD_REQUEST)
                        with m.Elif((op == Op.POP_REPORT) & ~self.report.tvalid):
                            respond(Status.EMPTY)
                        with m.Elif((op == Op.POP_ACK) & ~self.ack.tvalid):
                            respond(Status.EMPTY)
                        with m.Else():
                            for code, words in record_words.items():
                                with m.If(op == code):
                                    m.d.sync += fill_last.eq(words - 1)
                            m.d.sync += record_word.eq(0)
                            m.next = "FILL"
                    with m.Case(Op.POP_EXCEPTION):
                        with m.If(~no_data):
                            respond(Status.BAD_REQUEST)
                        with m.Elif(~self.exceptions.tvalid):
                            respond(Status.EMPTY)
                        with m.Else():
                            m.d.sync += [packet_base.eq(0), index.eq(1), truncated.eq(0)]
                            m.next = "EXCEPTION"
                    with m.Case(Op.SEND_FRAME):
                        with m.If(no_data):
                            respond(Status.BAD_REQUEST)
                        with m.Else():
                            m.d.sync += [beat.eq(0), lane.eq(0)]
                            m.next = "FRAME_READ"
                    with m.Case(Op.PUSH_RECORD):
                        with m.If(~known_input | no_data):
                            respond(Status.BAD_REQUEST)
                        with m.Else():
                            m.d.sync += [record.eq(0), record_filled.eq(0), run_next.eq(0)]
                            m.next = "RECORD_READ"
                    with m.Case(Op.POP_RECORD):
                        with m.If(~no_data | ~known_output):
                            respond(Status.BAD_REQUEST)
                        with m.Elif(~pop_valid):
                            respond(Status.EMPTY)
                        with m.Else():
                            m.d.sync += [fill_last.eq(pop_words), record_word.eq(0)]
                            m.next = "FILL"
                    with m.Case(Op.POLL):
                        # The flags now, then the register at `address`, read as REG_READ reads it.
                        with m.If(no_data):
                            m.d.sync += [poll_flags.eq(waiting), ar_valid.eq(1)]
                            m.next = "REG_READ"
                        with m.Else():
                            respond(Status.BAD_REQUEST)
                    with m.Default():
                        respond(Status.BAD_REQUEST)

            # A record to the transmit engine: its bytes from the request buffer, zero-run decoded into the
            # cleared `record` (a run only moves `record_filled` on), then offered whole.
            with m.State("RECORD_READ"):
                m.next = "RECORD_LATCH"
            with m.State("RECORD_LATCH"):     # the coded byte into a register: the checks below start there
                m.d.sync += coded_byte.eq(data_read.data)
                m.next = "RECORD_BYTE"
            with m.State("RECORD_BYTE"):
                coded = coded_byte
                refused = Signal()   # a count of 0, a 0x00 without its count, or bytes past the record
                m.d.sync += index.eq(index + 1)
                with m.If(run_next):
                    m.d.sync += [run_next.eq(0), record_filled.eq(record_filled + coded)]
                    m.d.comb += refused.eq((coded == 0) | (record_filled + coded > push_length))
                with m.Elif(coded == 0):
                    m.d.sync += run_next.eq(1)
                    m.d.comb += refused.eq(index == data_length - 1)
                with m.Else():
                    m.d.sync += [record.word_select(record_filled, 8).eq(coded), record_filled.eq(record_filled + 1)]
                    m.d.comb += refused.eq(record_filled == push_length)
                with m.If(refused):
                    respond(Status.BAD_REQUEST)
                with m.Elif(index == data_length - 1):
                    m.next = "RECORD_ROOM"
                with m.Else():
                    m.next = "RECORD_READ"
            # The engine's request streams are queues whose `ready` says they have room whatever `valid`
            # (hdl.stream.queue), and only this link fills them: room seen now is still there next clock.
            # Without room the request is answered FULL, nothing pushed, so the link never waits on the engine.
            push_ready = Cat(port.tready for port in pushes).bit_select(address[:3], 1)
            with m.State("RECORD_ROOM"):
                with m.If(record_filled != push_length):
                    respond(Status.BAD_REQUEST)
                with m.Elif(push_ready):
                    m.d.sync += pushing.eq(1)
                    m.next = "RECORD_PUSH"
                with m.Else():
                    respond(Status.FULL)
            with m.State("RECORD_PUSH"):
                with m.If(push_ready):
                    m.d.sync += pushing.eq(0)
                    respond(Status.OK)

            # Registers.
            with m.State("REG_READ"):
                with m.If(self.axil.arready):
                    m.d.sync += [ar_valid.eq(0), r_ready.eq(1)]
                    m.next = "REG_READ_DATA"
            with m.State("REG_READ_DATA"):
                polling = op == Op.POLL
                m.d.comb += [hold_write.addr.eq(0),
                             hold_write.data.eq(Mux(polling, Cat(poll_flags, self.axil.rdata), self.axil.rdata))]
                with m.If(self.axil.rvalid):
                    m.d.comb += hold_write.en.eq(1)
                    m.d.sync += r_ready.eq(0)
                    # REG_WRITE_WAIT: its register read back until it reads 0, at most WAIT_READS times.
                    with m.If(op == Op.REG_WRITE_WAIT):
                        with m.If(self.axil.rresp != Resp.OKAY):
                            respond(Status.BUS_ERROR)
                        with m.Elif(self.axil.rdata == 0):
                            respond(Status.OK)
                        with m.Elif(wait_reads == WAIT_READS - 1):
                            respond(Status.PENDING)
                        with m.Else():
                            m.d.sync += [wait_reads.eq(wait_reads + 1), ar_valid.eq(1)]
                            m.next = "REG_READ"
                    # A POLL whose `length` has room for its word and a report goes on to pop the reports.
                    with m.Elif(polling & (self.axil.rresp == Resp.OKAY) & self.report.tvalid
                              & (POLL_BODY_BYTES + report_bytes() <= length)):
                        m.d.sync += [index.eq(POLL_BODY_BYTES // 8), record_word.eq(0),
                                     fill_last.eq(record_words[Op.POP_REPORT] - 1)]
                        m.next = "FILL"
                    with m.Else():
                        respond(Mux(self.axil.rresp == Resp.OKAY, Status.OK, Status.BUS_ERROR),
                                Mux(polling, POLL_BODY_BYTES, 4))
            with m.State("REG_WRITE"):
                with m.If(self.axil.awready):
                    m.d.sync += aw_valid.eq(0)
                with m.If(self.axil.wready):
                    m.d.sync += w_valid.eq(0)
                with m.If((~aw_valid | self.axil.awready) & (~w_valid | self.axil.wready)):
                    m.d.sync += b_ready.eq(1)
                    m.next = "REG_WRITE_RESPONSE"
            with m.State("REG_WRITE_RESPONSE"):
                with m.If(self.axil.bvalid):
                    m.d.sync += b_ready.eq(0)
                    with m.If((op == Op.REG_WRITE_WAIT) & (self.axil.bresp == Resp.OKAY)):
                        m.d.sync += ar_valid.eq(1)   # then read it back (REG_READ_DATA)
                        m.next = "REG_READ"
                    with m.Else():
                        respond(Mux(self.axil.bresp == Resp.OKAY, Status.OK, Status.BUS_ERROR))

            # Host memory writes: a byte from the request buffer (read the clock before), written.
            with m.State("MEM_WRITE"):
                m.next = "MEM_WRITE_BYTE"
            with m.State("MEM_WRITE_BYTE"):
                m.d.comb += [self.memory.addr.eq(address + index), self.memory.wdata.eq(data_read.data),
                             self.memory.we.eq(1)]
                with m.If(self.memory.ready):
                    m.d.sync += index.eq(index + 1)
                    with m.If(index == data_length - 1):
                        respond(Status.OK)
                    with m.Else():
                        m.next = "MEM_WRITE"

            # Records and counters into the hold RAM, a word a clock; the record is taken on its last word.
            # A pop goes on with the next record while one waits and fits in `length` bytes and the hold
            # RAM (abi.link.Op.POP_REPORT): records start at whole words, `index` is the next word.
            with m.State("FILL"):
                m.d.comb += [hold_write.en.eq(1), hold_write.addr.eq(index)]
                with m.Switch(op):
                    with m.Case(Op.POP_REPORT, Op.POLL):
                        m.d.comb += hold_write.data.eq(padded_report.word_select(record_word, 64))
                    with m.Case(Op.POP_ACK):
                        m.d.comb += hold_write.data.eq(self.ack.tdata)
                    with m.Case(Op.POP_RECORD):
                        m.d.comb += hold_write.data.eq(padded_pop.word_select(record_word, 64))
                    with m.Default():
                        m.d.comb += hold_write.data.eq(counters.word_select(record_word, 64))
                m.d.sync += [index.eq(index + 1), record_word.eq(record_word + 1)]
                with m.If(record_word == fill_last):
                    m.d.sync += record_word.eq(0)
                    with m.Switch(op):
                        with m.Case(Op.POP_REPORT, Op.POLL):
                            m.d.comb += self.report.tready.eq(1)
                        with m.Case(Op.POP_ACK):
                            m.d.comb += self.ack.tready.eq(1)
                        with m.Case(Op.POP_RECORD):
                            for port, code in zip(pops, TxOutput):
                                with m.If(address == code):
                                    m.d.comb += port.tready.eq(1)
                    with m.If(op == Op.MAC_COUNTERS):
                        respond(Status.OK, len(self.mac_counters.as_value()) // 8)
                    with m.Else():
                        m.next = "FILL_NEXT"
            # The stream shows its next record (or none) the clock after one was taken.
            with m.State("FILL_NEXT"):
                next_valid = Mux(takes_reports, self.report.tvalid,
                                 Mux(op == Op.POP_ACK, self.ack.tvalid, pop_valid))
                ends = (index << 3) + record_size          # bytes once the next record is in
                with m.If(next_valid & (ends <= length) & (ends <= self._hold_bytes)):
                    m.next = "FILL"
                with m.Else():
                    respond(Status.OK, (index << 3) - ((fill_last + 1) << 3) + record_size)   # the last unpadded

            # An exception packet into the hold RAM from the word after `packet_base`; its header into
            # that word after it. The next packet follows at the next word while one waits (its length is
            # in its first beat's tuser) and fits whole in `length` and the hold RAM (abi.link.Op.POP_EXCEPTION);
            # the first is taken whatever its length, cut at the hold RAM's end.
            with m.State("EXCEPTION"):
                stream_in = self.exceptions
                m.d.comb += [stream_in.tready.eq(1), hold_write.addr.eq(index),
                             hold_write.data.eq(stream_in.tdata)]
                with m.If(stream_in.tvalid):
                    with m.If(index == packet_base + 1):
                        m.d.sync += exception_user.eq(stream_in.tuser)
                    with m.If(index < hold_words):
                        m.d.comb += hold_write.en.eq(1)
                    with m.Else():
                        m.d.sync += truncated.eq(1)
                    m.d.sync += index.eq(index + 1)
                    with m.If(stream_in.tlast):
                        kept_lanes = sum(stream_in.tkeep[i] for i in range(width))
                        packet_words = index - packet_base - 1
                        m.d.sync += exception_bytes.eq(Mux(index < hold_words, (packet_words << lane_bits) + kept_lanes,
                                                           (hold_words - packet_base - 1) * width))
                        m.next = "EXCEPTION_HEADER"
            with m.State("EXCEPTION_HEADER"):
                m.d.comb += [hold_write.en.eq(1), hold_write.addr.eq(packet_base),
                             hold_write.data.eq(Cat(exception_user, exception_bytes, truncated, Const(0, 15)))]
                next_base = packet_base + 1 + ((exception_bytes + width - 1) >> lane_bits)
                next_end = (next_base << lane_bits) + 8 + self.exceptions.tuser[exception_length_field]
                with m.If(self.exceptions.tvalid & ~truncated & (next_end <= length) & (next_end <= self._hold_bytes)):
                    m.d.sync += [packet_base.eq(next_base), index.eq(next_base + 1)]
                    m.next = "EXCEPTION"
                with m.Else():
                    respond(Status.OK, (packet_base << lane_bits) + 8 + exception_bytes)   # the last unpadded

            # A raw frame: bytes from the request buffer packed into beats.
            with m.State("FRAME_READ"):
                m.next = "FRAME_PACK"
            with m.State("FRAME_PACK"):
                is_last = index == data_length - 1
                m.d.sync += [beat.data.word_select(lane, 8).eq(data_read.data),
                             beat.keep.eq(beat.keep | (1 << lane)), beat.last.eq(is_last),
                             index.eq(index + 1), lane.eq(lane + 1)]
                with m.If(is_last | (lane == width - 1)):
                    m.next = "FRAME_EMIT"
                with m.Else():
                    m.next = "FRAME_READ"
            with m.State("FRAME_EMIT"):
                m.d.comb += [frame_queue.sink.payload.eq(beat), frame_queue.sink.valid.eq(1)]
                with m.If(frame_queue.sink.ready):
                    m.d.sync += [beat.eq(0), lane.eq(0)]
                    with m.If(beat.last):
                        respond(Status.OK)
                    with m.Else():
                        m.next = "FRAME_READ"

            # The response: seq, op, status, then the body (zero-run coded on its way out for the ops of
            # ZERO_RUN_RESPONSES); the appender adds the CRC.
            coded_body = Cat(last_op == code for code in ZERO_RUN_RESPONSES).any()
            with m.State("HEADER"):
                header = Cat(last_seq, last_op | RESPONSE_FLAG, status)
                m.d.comb += [out.payload.data.eq(header.word_select(index[:2], 8)), out.valid.eq(1),
                             out.payload.last.eq((index == 2) & (body_length == 0))]
                with m.If(out.ready):
                    m.d.sync += index.eq(index + 1)
                    with m.If(index == 2):
                        m.d.sync += index.eq(0)
                        with m.If(body_length == 0):
                            m.next = "IDLE"
                        with m.Else():
                            m.next = "BODY_READ"
            with m.State("BODY_READ"):
                m.d.comb += [self.memory.addr.eq(address + index), self.memory.re.eq(body_from_memory),
                             hold_read.en.eq(~body_from_memory)]
                m.d.sync += lane.eq(index[:3])
                with m.If(~body_from_memory | self.memory.ready):
                    m.next = "BODY_BYTE"
            with m.State("BODY_BYTE"):
                m.d.comb += [out.payload.data.eq(Mux(body_from_memory, self.memory.rdata,
                                                     hold_read.data.word_select(lane, 8))),
                             out.payload.last.eq(index == body_length - 1), out.payload.coded.eq(coded_body),
                             out.valid.eq(1)]
                with m.If(out.ready):
                    m.d.sync += index.eq(index + 1)
                    with m.If(index == body_length - 1):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "BODY_READ"
        return m
