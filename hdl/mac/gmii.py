"""GMII at the byte level (IEEE 802.3 clause 35) and the frame constants of the MAC.

One GMII direction is, per clock, a byte with its enable and error bits: on
receive RXD, RX_DV, RX_ER; on transmit TXD, TX_EN, TX_ER. Both are
:func:`gmii_layout`. A frame on the wire is a preamble of ``0x55`` bytes, the
start frame delimiter ``0xD5``, the frame (destination address to the end of
the payload, at least 60 bytes) and its FCS, the CRC-32 of IEEE 802.3 clause
3.2.9, least significant byte first (IEEE 802.3 clause 3.2.9 and 4.2.3).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

__all__ = ["gmii_layout", "frame_byte_layout", "PREAMBLE_BYTE", "SFD", "PREAMBLE_BYTES", "FCS_BYTES",
           "MIN_FRAME_BYTES", "DEFAULT_MAX_FRAME_BYTES", "MIN_IFG_BYTES"]

#: Preamble byte and start frame delimiter, as GMII carries them (IEEE 802.3 clause 35.2.3.2).
PREAMBLE_BYTE = 0x55
SFD = 0xD5
#: Preamble bytes before the SFD on transmit (IEEE 802.3 clause 4.2.5).
PREAMBLE_BYTES = 7
FCS_BYTES = 4
#: The minimum frame without its FCS (minFrameSize 64 bytes with it, IEEE 802.3 clause 4.4.2).
MIN_FRAME_BYTES = 60
#: The largest frame taken by default, without FCS: a 9000-byte jumbo payload, its Ethernet II
#: header and 4 bytes of VLAN tag.
DEFAULT_MAX_FRAME_BYTES = 9018
#: The inter-packet gap, 96 bit times (IEEE 802.3 clause 4.4.2).
MIN_IFG_BYTES = 12


def gmii_layout() -> data.StructLayout:
    """One GMII clock: ``data`` (RXD/TXD), ``en`` (RX_DV/TX_EN), ``er`` (RX_ER/TX_ER)."""
    return data.StructLayout({"data": unsigned(8), "en": unsigned(1), "er": unsigned(1)})


def frame_byte_layout() -> data.StructLayout:
    """A byte of a received frame: ``last`` on its final byte, which carries ``drop`` (frame bad)."""
    return data.StructLayout({"data": unsigned(8), "last": unsigned(1), "drop": unsigned(1)})
