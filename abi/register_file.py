"""The AXI4-Lite register file's map: configuration words, read-only counters, table write windows.

A :class:`RegisterMap` is computed from plain data (names and layouts), so the
gateware (:class:`hdl.bus.register_file.RegisterFile`), the testbenches and the
host driver share one definition and never hard-code an offset. Registers are
32 bits wide at 4-byte aligned byte offsets:

* ``0x000`` ``ID`` (read only, :data:`DEVICE_ID`), ``0x004`` ``PARAMS`` (read
  only: the engine's build parameters, a layout of its own, e.g.
  :data:`abi.rx.RX_PARAMS` and :data:`abi.tx.TX_PARAMS`);
* configuration words (read/write) from ``0x010``;
* counters (read only, 32 bits, wrapping) from ``0x100``;
* one window of 256 bytes per table from ``0x400``: the table's write layout
  is staged in words ``+0x00, +0x04, ...`` (word 0 holds layout bits 31:0)
  and a write to ``+0xFC`` (``COMMIT``) pushes the staged value into the
  table's write stream; ``COMMIT`` reads 1 while that write is pending.

Writes are whole words (``WSTRB`` is not used). Unmapped addresses read
as 0 and ignore writes; every access gets OKAY.
"""

from dataclasses import dataclass

from abi.layout import Struct

__all__ = ["DEVICE_ID", "ID_OFFSET", "PARAMS_OFFSET", "CONFIG_BASE", "COUNTER_BASE", "TABLE_BASE", "TABLE_STRIDE",
           "COMMIT_OFFSET", "RegisterMap", "TableWindow"]

DEVICE_ID = 0x524E4943  # "RNIC"
ID_OFFSET, PARAMS_OFFSET = 0x000, 0x004
CONFIG_BASE, COUNTER_BASE, TABLE_BASE = 0x010, 0x100, 0x400
TABLE_STRIDE, COMMIT_OFFSET = 0x100, 0xFC


@dataclass(frozen=True)
class TableWindow:
    name: str
    base: int
    layout: Struct

    @property
    def words(self) -> int:
        return (self.layout.size + 31) // 32

    @property
    def commit(self) -> int:
        return self.base + COMMIT_OFFSET

    def encode(self, fields: dict) -> list[int]:
        """The staging words for one table write (a dict of the layout's fields)."""
        value = self.layout.pack(fields)
        return [(value >> (32 * i)) & 0xFFFFFFFF for i in range(self.words)]


class RegisterMap:
    """Offsets of every register, from the names of the configuration words,
    counters and tables (in order) and the tables' write layouts."""

    def __init__(self, config: list[tuple[str, int]], counters: list[str], tables: list[tuple[str, Struct]]):
        self.config = {name: (CONFIG_BASE + 4 * i, bits) for i, (name, bits) in enumerate(config)}
        self.counters = {name: COUNTER_BASE + 4 * i for i, name in enumerate(counters)}
        self.tables = {name: TableWindow(name, TABLE_BASE + TABLE_STRIDE * i, layout)
                       for i, (name, layout) in enumerate(tables)}
        if CONFIG_BASE + 4 * len(config) > COUNTER_BASE or COUNTER_BASE + 4 * len(counters) > TABLE_BASE:
            raise ValueError("too many registers for the map's fixed bases")
        for window in self.tables.values():
            if window.words * 4 > COMMIT_OFFSET:
                raise ValueError(f"table {window.name} layout is wider than its window")

    def config_offset(self, name: str) -> int:
        return self.config[name][0]
