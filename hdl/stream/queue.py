"""The one stream queue of the gateware: registered ``valid``, registered ``ready``, a ``level``.

Every block boundary of the receive path goes through a :class:`Queue`, and
so does every FIFO inside a block that holds a payload layout: the payload
is a :mod:`amaranth.lib.data` layout (or any shape) carried whole, on
:mod:`amaranth.lib.stream` interfaces, never packed into a raw ``w_data``.

Timing contract (what makes it a boundary):

* ``source.valid`` and ``source.payload`` come straight from flip-flops;
* ``sink.ready`` is a function of the queue's own flip-flops only: no
  combinational path from ``source.ready`` (the consumer) to ``sink.ready``
  (the producer), nor from ``sink.valid`` to ``source.valid``.

So a chain of blocks joined by queues has no ready/valid path longer than
one block. One transfer per cycle is sustained at every depth while the
consumer keeps up. After a stall, payloads behind others pass the FIFO (two
cycles each), so a queue of depth 3 then takes three payloads in four cycles
until it has drained; from depth 4 it keeps one per cycle.

Structure: at ``depth = 2`` a skid buffer (an output register plus one skid
register that catches the beat in flight when the consumer stalls: the
register slice of AXI interconnects); from ``depth = 3`` a FIFO in LUT
RAM (``amaranth.lib.memory``, asynchronous read) followed by that skid
buffer, for queues sized to a pipeline's depth. The sink's payload and
valid are registered before the memory write, so the producer's logic
reaches no wide write enable; one count of every payload held gives
``level`` and ``sink.ready`` (a flip-flop loaded with its next value, as
are the FIFO's empty flags). Each count is kept as two wrapping counters,
of payloads in and of payloads out, so a consumer's late ``ready`` steps a
counter of its own instead of an adder. The skid buffer keeps the
memory's read path away from the consumer's logic.

Block RAM (``block_ram=True``, depth at least 3): the FIFO's memory is
read synchronously, so the synthesis tools place it in block RAM (an ECP5
DP16KD) instead of LUT RAM: for wide payloads, whose LUT RAM would crowd
the slices that can hold it. A wide payload spreads over a row of block
RAMs, so every pin they share is driven by a flip-flop with no logic
between: the write side by the staging registers, the read side by the
fetch address, and the read is enabled on every edge. A payload is fetched
(the fetch address steps) on a cycle the skid stage will take it on the
next one: its output register is free or its skid stays free. The fetched
payload is on the RAM's output on that next cycle and the skid stage takes
it, so the consumer's ready reaches the fetch address, not the RAMs. A
payload behind others is on ``source`` three edges after it was taken (one
more than from LUT RAM); a drained queue's bypass is unchanged.

Memory output (``memory_output=True``, depth at least 3): no skid stage;
``source.payload`` is the LUT RAM read at the read address, a counter, and
``source.valid`` a flip-flop. The consumer's ``ready`` then reaches only
that counter, not a wide output register's enable: for a wide payload whose
consumer decides late whether to take it. The RAM is cut into banks of
``BANK_BITS`` with a copy of the counter each, so the read address travels
from a flip-flop beside its bank, not from one flip-flop to every RAM cell. The payload arrives a RAM read
after a flip-flop rather than straight from one; a payload is on ``source``
two edges after it was taken. ``registered_fields`` names the few fields a
consumer decides on: those are also kept in flip-flops, one register per
slot, and the head's own come from a register loaded with the slot the read
address moves to (no mux after the flip-flops); the rest from the RAM.

Lookahead (``lookahead=True``): ``following`` is the payload that the output
register loads on this edge if it is free (``source.valid`` low or
``source.ready`` high), with ``following_valid``: the skid's beat, else the
sink's. A consumer whose acceptance depends on what it holds (a hazard
against its own pipeline) can compute that condition for the next head one
cycle early and keep it in a flip-flop, so its ``ready`` (the output
register's enable, a wide fan-out) is a short function of flip-flops.

Wide payloads: the flip-flops that steer the payload (the skid stage's
``skid_valid``, the FIFO's ``bypass``) each select between two sources for
every payload bit, and the skid's enable is the complement of one. For a
payload wider than ``SELECT_BITS`` each is built once per slice of that
many bits (:data:`hdl.synthesis.REPLICA`, all loaded with the same next
value), so no select net spans the whole payload: a net of fan-out 870
crosses the die and crowds its routing.

Replicas (``valid_replicas=n``, not with ``memory_output``): ``valid_replicas``
is ``source.valid`` again, ``n`` times, each bit a flip-flop of its own loaded
with the same next value and kept apart by synthesis
(:data:`hdl.synthesis.REPLICA`): for a consumer whose uses of the valid lie
far apart, so each copy is placed beside its own loads.

Lagged ready (``lagged_ready=True``, depth at least 3): ``sink.ready`` counts a
payload leaving ``source`` one cycle after it left (from a flip-flop of the
remove and a copy of the removes counter), so the consumer's ``ready`` reaches
none of the producer's side: for a consumer whose decision is deep and a
producer placed apart. A payload that left still counts on the next cycle,
so a queue that must take one payload per cycle needs one slot more: with
``memory_output`` (a payload leaves three edges after it was taken, at the
earliest) depth 5.

Resets: only the flags and counters have one. The skid register and the
FIFO's staging register are written before they are read after a reset (each
is read only while a flag says it holds a beat), so they have none: fewer
loads on the reset network, and flip-flops free to share a slice with others.

Latency: a transfer on ``sink`` at edge ``t`` is valid on ``source`` from
edge ``t`` + 1 (``depth = 2``, or a deeper queue whose FIFO is empty: the
payload bypasses it) or ``t`` + 2 (deeper, behind payloads in the FIFO: the
staging register and memory write, then the output register).
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Module, Mux, Shape, Signal, Value
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.synthesis import NO_RW_CHECK, REPLICA

__all__ = ["Queue"]


def _tally(m, adds, removes, bits: int, name: str):
    """A count kept as two wrapping counters of ``bits`` bits, one of adds and one of removes, and
    their difference (``2 ** bits`` must exceed the largest count). A late ``removes`` (a
    consumer's ready) or ``adds`` (a producer's valid) then reaches a counter of its own, one
    LUT deep, not an adder of both."""
    added, removed = Signal(bits, name=f"{name}_added"), Signal(bits, name=f"{name}_removed")
    with m.If(adds):
        m.d.sync += added.eq(added + 1)
    with m.If(removes):
        m.d.sync += removed.eq(removed + 1)
    count = Signal(bits, name=name)
    m.d.comb += count.eq(added - removed)
    return SimpleNamespace(count=count, added=added, removed=removed)


def _field(view, path: str):
    for name in path.split("."):
        view = getattr(view, name)
    return view


class Queue(wiring.Component):
    """``depth`` payloads of ``shape`` between ``sink`` and ``source``; see the module docs.

    Parameters
    ----------
    shape : shape-castable
        Payload of both streams (usually a ``data.StructLayout``).
    depth : int
        Payloads held, at least 2 (3 does not sustain one transfer per cycle).
    lookahead : bool
        Add the ``following`` and ``following_valid`` outputs (see the module docs).
    memory_output : bool
        ``source.payload`` read straight from the FIFO's LUT RAM at a registered
        address, with no output register (see the module docs); depth at least 3.
    block_ram : bool
        Hold the FIFO in block RAM, read synchronously (see the module docs); depth
        at least 3, not with ``memory_output``.
    registered_fields : tuple of str
        With ``memory_output``: fields of a ``data.StructLayout`` payload (dotted
        paths for nested ones) that ``source`` shows from flip-flops instead, for
        the consumer's decision (see the module docs).
    valid_replicas : int
        Copies of ``source.valid`` from flip-flops of their own (see the module docs);
        not with ``memory_output``.
    lagged_ready : bool
        ``sink.ready`` counts a payload taken from ``source`` one cycle late (see the module
        docs); depth at least 3.

    Ports
    -----
    sink : ``In(stream.Signature(shape))``
    source : ``Out(stream.Signature(shape))``
    level : ``Out(range(depth + 1))``
        Payloads held (in the FIFO, the output and the skid registers).
    following : ``Out(shape)``, following_valid : ``Out(1)``
        With ``lookahead``: what the output register takes when it is free.
    valid_replicas : ``Out(valid_replicas)``
        With ``valid_replicas``: each bit equal to ``source.valid`` on every cycle.

    After elaboration, ``replica_groups`` lists the flip-flops built more than once: each
    group's members hold the same value on every cycle (a fact a proof by induction is told).
    """

    BANK_BITS = 16
    """With ``memory_output``: payload bits per LUT RAM bank, each bank with its own read address."""

    SELECT_BITS = 64
    """Payload bits steered by one copy of a select flip-flop (``skid_valid``, ``bypass``)."""

    def __init__(self, shape, depth: int = 2, *, lookahead: bool = False, memory_output: bool = False,
                 registered_fields: tuple = (), block_ram: bool = False, valid_replicas: int = 0,
                 lagged_ready: bool = False):
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"Queue depth must be an integer of at least 2, not {depth!r}")
        if lagged_ready and depth < 3:
            raise ValueError(f"a Queue with lagged_ready needs depth >= 3, not depth {depth!r}")
        self._lagged_ready = lagged_ready
        if memory_output and (depth < 3 or lookahead):
            raise ValueError(f"a Queue with memory_output needs depth >= 3 and no lookahead, not depth {depth!r}"
                             f"{' with lookahead' if lookahead else ''}")
        if block_ram and (depth < 3 or memory_output):
            raise ValueError(f"a Queue in block RAM needs depth >= 3 and no memory_output, not depth {depth!r}"
                             f"{' with memory_output' if memory_output else ''}")
        self._block_ram = block_ram
        if valid_replicas and memory_output:
            raise ValueError("valid_replicas needs the skid stage, not memory_output")
        self._valid_replicas = valid_replicas
        if registered_fields and not memory_output:
            raise ValueError("registered_fields needs memory_output")
        self._memory_output = memory_output
        self._registered_fields = tuple(registered_fields)
        for path in self._registered_fields:
            try:
                _field(Signal(shape), path)
            except AttributeError:
                raise ValueError(f"registered field {path!r} is not a field of {shape!r}") from None
        self._shape = shape
        self._depth = depth
        members = {
            "sink": In(stream.Signature(shape)),
            "source": Out(stream.Signature(shape)),
            "level": Out(range(depth + 1)),
        }
        if lookahead:
            members.update(following=Out(shape), following_valid=Out(1))
        if valid_replicas:
            members.update(valid_replicas=Out(valid_replicas))
        self._lookahead = lookahead
        self.replica_groups = []
        super().__init__(members)

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        self.replica_groups = []
        if self._depth == 2:
            self._elaborate_skid(m, self.sink, self.source, self.level)
            return m
        # A FIFO in LUT RAM (asynchronous read), then a skid stage. Every wide enable and
        # every counter update starts at flip-flops: the producer's payload and valid are
        # registered before the memory write (the write enable fans out to every RAM cell),
        # the read address is a counter, and the skid stage keeps the RAM's read path away
        # from the consumer. One count of every payload held gives ``level`` and
        # ``sink.ready``; the memory is as deep as the queue, so it has room whenever the
        # count allows a write.
        depth = self._depth
        entering = self.sink.valid & self.sink.ready
        leaving = self.source.valid & self.source.ready
        bits = depth.bit_length()
        tally = _tally(m, entering, leaving, bits, "count")     # every payload held
        count = tally.count
        # `count == depth - 1` as an equality of flip-flops, no subtraction: the removes counted
        # again, ahead by depth - 1.
        removed_ahead = Signal(bits, init=depth - 1)
        with m.If(leaving):
            m.d.sync += removed_ahead.eq(removed_ahead + 1)
        one_left = tally.added == removed_ahead
        ready = Signal(init=1)
        m.d.comb += [self.sink.ready.eq(ready), self.level.eq(count)]
        if self._lagged_ready:
            # The removes as they were a cycle ago: `ready` then says the count plus last cycle's
            # remove (at least the count) is below the depth, and the consumer's ready never reaches it.
            left_before = Signal()
            removed_ahead_before = Signal(bits, init=depth - 1)
            m.d.sync += [left_before.eq(leaving), removed_ahead_before.eq(removed_ahead)]
            one_left, leaving_seen = tally.added == removed_ahead_before, left_before
        else:
            leaving_seen = leaving
        # The flags are loaded from compares of the counters' present values, chosen by the
        # transfers: no adder between a consumer's ready and a flag. (`entering` implies `ready`.)
        m.d.sync += ready.eq(leaving_seen | Mux(entering, ~one_left, ready))
        if self._memory_output:
            fifo = self._elaborate_memory(m, entering, self.source.ready)
            m.d.comb += [Value.cast(self.source.payload).eq(fifo.read_data), self.source.valid.eq(fifo.readable)]
            for path in self._registered_fields:
                # Kept in flip-flops too, one register per slot, written with the RAM and read
                # at its address: a small mux from flip-flops instead of the RAM's read path.
                copies = [Signal.like(_field(self.sink.payload, path), name=f"{path.replace('.', '_')}_{i}")
                          for i in range(self._depth)]
                staged = _field(fifo.staged, path)
                for i, copy in enumerate(copies):
                    with m.If(fifo.staged_valid & (fifo.write_address == i)):
                        m.d.sync += copy.eq(staged)
                # The head's copy is a register of its own: the slot at the read address on the next
                # cycle (the one written now, if it is that one), so the consumer's decision starts at it.

                def slot(address):
                    return Mux(fifo.staged_valid & (fifo.write_address == address), staged, Array(copies)[address])
                address = fifo.read_address
                following = Mux(address == depth - 1, 0, address + 1)
                head = Signal.like(staged, name=f"{path.replace('.', '_')}_head")
                m.d.sync += head.eq(Mux(fifo.reading, slot(following), slot(address)))
                m.d.comb += _field(self.source.payload, path).eq(head)
            return m

        # While nothing is staged or stored, payloads go straight to the skid stage (its
        # latency, one edge), so a drained queue adds no more latency than a skid buffer.
        # `bypass` (nothing staged or stored) is a flip-flop loaded with its next value.
        outlet = stream.Signature(self._shape).create()
        steering = self._steering("bypass", init=1)
        bypass = steering[0]
        to_memory = entering & ~(bypass & outlet.ready)
        if self._block_ram:
            room = Signal()     # the skid stage takes a payload fetched now (below)
            fifo = self._elaborate_block_memory(m, to_memory, room)
        else:
            fifo = self._elaborate_memory(m, to_memory, outlet.ready & ~bypass)
        read_data, readable, reading = fifo.read_data, fifo.readable, fifo.reading
        stored = _tally(m, to_memory, reading, bits, "stored").count    # staged, in the memory or fetched
        self._counters = SimpleNamespace(count=count, ready=ready, stored=stored, bypass=bypass,
                                         removed=tally.removed, removed_ahead=removed_ahead)
        m.d.sync += [copy.eq(~to_memory & Mux(reading, stored == 1, copy)) for copy in steering]
        outlet_bits, sink_bits, read_bits = (Value.cast(v) for v in (outlet.payload, self.sink.payload, read_data))
        m.d.comb += [outlet_bits[start:stop].eq(Mux(copy, sink_bits[start:stop], read_bits[start:stop]))
                     for (start, stop), copy in zip(self._slices(), steering)]
        m.d.comb += outlet.valid.eq(Mux(bypass, entering, readable))
        self._elaborate_skid(m, outlet, self.source, Signal(range(3)))
        if self._block_ram:
            # Its output register is free now, or its skid is free and no fetched payload arrives
            # now. A fetch needs a payload in the memory, so none bypasses it from the sink then.
            m.d.comb += room.eq(~self.source.valid | self.source.ready | (self._skid_flags.free & ~readable))
        return m

    def _elaborate_memory(self, m, writing, taking):
        """The LUT RAM FIFO: ``writing`` stages the sink's payload, ``taking`` (with
        ``readable``) reads the head. Returns its signals: ``read_data`` (the head, an
        asynchronous read at the registered ``read_address``), ``readable`` (a flip-flop:
        the memory holds a payload), ``staged``, ``staged_valid``, ``write_address``,
        ``writing``, ``reading`` and ``in_memory`` (payloads in the memory)."""
        depth = self._depth
        # No reset for the staging register: it is written on every cycle and read (the memory write,
        # the registered fields' copies) only with `staged_valid`, so only after it was written.
        staged, staged_valid = Signal(self._shape, reset_less=True), Signal()
        readable = Signal()
        write_address = Signal(range(depth))
        reading = taking & readable
        in_memory = _tally(m, staged_valid, reading, depth.bit_length(), "in_memory").count
        m.d.sync += [
            readable.eq(staged_valid | Mux(reading, in_memory != 1, readable)),
            staged.eq(self.sink.payload), staged_valid.eq(writing),
        ]
        with m.If(staged_valid):
            m.d.sync += write_address.eq(Mux(write_address == depth - 1, 0, write_address + 1))
        # With memory output the RAM's read is the consumer's path, so the RAM is cut into banks
        # of BANK_BITS, each with its own copy of the read address: a copy placed beside its
        # bank instead of one flip-flop routed to every RAM cell of a wide payload.
        bits = Value.cast(staged).shape().width
        bank_bits = self.BANK_BITS if self._memory_output else bits
        read_data = Signal(bits)
        read_addresses = []
        for bank, start in enumerate(range(0, bits, bank_bits)):
            stop = min(start + bank_bits, bits)
            storage = memory.Memory(shape=stop - start, depth=depth, init=[])
            m.submodules[f"storage_{bank}" if self._memory_output else "storage"] = storage
            write, read = storage.write_port(), storage.read_port(domain="comb")
            read_address = Signal(range(depth), name=f"read_address_{bank}" if self._memory_output else "read_address")
            with m.If(reading):
                m.d.sync += read_address.eq(Mux(read_address == depth - 1, 0, read_address + 1))
            m.d.comb += [
                write.en.eq(staged_valid), write.addr.eq(write_address),
                write.data.eq(Value.cast(staged)[start:stop]),
                read.addr.eq(read_address), read_data[start:stop].eq(read.data),
            ]
            read_addresses.append(read_address)
        return SimpleNamespace(read_data=read_data, readable=readable, staged=staged, staged_valid=staged_valid,
                               write_address=write_address, read_address=read_addresses[0], writing=writing,
                               reading=reading, in_memory=in_memory)

    def _elaborate_block_memory(self, m, writing, room):
        """The block RAM FIFO: as :meth:`_elaborate_memory`, but the RAM is read on every edge at
        ``fetch_address``, a flip-flop. A payload is fetched (``fetching``) while the memory holds
        one and ``room`` says the skid stage takes it on the next cycle; ``readable`` (a flip-flop)
        then says ``read_data`` is that payload, and ``reading`` that it is taken (always)."""
        depth = self._depth
        staged, staged_valid = Signal(self._shape, reset_less=True), Signal()    # no reset: as the LUT RAM FIFO's
        readable, held = Signal(), Signal()    # a fetched payload on the RAM's output; payloads in the memory
        write_address, fetch_address = Signal(range(depth)), Signal(range(depth))
        fetching = held & room
        in_memory = _tally(m, staged_valid, fetching, depth.bit_length(), "in_memory").count
        m.d.sync += [
            readable.eq(fetching),
            held.eq(staged_valid | Mux(fetching, in_memory != 1, held)),
            staged.eq(self.sink.payload), staged_valid.eq(writing),
        ]
        with m.If(staged_valid):
            m.d.sync += write_address.eq(Mux(write_address == depth - 1, 0, write_address + 1))
        with m.If(fetching):
            m.d.sync += fetch_address.eq(Mux(fetch_address == depth - 1, 0, fetch_address + 1))
        # A write and a fetch never meet at one address: the memory then holds none or all
        # `depth` payloads, and `held` or the queue's count rules each out (so NO_RW_CHECK). The
        # reads of other cycles are dropped.
        storage = m.submodules.storage = memory.Memory(shape=Value.cast(staged).shape().width, depth=depth,
                                                       init=[], attrs={**NO_RW_CHECK, "ram_style": "block"})
        write, read = storage.write_port(), storage.read_port(domain="sync")
        m.d.comb += [
            write.en.eq(staged_valid), write.addr.eq(write_address), write.data.eq(staged),
            read.en.eq(1), read.addr.eq(fetch_address),
        ]
        self._block_memory = SimpleNamespace(writing=staged_valid, write_address=write_address,
                                             fetching=fetching, fetch_address=fetch_address)
        return SimpleNamespace(read_data=read.data, readable=readable, staged=staged, staged_valid=staged_valid,
                               write_address=write_address, read_address=fetch_address, writing=writing,
                               reading=readable, in_memory=in_memory, held=held, fetching=fetching)

    def _slices(self) -> list[tuple[int, int]]:
        """The payload's bits in slices of ``SELECT_BITS``, each steered by its own copy of a select."""
        width = Shape.cast(self._shape).width
        return [(start, min(start + self.SELECT_BITS, width)) for start in range(0, width, self.SELECT_BITS)]

    def _steering(self, name: str, init: int = 0) -> list[Signal]:
        """A select flip-flop, once per payload slice (at least once), every copy a `REPLICA` when there
        are several; the caller loads each with the same next value."""
        count = max(1, len(self._slices()))
        attrs = REPLICA if count > 1 else {}
        copies = [Signal(init=init, name=name if index == 0 else f"{name}_{index}", attrs=attrs)
                  for index in range(count)]
        if count > 1:
            self.replica_groups.append(copies)
        return copies

    def _elaborate_skid(self, m, sink, source, level):
        # No reset for the skid register: it follows the sink while `skid_valid` is low and is read (the
        # output register's load, `following`) only while it is high, so only after it caught a beat.
        skid = Signal(self._shape, name="skid", reset_less=True)
        steering = self._steering("skid_valid")
        skid_valid = steering[0]
        # `skid_free` (not `skid_valid`) is `sink.ready`: a flip-flop of its own, kept the
        # complement of `skid_valid`, whose fan-out (the skid's enable and the output mux of
        # a wide payload) then stays off the producer's and the FIFO counters' paths.
        skid_free = Signal(init=1)
        self._skid_flags = SimpleNamespace(valid=skid_valid, free=skid_free)
        m.d.comb += [
            sink.ready.eq(skid_free),
            level.eq(source.valid + skid_valid),
        ]
        # The skid register follows the sink while it is empty, so its enable is a flip-flop
        # and the consumer's ready reaches only the output register; each slice by its own copy.
        skid_bits, sink_bits, source_bits = (Value.cast(v) for v in (skid, sink.payload, source.payload))
        for (start, stop), copy in zip(self._slices(), steering):
            with m.If(~copy):
                m.d.sync += skid_bits[start:stop].eq(sink_bits[start:stop])
        if self._lookahead:
            m.d.comb += [
                self.following.eq(Mux(skid_valid, skid, sink.payload)),
                self.following_valid.eq(skid_valid | sink.valid),
            ]
        # With replicas, the output valid is kept too: an unmarked copy would be merged into a marked one.
        valid = Signal(name="source_valid", attrs=REPLICA if self._valid_replicas else {})
        m.d.comb += source.valid.eq(valid)
        with m.If(~valid | source.ready):
            # The output register is free: the skid's beat first, else the sink's.
            m.d.sync += [source_bits[start:stop].eq(Mux(copy, skid_bits[start:stop], sink_bits[start:stop]))
                         for (start, stop), copy in zip(self._slices(), steering)]
            with m.If(skid_valid):
                m.d.sync += [valid.eq(1), skid_free.eq(1)] + [copy.eq(0) for copy in steering]
            with m.Else():
                m.d.sync += valid.eq(sink.valid)
        with m.Elif(sink.valid & sink.ready):
            m.d.sync += [skid_free.eq(0)] + [copy.eq(1) for copy in steering]
        # The valid's next value: held while the output register is not free, else the skid's or the sink's.
        replicas = [Signal(name=f"valid_replica_{index}", attrs=REPLICA) for index in range(self._valid_replicas)]
        for index, replica in enumerate(replicas):
            m.d.sync += replica.eq((valid & ~source.ready) | skid_valid | sink.valid)
            m.d.comb += self.valid_replicas[index].eq(replica)
        if replicas:
            self.replica_groups.append([valid, *replicas])
