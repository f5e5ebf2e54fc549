"""Configuration of an SCTP association endpoint and the sizes derived from it.

Defaults are the protocol parameters of RFC 4960 15 (RTO.Initial 3 s, RTO.Min
1 s, RTO.Max 60 s, Max.Burst 4, Association.Max.Retrans 10,
Path.Max.Retrans 5, Max.Init.Retransmits 8, Valid.Cookie.Life 60 s,
HB.interval 30 s) and the 200 ms delayed-ACK limit of RFC 4960 6.2.  A DDP
association announces the DDP adaptation code point (RFC 5043 5.1) and the
same number of inbound and outbound streams (RFC 5043 8).

`mulpdu` is the largest DDP segment that fits one unfragmented DATA chunk in
one packet of the path MTU, less `bundling_reserve` bytes kept free so that a
SACK can ride along (RFC 5043 9, "SHOULD set the maximum DDP Segment size
below the theoretical maximum"), and never below 516 (RFC 5043 9).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property

from model.sctp.packet import ADAPTATION_CODE_POINT_DDP, COMMON_HEADER_LENGTH, DataChunk

DDP_SSN_LENGTH = 2
"""The DDP-SSN that prefixes the user data of every DDP/SCTP DATA chunk (RFC 5043 5.2.1)."""
MIN_MULPDU = 516
"""RFC 5043 9: room for a Session Control message with 512 bytes of private data."""
SACK_WITHOUT_GAPS_LENGTH = 16
IPV4_HEADER_LENGTH = 20


@dataclass(frozen=True)
class AssociationConfig:
    local_port: int
    peer_port: int
    rng: random.Random = field(compare=False, repr=False)
    hmac_secret: bytes = field(default=b"", repr=False)
    """Key of the State Cookie MAC (RFC 4960 5.1.3); needed by whoever answers an INIT."""
    streams: int = 8
    """Outbound streams announced and maximum inbound streams accepted (equal, RFC 5043 8)."""
    path_mtu: int = 1500
    """IP MTU of the path."""
    lower_layer_overhead: int = IPV4_HEADER_LENGTH
    """Bytes in front of the SCTP packet inside the MTU: 20 for IPv4, 28 with UDP (RFC 6951)."""
    bundling_reserve: int = SACK_WITHOUT_GAPS_LENGTH
    receive_buffer: int = 65536
    """Receive buffer in bytes; the a_rwnd announced in INIT / INIT ACK (RFC 4960 6.2)."""
    manual_receive_window: bool = False
    """False: delivered data frees its buffer at once (DDP places it); True: the user calls `consume()`."""
    rto_initial: float = 3.0
    rto_min: float = 1.0
    rto_max: float = 60.0
    max_burst: int = 4
    association_max_retrans: int = 10
    path_max_retrans: int = 5
    max_init_retransmits: int = 8
    cookie_lifetime: float = 60.0
    heartbeat_interval: float | None = 30.0
    """HB.interval (RFC 4960 8.3); None turns heartbeats off."""
    delayed_ack_time: float = 0.2
    adaptation_code_point: int | None = ADAPTATION_CODE_POINT_DDP
    """Announced in INIT and INIT ACK (RFC 5043 5.1, 11.1); None announces nothing."""
    tag_row: tuple[int, int] | None = None
    """(bits, row): this end's Initiate Tags carry `row` in their low `bits` bits and draw the rest, so that a
    receive engine finds the association's row from an inbound packet's verification tag, without comparing
    every row (RFC 4960 5.3.1 asks only that the tag be random and not 0; 8.5). None: all 32 bits drawn."""

    def __post_init__(self) -> None:
        for name in ("local_port", "peer_port"):
            if not 0 <= getattr(self, name) <= 0xFFFF:
                raise ValueError(f"{name} must fit 16 bits")
        if not 1 <= self.streams <= 0xFFFF:
            raise ValueError("streams must be 1..65535 (RFC 4960 3.3.2)")
        if self.receive_buffer < 1500:
            raise ValueError("receive_buffer below 1500 bytes (RFC 4960 6.2 minimum a_rwnd)")
        if self.delayed_ack_time > 0.5:
            raise ValueError("delayed-ACK time above 500 ms (RFC 4960 6.2)")
        if self.max_packet_size < COMMON_HEADER_LENGTH + DataChunk.HEADER_LENGTH + 4:
            raise ValueError("path MTU too small for a DATA chunk")
        if self.tag_row is not None:
            bits, row = self.tag_row
            if not 1 <= bits <= 16 or not 0 <= row < 1 << bits:
                raise ValueError(f"tag_row {self.tag_row}: 1 to 16 bits, and a row those bits hold")

    @cached_property   # the config is frozen: computed once, on the data path's every segment after
    def max_packet_size(self) -> int:
        """Largest SCTP packet (common header and chunks) that fits the path MTU."""
        return self.path_mtu - self.lower_layer_overhead

    @cached_property
    def mulpdu(self) -> int:
        """Largest DDP segment this association carries (RFC 5043 9): at least 516."""
        room = self.max_packet_size - COMMON_HEADER_LENGTH - DataChunk.HEADER_LENGTH - self.bundling_reserve
        return max(MIN_MULPDU, (room // 4) * 4 - DDP_SSN_LENGTH)

    @cached_property   # asked for every DATA chunk queued
    def max_user_data(self) -> int:
        """Largest DATA chunk user data accepted by `send()`: a DDP-SSN and a MULPDU segment."""
        return self.mulpdu + DDP_SSN_LENGTH
