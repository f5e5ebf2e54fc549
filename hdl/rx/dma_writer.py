"""DMA placement unit: writes payload bytes to host memory as an AXI4 write manager.

Each command on ``cmd`` (:func:`abi.dma_command_layout`) asks for
its ``length`` payload bytes to be written from byte ``address`` on; the bytes
arrive on ``payload``, command after command. The block realigns them to the
address, cuts the write into INCR bursts and reports one ``done`` per command
once every write response of that command is back.

Structure (every stage registered; the AXI outputs come from flip-flops: AW and
W leave through :class:`hdl.stream.queue.Queue` output registers, so
``AWREADY``/``WREADY`` reach nothing else):

1. **Command stage.** ``cmd`` enters a register slice with its sums
   (``length - 1``, the last byte's offset); from there it is split, when both
   command queues have room, into the burst queue (address, beats) and the
   data queue (lane offset, input beats, strobe limits). Zero-length commands
   go only to the burst queue.
2. **Burst generator** (AW). Beats are ``W`` bytes at ``W``-aligned addresses
   (``AWSIZE = log2 W``). A command's beats are cut at every multiple of
   ``max_burst_beats * W`` bytes, a power of two dividing 4096, so no burst is
   longer than ``max_burst_beats`` (at most 256) nor crosses a 4 KiB
   boundary; the first burst carries the command's unaligned byte address.
   One burst per cycle while the AW queue and the tracker have room; each
   burst (and each zero-length command) also enters the response tracker,
   which holds ``max_outstanding`` of them.
3. **Rotate stage** (W). The payload arrives through a skid buffer (a
   :class:`hdl.stream.queue.Queue` of depth 2), so ``payload.ready`` is a
   flip-flop and the producer's queue meets no logic of this block. Payload
   beat ``k`` is rotated by ``o = address mod W`` lanes: lanes ``o..W-1``
   receive its first ``W - o`` bytes, lanes ``0..o-1`` its last ``o`` bytes,
   which belong to the next output beat.
4. **Merge stage** (W). Output beat ``k`` takes lanes ``0..o-1`` from rotated
   beat ``k-1`` and the rest from rotated beat ``k``; when the command's bytes
   spill into one more beat than the payload has, that beat is sent from the
   held lanes alone. ``WSTRB`` marks exactly the command's bytes; ``WLAST``
   ends a beat whose address is the last before a burst boundary, or the
   command's last beat, the same cut as the burst generator's, computed on
   its own, so the data path never waits for the address path.
5. **Response tracker** (B). Pops one entry per ``B`` response (zero-length
   entries without one), ORs ``BRESP != OKAY`` over the command's bursts and
   emits ``done`` with the command's tag after its last burst's response.
   With a single ID, responses return in issue order, so ``done`` follows
   command order.

The payload is framed by the command's ``length``: beat counts and strobes
come from it, so ``payload.keep`` and ``payload.last`` must agree with it
(as :mod:`hdl.stream.packet` requires) but are not inspected. The payload of a
command must not wait for a later command to be accepted.

Latency (clock edges between transfers, the bus ready): a payload beat
transferred on edge ``t`` is transferred on W on edge ``t + 3``
(:attr:`DmaWriter.latency`: the input skid buffer, the rotate stage, the W
queue). A command transferred on edge ``c`` lets its
first W beat out on edge ``c + 4`` (its first payload beats wait in the input
skid buffer) and its first AW out on edge ``c + 4`` (the register slice and
the two command queues,
:class:`hdl.stream.queue.Queue`, have registered outputs and a registered
``ready``; empty, each passes a command in one edge); a command's ``done``
is transferred one edge after its last ``B`` (a zero-length command's five
edges after the command).

Throughput: one W beat per cycle while ``WREADY`` is high; commands follow
each other without a gap. A command whose bytes take one beat more on the
bus than on ``payload`` holds ``payload`` for that one cycle (the bus stays
busy). The AW channel issues one burst per cycle.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out, connect

from hdl.bus.axi import Axi4WriteSignature, Burst, Resp
from hdl.rx.layouts import dma_command_layout
from hdl.stream.bits import thermometer
from hdl.stream.packet import packet_signature
from hdl.stream.queue import Queue

__all__ = ["DmaWriter", "dma_done_layout"]

_LENGTH_BITS = 16


def dma_done_layout() -> data.StructLayout:
    """One per DMA command, in command order: its tag and whether any write response was not OKAY."""
    return data.StructLayout({"tag": unsigned(16), "error": unsigned(1)})


class DmaWriter(wiring.Component):
    """Places ``length``-byte payloads at any byte address through an AXI4 write manager.

    Parameters
    ----------
    width_bytes : int
        Datapath width ``W`` in bytes (8, 16, 32, 64 tested); the AXI data bus is ``8 * W`` bits.
    address_bits : int
        Width of the command address and of ``AWADDR``.
    id_bits : int
        Width of ``AWID``/``BID``. Every burst uses ID ``axi_id``.
    max_burst_beats : int or None
        Longest burst, a power of two with ``max_burst_beats * W <= 4096`` and at
        most 256; default the largest allowed (256 beats at W = 8 and 16, 4096 / W above).
    max_outstanding : int
        Bursts (and zero-length commands) issued but not yet answered; AW stalls beyond.
    command_depth : int
        Commands accepted ahead of the data path and of the burst generator.
    axi_id, cache, prot : int
        Constant ``AWID``, ``AWCACHE`` (default normal non-cacheable bufferable) and ``AWPROT``.

    Ports
    -----
    cmd : ``In(stream.Signature(dma_command_layout(address_bits)))``
        Write ``length`` bytes (0 to 65535) at byte ``address``; ``tag`` comes back on ``done``.
    payload : ``In(packet_signature(W))``
        The commands' bytes in command order, ``length`` bytes per command, lane 0 first,
        only the last beat of a command partial; a zero-length command has no beat.
    axi : ``Out(Axi4WriteSignature(addr_width=address_bits, data_width=8 * W, id_width=id_bits))``
        AW, W and B channels.
    done : ``Out(stream.Signature(dma_done_layout()))``
        One per command, in command order; ``error`` is set when any of its ``B``
        responses was not OKAY. A zero-length command completes without bus traffic.

    Latency and throughput: see the module documentation (:attr:`latency` = 3
    edges from a payload beat to its W beat; one W beat per cycle).
    """

    latency = 3

    def __init__(self, width_bytes: int, address_bits: int = 64, id_bits: int = 4, max_burst_beats: int | None = None,
                 *, max_outstanding: int = 16, command_depth: int = 4, axi_id: int = 0,
                 cache: int = 0b0011, prot: int = 0b000):
        if not isinstance(width_bytes, int) or width_bytes < 2 or width_bytes > 128 or width_bytes & (width_bytes - 1):
            raise ValueError(f"Width must be a power of two from 2 to 128 bytes, not {width_bytes!r}")
        lane_bits = width_bytes.bit_length() - 1
        limit = min(256, 4096 // width_bytes)
        if max_burst_beats is None:
            max_burst_beats = limit
        if (not isinstance(max_burst_beats, int) or max_burst_beats < 1 or max_burst_beats > limit
                or max_burst_beats & (max_burst_beats - 1)):
            raise ValueError(f"max_burst_beats must be a power of two from 1 to {limit} at W = {width_bytes}, "
                             f"not {max_burst_beats!r}")
        if address_bits < lane_bits + max_burst_beats.bit_length():
            raise ValueError(f"address_bits {address_bits} is too narrow")
        if max_outstanding < 1 or command_depth < 1:
            raise ValueError("max_outstanding and command_depth must be positive")
        if not 0 <= axi_id < 1 << id_bits:
            raise ValueError(f"axi_id {axi_id} does not fit in {id_bits} bits")
        self._width = width_bytes
        self._lane_bits = lane_bits
        self._address_bits = address_bits
        self._id_bits = id_bits
        self._burst_beats = max_burst_beats
        self._burst_bits = max_burst_beats.bit_length() - 1
        self._max_outstanding = max_outstanding
        self._command_depth = command_depth
        self._axi_id, self._cache, self._prot = axi_id, cache, prot
        # beats of a command, minus one: at most (W - 1 + 65535 - 1) / W
        self._beat_bits = ((width_bytes - 2 + (1 << _LENGTH_BITS) - 1) >> lane_bits).bit_length()
        super().__init__({
            "cmd": In(stream.Signature(dma_command_layout(address_bits))),
            "payload": In(packet_signature(width_bytes)),
            "axi": Out(Axi4WriteSignature(addr_width=address_bits, data_width=8 * width_bytes, id_width=id_bits)),
            "done": Out(stream.Signature(dma_done_layout())),
        })

    @property
    def width_bytes(self) -> int:
        return self._width

    @property
    def max_burst_beats(self) -> int:
        return self._burst_beats

    def elaborate(self, platform):
        m = Module()
        width, lane_bits, burst_bits = self._width, self._lane_bits, self._burst_bits
        beat_bits = self._beat_bits
        axi = self.axi

        burst_layout = data.StructLayout({
            "address": unsigned(self._address_bits),
            "beats_m1": unsigned(beat_bits),    # bus beats - 1
            "tag": unsigned(16),
            "zero": unsigned(1),                # length 0: no burst
            "last": unsigned(1),                # the first burst is the command's last
            "next_last": unsigned(1),           # ... or the one after it is
        })
        data_layout = data.StructLayout({
            "offset": unsigned(lane_bits),      # address mod W
            "in_beats_m1": unsigned(beat_bits),  # payload beats - 1
            "spill": unsigned(1),               # one more bus beat than payload beats
            "end": unsigned(lane_bits),         # lane of the last byte
            "start": unsigned(burst_bits),      # first beat's index within its burst-sized block
        })
        tracker_layout = data.StructLayout({"tag": unsigned(16), "last": unsigned(1), "zero": unsigned(1)})

        # -- 1. Command stage ---------------------------------------------------------------
        bursts = m.submodules.bursts = Queue(burst_layout, max(2, self._command_depth))
        datas = m.submodules.datas = Queue(data_layout, max(2, self._command_depth))
        # The command's sums are taken into a register slice first, so the cuts below compare
        # flip-flops: no adder feeds a comparator on the way into the queues.
        accepted = m.submodules.accepted = Queue(data.StructLayout({
            "command": dma_command_layout(self._address_bits), "zero": unsigned(1),
            "length_m1": unsigned(_LENGTH_BITS), "end_sum": unsigned(_LENGTH_BITS + 1)}))
        arriving = self.cmd.payload
        m.d.comb += [
            accepted.sink.valid.eq(self.cmd.valid),
            self.cmd.ready.eq(accepted.sink.ready),
            accepted.sink.payload.command.eq(arriving),
            accepted.sink.payload.zero.eq(arriving.length == 0),
            accepted.sink.payload.length_m1.eq(arriving.length - 1),
            # offset + length - 1
            accepted.sink.payload.end_sum.eq(arriving.address[:lane_bits] + (arriving.length - 1)[:_LENGTH_BITS]),
        ]
        cmd = accepted.source.payload.command
        offset = cmd.address[:lane_bits]
        length_m1 = accepted.source.payload.length_m1
        end_sum = accepted.source.payload.end_sum
        burst_in = bursts.sink.payload
        data_in = datas.sink.payload
        zero = accepted.source.payload.zero
        command_take = accepted.source.valid & accepted.source.ready
        m.d.comb += [
            accepted.source.ready.eq(bursts.sink.ready & datas.sink.ready),
            bursts.sink.valid.eq(command_take),
            datas.sink.valid.eq(command_take & ~zero),
            burst_in.address.eq(cmd.address),
            burst_in.beats_m1.eq(end_sum[lane_bits:]),
            burst_in.tag.eq(cmd.tag),
            burst_in.zero.eq(zero),
            # Decided here, from registers, not after the burst queue's RAM read: whether the first
            # burst (up to the end of its burst-sized block) is the last, or the one after it.
            burst_in.last.eq(zero | (end_sum[lane_bits:] <= ~cmd.address[lane_bits:lane_bits + burst_bits])),
            burst_in.next_last.eq(end_sum[lane_bits:]
                                  < (~cmd.address[lane_bits:lane_bits + burst_bits]) + 1 + (1 << burst_bits)),
            data_in.offset.eq(offset),
            data_in.in_beats_m1.eq(length_m1[lane_bits:]),
            data_in.spill.eq((offset + length_m1[:lane_bits])[lane_bits]),
            data_in.end.eq(end_sum[:lane_bits]),
            data_in.start.eq(cmd.address[lane_bits:lane_bits + burst_bits]),
        ]

        # -- 2. Burst generator (AW) --------------------------------------------------------
        # One entry more than the bursts outstanding: a burst is issued on room registered a
        # cycle before (below), which keeps one entry for the burst issued meanwhile.
        tracker = m.submodules.tracker = Queue(tracker_layout, self._max_outstanding + 1)
        head = bursts.source.payload
        current = Signal(burst_layout)
        current_valid = Signal()
        block_index = current.address[lane_bits:lane_bits + burst_bits]
        room_m1 = Signal(burst_bits)            # beats left in this block, minus one
        m.d.comb += room_m1.eq(~block_index)
        # Whether the current burst is the command's last, and whether the one after it will
        # be, kept in registers beside `current`: the issue decision reads no comparator.
        last_burst = Signal()
        next_last = Signal()
        block_beats = 1 << burst_bits
        # AW and W leave through queues: the bus's ready reaches only their output registers.
        # A burst is issued while the AW queue and the tracker have room for it and the one
        # issued on the cycle before (`room`, registered from their levels), so the issue and
        # load decisions, whose load enables the wide burst registers, read flip-flops only.
        aw_layout = data.StructLayout({"addr": unsigned(self._address_bits), "len": unsigned(8)})
        aws = m.submodules.aws = Queue(aw_layout, 4)
        room = Signal()
        m.d.sync += room.eq((aws.level < aws.depth - 1) & (tracker.level < tracker.depth - 1))
        issue = current_valid & room
        tracker_in = tracker.sink.payload
        m.d.comb += [
            tracker.sink.valid.eq(issue),
            tracker_in.tag.eq(current.tag),
            tracker_in.last.eq(last_burst),
            tracker_in.zero.eq(current.zero),
            axi.awid.eq(self._axi_id),
            axi.awsize.eq(lane_bits),
            axi.awburst.eq(Burst.INCR),
            axi.awlock.eq(0),
            axi.awcache.eq(self._cache),
            axi.awprot.eq(self._prot),
        ]
        m.d.comb += [
            aws.sink.valid.eq(issue & ~current.zero),
            aws.sink.payload.addr.eq(current.address),
            aws.sink.payload.len.eq(Mux(last_burst, current.beats_m1, room_m1)),
            axi.awvalid.eq(aws.source.valid),
            axi.awaddr.eq(aws.source.payload.addr),
            axi.awlen.eq(aws.source.payload.len),
            aws.source.ready.eq(axi.awready),
        ]
        with m.If(issue & ~last_burst):
            # The next burst starts a block: it is the last if the rest fits in one block,
            # and the one after it is the last if the rest fits in two.
            block_bits = lane_bits + burst_bits
            m.d.sync += [
                current.address.eq(Cat(Const(0, block_bits), current.address[block_bits:] + 1)),
                current.beats_m1.eq(current.beats_m1 - room_m1 - 1),
                last_burst.eq(next_last),
                next_last.eq(current.beats_m1 < room_m1 + 1 + 2 * block_beats),
            ]
        load = ~current_valid | (room & last_burst)   # (issue & last_burst) when valid
        m.d.comb += bursts.source.ready.eq(load)
        with m.If(load):
            m.d.sync += [
                current_valid.eq(bursts.source.valid), current.eq(head),
                last_burst.eq(head.last),
                next_last.eq(head.next_last),
            ]

        # -- 3. Rotate stage ----------------------------------------------------------------
        info = datas.source.payload
        rotated = Signal(8 * width)
        rotated_valid = Signal()
        rotated_first = Signal()
        rotated_last = Signal()
        rotated_spill = Signal()
        rotated_start = Signal(burst_bits)
        held_lanes = Signal(width)              # lanes below the offset: from the previous beat
        head_strobe = Signal(width)             # lanes of a command's first beat
        end_strobe = Signal(width)              # lanes of a command's last beat
        count = Signal(beat_bits)               # payload beats of this command so far
        merge_takes = Signal()

        # The payload enters a skid buffer: its ready is that buffer's flip-flop, so no path joins
        # the producer's (the placement check's) output queue to the merge stage and the W queue.
        inlet = m.submodules.inlet = Queue(self.payload.payload.shape())
        connect(m, wiring.flipped(self.payload), inlet.sink)
        beat = inlet.source
        shifted = beat.payload.data
        for bit in range(lane_bits):
            shifted = Mux(info.offset[bit], shifted.rotate_left(8 << bit), shifted)
        payload_take = beat.valid & beat.ready
        last_in = count == info.in_beats_m1
        m.d.comb += [
            beat.ready.eq(datas.source.valid & (~rotated_valid | merge_takes)),
            datas.source.ready.eq(payload_take & last_in),
        ]
        with m.If(merge_takes):
            m.d.sync += rotated_valid.eq(0)
        with m.If(payload_take):
            m.d.sync += [
                rotated_valid.eq(1),
                rotated.eq(shifted),
                rotated_first.eq(count == 0),
                rotated_last.eq(last_in),
                rotated_spill.eq(info.spill),
                rotated_start.eq(info.start),
                held_lanes.eq(thermometer(info.offset, width, inclusive=False)),
                head_strobe.eq(~thermometer(info.offset, width, inclusive=False)),
                end_strobe.eq(thermometer(info.end, width, inclusive=True)),
                count.eq(Mux(last_in, 0, count + 1)),
            ]

        # -- 4. Merge stage (W) -------------------------------------------------------------
        carry = Signal(8 * width)               # the previous rotated beat
        spill_pending = Signal()
        spill_strobe = Signal(width)
        beat_index = Signal(burst_bits)         # index of the next beat within its block
        w_layout = data.StructLayout({"data": unsigned(8 * width), "strb": unsigned(width), "last": unsigned(1)})
        ws = m.submodules.ws = Queue(w_layout)
        w_free = ws.sink.ready
        w_out = ws.sink.payload
        m.d.comb += [
            merge_takes.eq(w_free & rotated_valid & ~spill_pending),
            axi.wvalid.eq(ws.source.valid),
            axi.wdata.eq(ws.source.payload.data),
            axi.wstrb.eq(ws.source.payload.strb),
            axi.wlast.eq(ws.source.payload.last),
            ws.source.ready.eq(axi.wready),
        ]
        index = Mux(rotated_first, rotated_start, beat_index)
        ends_command = rotated_last & ~rotated_spill
        full = Const((1 << width) - 1, width)
        merged = Cat(*(Mux(held_lanes[lane], carry.word_select(lane, 8), rotated.word_select(lane, 8))
                       for lane in range(width)))
        with m.If(spill_pending):
            m.d.comb += [
                ws.sink.valid.eq(1),
                w_out.data.eq(carry),
                w_out.strb.eq(spill_strobe),
                w_out.last.eq(1),
            ]
            with m.If(w_free):
                m.d.sync += spill_pending.eq(0)
        with m.Else():
            m.d.comb += [
                ws.sink.valid.eq(rotated_valid),
                w_out.data.eq(merged),
                w_out.strb.eq(Mux(rotated_first, head_strobe, full) & Mux(ends_command, end_strobe, full)),
                w_out.last.eq((index == self._burst_beats - 1) | ends_command),
            ]
            with m.If(merge_takes):
                m.d.sync += [
                    beat_index.eq(index + 1),
                    carry.eq(rotated),
                    spill_pending.eq(rotated_last & rotated_spill),
                    spill_strobe.eq(end_strobe),
                ]

        # -- 5. Response tracker (B) --------------------------------------------------------
        entry = tracker.source.payload
        error = Signal()                        # a non-OKAY response so far in this command
        done_free = ~self.done.valid | self.done.ready
        b_take = tracker.source.valid & ~entry.zero & (~entry.last | done_free)
        zero_take = tracker.source.valid & entry.zero & done_free
        b_fire = axi.bvalid & b_take
        bad = axi.bresp != Resp.OKAY
        m.d.comb += [
            axi.bready.eq(b_take),
            tracker.source.ready.eq(b_fire | zero_take),
        ]
        with m.If(self.done.ready):
            m.d.sync += self.done.valid.eq(0)
        with m.If(b_fire):
            with m.If(entry.last):
                m.d.sync += [
                    self.done.valid.eq(1),
                    self.done.payload.tag.eq(entry.tag),
                    self.done.payload.error.eq(error | bad),
                    error.eq(0),
                ]
            with m.Else():
                m.d.sync += error.eq(error | bad)
        with m.If(zero_take):
            m.d.sync += [
                self.done.valid.eq(1),
                self.done.payload.tag.eq(entry.tag),
                self.done.payload.error.eq(0),
            ]
        return m
