"""usrsctp through ctypes with its own UDP encapsulation (RFC 6951): SCTP over real UDP sockets, on real time.

`sim.usrsctp` runs usrsctp in AF_CONN mode: no threads, a virtual clock, and
every packet handed to and taken from the caller. Here usrsctp is a network
stack of its own, as an application linking Debian's ``libusrsctp-dev`` uses
it::

    stack = UdpStack.start(9900)          # usrsctp_init(9900): its UDP socket on port 9900, its threads
    sock = stack.socket()                 # usrsctp_socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP), non-blocking
    sock.set_adaptation_layer(1)          # as in sim.usrsctp: the options, send, receive, status...
    sock.bind("127.0.0.1", 9900)
    sock.set_remote_udp_port(9899)        # SCTP_REMOTE_UDP_ENCAPS_PORT: the peer's UDP port (RFC 6951 5.5)
    sock.connect("127.0.0.1", 9899)       # the INIT leaves in a UDP datagram from port 9900 to port 9899

Why ``usrsctp_init`` and not ``usrsctp_init_nothreads``: in usrsctp 0.9.5
``sctp_init`` records the UDP port either way, but only opens the UDP socket
(and its receive thread, ``recv_thread_init``) when it starts threads; without
them nothing could leave or arrive over UDP. So this mode has usrsctp's timer
thread (its clock the real one, ``gettimeofday``: `sim.usrsctp`'s virtual
clock must not be loaded in the same process, `real_time_library` refuses)
and its receive threads, which take each datagram from the UDP socket and
read the peer's encapsulation port from its source port (RFC 6951 5.5: the
association keeps it). The caller polls its non-blocking sockets from its own
thread; usrsctp locks its state itself.

Ports: usrsctp has one UDP port per process (``usrsctp_init``'s), whatever
the SCTP ports of its sockets; RFC 6951 5.4 has every packet leave from it.
As a device of `driver.open_device("udp:...")` answers on the one port that
is both its UDP and its SCTP port, a socket here is bound to the SCTP port
equal to the stack's UDP port, so one number names it both ways too.

usrsctp also opens a raw IPv4 SCTP socket when it may (CAP_NET_RAW); an
association with a UDP encapsulation port never uses it.
"""

from __future__ import annotations

import ctypes
import errno as errno_codes
import socket as _socket

from sim.usrsctp import IPPROTO_SCTP, Socket, UsrsctpError, _check, _SockaddrStorage, real_time_library

__all__ = ["SCTP_REMOTE_UDP_ENCAPS_PORT", "UdpSocket", "UdpStack"]

SCTP_REMOTE_UDP_ENCAPS_PORT = 0x24
"""The socket option for the peer's UDP encapsulation port (RFC 6951 6.1; usrsctp.h's value)."""
SCTP_PLUGGABLE_SS = 0x1203
SCTP_SS_FIRST_COME = 5
SCTP_GET_SNDBUF_USE = 0x1101
"""usrsctp's netinet/sctp.h (not in usrsctp.h): struct sctp_sockstat, the bytes the association still holds."""
_FUTURE_ASSOC = 0   # SCTP_FUTURE_ASSOC: a one-to-one socket's association, now or to come


class _SockaddrIn(ctypes.Structure):
    """struct sockaddr_in on Linux (no length byte): port and address in network byte order."""

    _fields_ = [("sin_family", ctypes.c_uint16), ("sin_port", ctypes.c_uint16), ("sin_addr", ctypes.c_uint8 * 4),
                ("sin_zero", ctypes.c_uint8 * 8)]


class _UdpEncaps(ctypes.Structure):
    _fields_ = [("sue_address", _SockaddrStorage), ("sue_assoc_id", ctypes.c_uint32), ("sue_port", ctypes.c_uint16)]


class _AssocValue(ctypes.Structure):
    _fields_ = [("assoc_id", ctypes.c_uint32), ("assoc_value", ctypes.c_uint32)]


class _SockStat(ctypes.Structure):
    _fields_ = [("ss_assoc_id", ctypes.c_uint32), ("ss_total_sndbuf", ctypes.c_uint32),
                ("ss_total_recv_buf", ctypes.c_uint32)]


STRUCT_SIZES = {"sockaddr_in": ctypes.sizeof(_SockaddrIn), "sctp_udpencaps": ctypes.sizeof(_UdpEncaps),
                "sctp_assoc_value": ctypes.sizeof(_AssocValue)}
"""sizeof of each struct as bound here, for a check against the C compiler's view of usrsctp.h."""


def _sockaddr_in(ip: str, port: int) -> _SockaddrIn:
    return _SockaddrIn(_socket.AF_INET, _socket.htons(port), (ctypes.c_uint8 * 4)(*_socket.inet_aton(ip)))


class UdpStack:
    """The process's one usrsctp instance, doing its own UDP encapsulation (see the module docstring)."""

    _current: UdpStack | None = None

    def __init__(self) -> None:
        raise TypeError("use UdpStack.start(udp_port)")

    @classmethod
    def start(cls, udp_port: int) -> UdpStack:
        """``usrsctp_init(udp_port)``: usrsctp's threads and its UDP socket on `udp_port` (every address). Checked:
        usrsctp only prints a debug message when it cannot bind, so the port must be taken afterwards."""
        if cls._current is not None:
            raise UsrsctpError(errno_codes.EALREADY, f"usrsctp already runs on UDP port {cls._current.udp_port}")
        if not 0 < udp_port <= 0xFFFF:
            raise ValueError(f"UDP port {udp_port} is not within 1..65535 (0 turns UDP encapsulation off)")
        lib = real_time_library()
        lib.usrsctp_init(udp_port, None, None)
        lib.usrsctp_disable_crc32c_offload()  # usrsctp computes and checks the CRC32c itself (RFC 4960 6.8)
        stack = object.__new__(cls)
        stack._lib, stack._sockets, stack.udp_port = lib, [], udp_port
        cls._current = stack
        if not _udp_port_taken(udp_port):
            raise UsrsctpError(errno_codes.EADDRINUSE, f"usrsctp_init({udp_port}) did not get UDP port {udp_port}")
        return stack

    @property
    def lib(self) -> ctypes.CDLL:
        return self._lib

    def socket(self) -> UdpSocket:
        """A one-to-one style (SOCK_STREAM) AF_INET SCTP socket, non-blocking, polled with `Socket.receive`."""
        handle = self._lib.usrsctp_socket(_socket.AF_INET, _socket.SOCK_STREAM, IPPROTO_SCTP, None, None, 0, None)
        if not handle:
            _check(-1, "usrsctp_socket")
        sock = UdpSocket(self, handle)
        self._sockets.append(sock)
        return sock


def _udp_port_taken(port: int) -> bool:
    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        probe.bind(("0.0.0.0", port))
    except OSError as error:
        return error.errno == errno_codes.EADDRINUSE
    finally:
        probe.close()
    return False


class UdpSocket(Socket):
    """A usrsctp AF_INET socket: `sim.usrsctp.Socket`'s calls, with IPv4 addresses and the peer's UDP port."""

    family = _socket.AF_INET

    def bind(self, ip: str, port: int) -> None:  # type: ignore[override]
        address = _sockaddr_in(ip, port)
        _check(self._lib.usrsctp_bind(self._handle, ctypes.byref(address), ctypes.sizeof(address)), "usrsctp_bind")

    def connect(self, ip: str, port: int) -> None:  # type: ignore[override]
        """Active open (``usrsctp_connect``) to SCTP port `port` at `ip`: the INIT leaves at once, over UDP to the
        port `set_remote_udp_port` chose (set it first: without it usrsctp sends over raw IPv4)."""
        address = _sockaddr_in(ip, port)
        result = self._lib.usrsctp_connect(self._handle, ctypes.byref(address), ctypes.sizeof(address))
        if result < 0 and ctypes.get_errno() != errno_codes.EINPROGRESS:
            _check(result, "usrsctp_connect")

    def set_remote_udp_port(self, port: int) -> None:
        """SCTP_REMOTE_UDP_ENCAPS_PORT for every path (a null address) of the socket's association, or its future
        one: the peer's UDP encapsulation port (RFC 6951 5.5), network byte order in ``sue_port``."""
        encaps = _UdpEncaps()
        encaps.sue_address.ss_family = _socket.AF_INET
        encaps.sue_assoc_id = _FUTURE_ASSOC
        encaps.sue_port = _socket.htons(port)
        self._set(IPPROTO_SCTP, SCTP_REMOTE_UDP_ENCAPS_PORT, encaps)

    def remote_udp_port(self, peer_ip: str) -> int:
        """The UDP encapsulation port usrsctp sends to on the association's path to `peer_ip` (RFC 6951 5.5: on the
        passive side, the source port of the peer's packets), 0 if it has none."""
        encaps = _UdpEncaps()
        address = _sockaddr_in(peer_ip, 0)
        ctypes.memmove(ctypes.byref(encaps.sue_address), ctypes.byref(address), ctypes.sizeof(address))
        encaps.sue_assoc_id = _FUTURE_ASSOC
        self._get(IPPROTO_SCTP, SCTP_REMOTE_UDP_ENCAPS_PORT, encaps)
        return _socket.ntohs(encaps.sue_port)

    def set_first_come_scheduling(self) -> None:
        """SCTP_PLUGGABLE_SS with SCTP_SS_FIRST_COME (RFC 8260 3.1: "first come, first served"): DATA chunks get their
        TSNs in the order their messages were given, whatever their streams."""
        self._set(IPPROTO_SCTP, SCTP_PLUGGABLE_SS, _AssocValue(_FUTURE_ASSOC, SCTP_SS_FIRST_COME))

    def queued_bytes(self) -> int:
        """SCTP_GET_SNDBUF_USE: what usrsctp holds of the association's outgoing data, queued or in flight and not
        yet passed by the peer's Cumulative TSN Ack (user data, plus a DATA chunk header's worth per chunk once it
        has one), so at least the user data not yet acknowledged."""
        stat = _SockStat(_FUTURE_ASSOC, 0, 0)
        self._get(IPPROTO_SCTP, SCTP_GET_SNDBUF_USE, stat)
        return stat.ss_total_sndbuf
