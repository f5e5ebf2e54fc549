"""The MULPDU of DDP over SCTP written out from the RFCs, for tests to derive expected sizes from a scenario.

Independent of `model.sctp.config` on purpose: the tests compare the model with a second reading of
RFC 5043 5.2 and 9.  A DDP segment travels unfragmented in one DATA chunk of one packet (RFC 5043 9),
after a 2-byte DDP-SSN (5.2.1); the packet fits the path MTU with its IPv4 header (RFC 791, no options)
and, over UDP, the UDP header (RFC 768, RFC 6951); room for a SACK without gap blocks stays free so it
can be bundled ("SHOULD set the maximum DDP Segment size below the theoretical maximum", 9); the DATA
chunk's user data ends on a 4-byte boundary (RFC 4960 3.2); and the MULPDU is never below 516 (9).
"""

IPV4_HEADER = 20
UDP_HEADER = 8
SCTP_COMMON_HEADER = 12
DATA_CHUNK_HEADER = 16
SACK_WITHOUT_GAPS = 16
DDP_SSN = 2
MIN_MULPDU = 516
TAGGED_DDP_HEADER = 14
"""RFC 5041 4.2 (with the RDMAP control byte): the payload of a tagged segment is MULPDU - 14."""
UNTAGGED_DDP_HEADER = 18
"""RFC 5041 4.3: the payload of an untagged segment is MULPDU - 18."""


def mulpdu(path_mtu: int = 1500, udp: bool = False) -> int:
    """The largest DDP segment of an association on a path of `path_mtu` bytes, over UDP or not."""
    lower = IPV4_HEADER + (UDP_HEADER if udp else 0)
    room = path_mtu - lower - SCTP_COMMON_HEADER - DATA_CHUNK_HEADER - SACK_WITHOUT_GAPS
    return max(MIN_MULPDU, room // 4 * 4 - DDP_SSN)
