"""abi.layout's records pack as the gateware's StructLayouts do (hdl.layout.struct_layout builds those from them)."""

import enum
import inspect
import random

import pytest

import abi.rx
import abi.tx
from abi.layout import Array, Struct
from hdl.layout import EnumShape, struct_layout


def every_record() -> list[tuple[str, Struct]]:
    records = []
    for module in (abi.rx, abi.tx):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, Struct):
                records.append((name, value))
            elif callable(value) and name.endswith("_layout"):
                required = [p for p in inspect.signature(value).parameters.values() if p.default is p.empty]
                records.append((name, value(*[8] * len(required))))
    return records


@pytest.mark.parametrize("name, record", every_record(), ids=[name for name, _ in every_record()])
def test_a_record_packs_and_unpacks_as_its_struct_layout(name, record):
    layout = struct_layout(record)
    assert layout.size == record.size
    rng = random.Random(name)
    for _ in range(20):
        value = rng.getrandbits(record.size)
        fields = record.unpack(value)
        assert record.pack(fields) == value
        assert layout.const(fields).as_value().value == value
        assert layout.from_bits(value).as_value().value == value


def test_fields_left_out_are_zero_and_wide_values_are_cut_as_amaranth_cuts_them():
    record = Struct({"low": 4, "high": 8})
    assert record.pack({"high": 1}) == 1 << 4
    cut = {"low": 0x1F, "high": -1}
    assert record.pack(cut) == struct_layout(record).const(cut).as_value().value == 0xFFF
    with pytest.raises(KeyError):
        record.pack({"middle": 1})


def test_nested_records_and_arrays_unpack_as_dicts_and_lists():
    pair = Struct({"start": 16, "end": 16})
    record = Struct({"count": 4, "gaps": Array(pair, 2)})
    fields = {"count": 2, "gaps": [{"start": 1, "end": 2}, {"start": 3, "end": 4}]}
    assert record.unpack(record.pack(fields)) == fields
    assert record.size == 4 + 64 and record.offset("gaps") == 4


def test_an_enum_field_is_as_wide_as_its_largest_value_and_reads_back_as_the_abi_s_member():
    class Colour(enum.Enum):
        RED = 1
        BLUE = 5

    record = Struct({"colour": Colour, "flag": 1})
    assert record.size == 4 and record.pack({"colour": Colour.BLUE, "flag": 1}) == 5 | 1 << 3
    shape = struct_layout(record)["colour"].shape
    assert isinstance(shape, EnumShape)
    assert struct_layout(record).const({"colour": Colour.BLUE}).colour is Colour.BLUE


def test_the_params_words_hold_what_the_engines_are_built_with():
    params = {"width_bytes": 64, "associations": 16, "stream_ids_log2": 16, "buffers_log2": 4, "key_bits": 24}
    assert abi.rx.RX_PARAMS.unpack(abi.rx.RX_PARAMS.pack(params)) == params
    # 2**24 region rows beside the least key (8 bits) fill the STag's 32 (RFC 5041 4.2)
    assert abi.rx.RX_TABLES.unpack(abi.rx.RX_TABLES.pack({"regions": 1 << 24})) == {"regions": 1 << 24}
    assert abi.rx.RX_PARAMS.size == abi.rx.RX_TABLES.size == abi.tx.TX_PARAMS.size == 32
    assert abi.tx.TX_PARAMS.unpack(0x0040_0708) == {"width_bytes": 8, "ird": 7, "ring_tsns": 64, "transport": 0}
    # the transport unit's bit on top: a 16384-TSN ring (a power of two) still fits beside it
    assert abi.tx.TX_PARAMS.unpack(0xC000_0708) == {"width_bytes": 8, "ird": 7, "ring_tsns": 16384, "transport": 1}


def test_an_enum_field_s_values_are_named_in_the_netlist_as_amaranth_s_own_enums_are():
    from amaranth.back import rtlil
    from amaranth.hdl import Module, Signal

    from hdl.layout import enum_shape

    m = Module()
    status = Signal(enum_shape(abi.rx.SegmentStatus))
    m.d.sync += status.eq(abi.rx.SegmentStatus.ERROR)
    netlist = rtlil.convert(m, ports=[status])
    assert 'attribute \\enum_base_type "SegmentStatus"' in netlist
    assert 'attribute \\enum_value_101 "INVALID_SSN"' in netlist


def test_the_region_row_holds_a_key_of_key_bits_and_by_default_8():
    """STag = row << key_bits | key (RFC 5041 8.2 leaves the structure to the implementation): the row holds the
    key, 8 bits by default, right after ``valid``; a wider key moves the fields after it and widens the write."""
    default, wide = abi.rx.region_entry_layout(), abi.rx.region_entry_layout(key_bits=12)
    assert (default.offset("key"), default.width("key"), default.offset("pd")) == (1, 8, 9)
    assert (wide.offset("key"), wide.width("key"), wide.offset("pd")) == (1, 12, 13)
    assert wide.size == default.size + 4
    window = abi.rx.register_map().tables["region"]
    assert window.layout == abi.rx.region_write_layout(16) and window.layout.size == 4 + default.size
    assert abi.rx.register_map(key_bits=12).tables["region"].layout.size == 4 + wide.size
    assert abi.rx.register_map(key_bits=12).tables["region"].base == window.base


@pytest.mark.parametrize("key_bits, regions, limit", [(7, 16, "at least 8"), (0, 2, "at least 8"),
                                                      (29, 16, "at most 32"), (28, 17, "at most 32")])
def test_a_key_width_outside_its_range_is_refused(key_bits, regions, limit):
    with pytest.raises(ValueError, match=limit):
        abi.rx.register_map(regions=regions, key_bits=key_bits)


@pytest.mark.parametrize("key_bits, regions", [(8, 16), (28, 16), (27, 17), (24, 256), (8, 1 << 24)])
def test_a_key_width_within_its_range_is_taken(key_bits, regions):
    abi.rx.check_key_bits(key_bits, regions)
