"""Counters of events that happen in other clock domains, kept in ``sync``.

Each event is a one-clock pulse in its own domain; a
:class:`~amaranth.lib.cdc.PulseSynchronizer` brings it into ``sync``, where a
32-bit counter (wrapping) adds it. A pulse synchronizer loses pulses closer
together than a few clocks of the slower domain; the MAC's events are at most
one per frame, dozens of clocks apart.
"""

from amaranth.hdl import Module, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.cdc import PulseSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["EventCounters", "COUNTER_BITS"]

COUNTER_BITS = 32


class EventCounters(wiring.Component):
    """One counter per event of ``events`` (``{name: domain of its pulses}``).

    Ports
    -----
    <name> : ``In(1)``
        The event's pulses, in its domain.
    counts : ``Out(data.StructLayout({name: unsigned(32)}))``
        The counts, in ``sync``, from flip-flops.
    """

    def __init__(self, events: dict):
        self._events = dict(events)
        layout = data.StructLayout({name: unsigned(COUNTER_BITS) for name in self._events})
        super().__init__({**{name: In(1) for name in self._events}, "counts": Out(layout)})

    def elaborate(self, platform):
        m = Module()
        for name, domain in self._events.items():
            sync = m.submodules[f"{name}_sync"] = PulseSynchronizer(i_domain=domain, o_domain="sync")
            count = getattr(self.counts, name)
            m.d.comb += sync.i.eq(getattr(self, name))
            with m.If(sync.o):
                m.d.sync += count.eq(count + 1)
        return m
