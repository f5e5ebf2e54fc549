"""An 8N1 UART: a start bit (0), eight data bits least significant first, a stop bit (1); the line idles at 1.

``divisor`` is the bit time in clocks (the clock over the baud rate, rounded).
The receiver synchronizes its input, takes a start bit when the line is
still low half a bit after its falling edge, samples each bit in its middle
and checks the stop bit: a byte without it is not passed on (``framing_error``).
It cannot be made to wait: a byte that its consumer does not take at once is
lost (``overrun``); the link's consumer takes one every clock.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UartTx", "UartRx", "uart_divisor"]


def uart_divisor(clock_hz: float, baud: float) -> int:
    """Clocks per bit; refuses a rate more than 2% off (8N1 tolerates about 4% between both ends)."""
    divisor = round(clock_hz / baud)
    if divisor < 4 or abs(clock_hz / divisor - baud) > 0.02 * baud:
        raise ValueError(f"{baud} baud cannot be made from {clock_hz} Hz within 2%")
    return divisor


class UartTx(wiring.Component):
    """Sends each byte of ``sink`` on ``tx``; ``sink.ready`` while idle.

    Ports
    -----
    sink : ``In(stream.Signature(8))``
    tx : ``Out(1, init=1)``
    """

    def __init__(self, divisor: int):
        if divisor < 2:
            raise ValueError(f"A UART bit needs at least 2 clocks, not {divisor}")
        self._divisor = divisor
        super().__init__({"sink": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        # Stop bit, data, start bit: shifted out least significant first.
        shift = Signal(10, init=1)
        bits_left = Signal(range(11))
        timer = Signal(range(self._divisor))
        m.d.comb += [self.tx.eq(shift[0]), self.sink.ready.eq(bits_left == 0)]
        with m.If(self.sink.valid & self.sink.ready):
            m.d.sync += [shift.eq(Cat(0, self.sink.payload, 1)), bits_left.eq(10), timer.eq(self._divisor - 1)]
        with m.Elif(bits_left != 0):
            with m.If(timer == 0):
                m.d.sync += [shift.eq(Cat(shift[1:], 1)), bits_left.eq(bits_left - 1),
                             timer.eq(self._divisor - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m


class UartRx(wiring.Component):
    """Bytes received on ``rx``, one ``source`` transfer each (``valid`` for one clock).

    Ports
    -----
    rx : ``In(1, init=1)``
    source : ``Out(stream.Signature(8))``
    framing_error, overrun : ``Out(1)``
        One-clock pulses: a byte without its stop bit; a byte ``source`` did not take.
    """

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"The receiver needs at least 4 clocks a bit, not {divisor}")
        self._divisor = divisor
        super().__init__({"rx": In(1, init=1), "source": Out(stream.Signature(8)),
                          "framing_error": Out(1), "overrun": Out(1)})

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(self._divisor))
        bits = Signal(range(10))
        shift = Signal(8)
        m.d.sync += [self.source.valid.eq(0), self.framing_error.eq(0)]
        m.d.sync += self.overrun.eq(self.source.valid & ~self.source.ready)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(self._divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(line):
                    m.next = "IDLE"          # a glitch, not a start bit
                with m.Else():
                    m.d.sync += [timer.eq(self._divisor - 1), bits.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), bits.eq(bits + 1), timer.eq(self._divisor - 1)]
                    with m.If(bits == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    with m.If(line):
                        m.d.sync += [self.source.payload.eq(shift), self.source.valid.eq(1)]
                    with m.Else():
                        m.d.sync += self.framing_error.eq(1)
                    m.next = "IDLE"
        return m
