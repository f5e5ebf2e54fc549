"""usrsctp through ctypes: an SCTP stack nobody here wrote, as the peer of `model.sctp` in one process.

usrsctp (https://github.com/sctplab/usrsctp; Debian's ``libusrsctp-dev``, whose
runtime library ``libusrsctp.so.2`` is in ``libusrsctp2``) is the FreeBSD
kernel's SCTP built as a user-space library. Its AF_CONN address family carries
raw SCTP packets (common header and chunks, RFC 4960 3, as `model.sctp.packet`
encodes them) through two calls instead of a network: usrsctp hands every
packet it sends to an output callback, and takes every packet it receives
from ``usrsctp_conninput``. This module binds the calls a test needs to put
usrsctp at one end of an in-memory link and the model's association at the
other::

    stack = Stack.instance()          # usrsctp_init_nothreads, once per process
    conn = stack.conn()               # an AF_CONN address: usrsctp_register_address
    sock = stack.socket()             # usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP), non-blocking
    sock.bind(conn, 6000)             # usrsctp_bind with a struct sockaddr_conn
    sock.connect(conn, 5000)          # usrsctp_connect (INIT); or listen() and accept()
    conn.input(packet)                # a packet from the peer: usrsctp_conninput
    conn.output()                     # the packets usrsctp sent through `conn` since the last call
    stack.advance(milliseconds)       # usrsctp_handle_timers: its clock, in the caller's time
    sock.send(data, ppid=16, unordered=True)   # usrsctp_sendv with a struct sctp_sndinfo
    sock.receive()                    # usrsctp_recvv: a Message, a notification or None
    sock.shutdown(); sock.abort(b"reason"); sock.close()

Threads and time. ``usrsctp_init_nothreads`` (usrsctp 0.9.5, Debian 12's)
starts no timer thread and, with UDP encapsulation port 0, no receive thread.
It still starts its iterator thread (``sctp_startup_iterator``), which sleeps
until an address change or an "all associations" socket option gives it work;
nothing here does. So every packet usrsctp sends leaves from inside one of our
calls (conninput, sendv, connect, shutdown, close, handle_timers), and the
output callback only queues it: nothing re-enters usrsctp from a callback.
Its timers (T1-init, T1-cookie, T3-rtx, delayed SACK, T2-shutdown,
heartbeats) run only when `Stack.advance` says time has passed
(``usrsctp_handle_timers`` takes the milliseconds elapsed). usrsctp also
reads the time of day (``gettimeofday``): to measure RTTs
(``sctp_calculate_rto``), to stamp State Cookies and, on a T3-rtx expiry, to
pick the chunks outstanding longer than SRTT + 4 RTTVAR
(``sctp_mark_all_for_resend``: a chunk sent less than that long ago by the
wall clock is not retransmitted, so with timers in virtual time and the wall
clock in real time a T3-rtx could expire and send nothing). `library`
therefore points libusrsctp's import of ``gettimeofday`` (its GOT slot, found
in the ELF relocations and written through ``mprotect`` as the library is
linked with full RELRO) at the same virtual clock, so usrsctp lives in the
caller's time only (`real_time_library` loads it without that, for
`sim.usrsctp_udp`; a process has one clock or the other, as it has one
usrsctp). What remains of the host is its random numbers
(verification tags, initial TSNs, heartbeat jitter, from ``getrandom``): a
run that wants to be the same every time switches heartbeats off
(`Socket.set_heartbeat`) and keeps its own decisions (which packets to drop)
independent of usrsctp's random values.

Checksums. usrsctp computes the CRC32c of every packet it sends and checks
that of every packet it receives (RFC 4960 6.8) unless the application says a
lower layer does (``usrsctp_enable_crc32c_offload``); `Stack` keeps it on
(``usrsctp_disable_crc32c_offload``), so a packet of ours with a bad CRC32c
is dropped by usrsctp as by any peer.

Struct layouts are those of ``/usr/include/usrsctp.h`` on Linux (struct
sockaddr_conn has no length byte there). The socket API passes a PPID to the
DATA chunk and back unchanged (RFC 6458 5.3.4, 5.3.5), so it goes in network
byte order; `Socket.send` and `Socket.receive` take and give host integers.

Without the library every entry point raises `UsrsctpUnavailable`, which
names the Debian package.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as errno_codes
import functools
import os
import socket as _socket
import struct
from dataclasses import dataclass

__all__ = [
    "PACKAGE", "UsrsctpUnavailable", "UsrsctpError", "library", "available", "Stack", "Conn", "Socket",
    "Message", "Notification", "AssocChange", "ShutdownEvent", "AdaptationIndication", "RemoteError",
    "OtherNotification", "Status", "AF_CONN", "IPPROTO_SCTP", "SCTP_STATES", "ASSOC_CHANGE_STATES",
]

PACKAGE = "libusrsctp-dev"
"""The Debian package with the header and the library (its runtime half is libusrsctp2)."""
_SONAMES = ("libusrsctp.so.2",)

AF_CONN = 123
IPPROTO_SCTP = 132
MSG_NOTIFICATION = 0x2000
MSG_EOR = _socket.MSG_EOR

# Socket options (usrsctp.h; RFC 6458 8).
SCTP_NODELAY = 0x04
SCTP_ADAPTATION_LAYER = 0x08
SCTP_DISABLE_FRAGMENTS = 0x09
SCTP_PEER_ADDR_PARAMS = 0x0A
SCTP_EVENT = 0x1E
SCTP_RECVRCVINFO = 0x1F
SCTP_INITMSG = 0x03
SCTP_STATUS = 0x100
SPP_HB_ENABLE = 0x01
SPP_HB_DISABLE = 0x02
SPP_PMTUD_DISABLE = 0x10

# sctp_sndinfo snd_flags, sctp_rcvinfo rcv_flags.
SCTP_ABORT = 0x0200
SCTP_UNORDERED = 0x0400
SCTP_SENDV_SNDINFO = 1
SCTP_RECVV_RCVINFO = 1

# Notifications (RFC 6458 6.1).
SCTP_ASSOC_CHANGE = 0x0001
SCTP_PEER_ADDR_CHANGE = 0x0002
SCTP_REMOTE_ERROR = 0x0003
SCTP_SHUTDOWN_EVENT = 0x0005
SCTP_ADAPTATION_INDICATION = 0x0006
SCTP_SEND_FAILED_EVENT = 0x000E
_SUBSCRIBED = (SCTP_ASSOC_CHANGE, SCTP_PEER_ADDR_CHANGE, SCTP_REMOTE_ERROR, SCTP_SHUTDOWN_EVENT,
               SCTP_ADAPTATION_INDICATION, SCTP_SEND_FAILED_EVENT)

ASSOC_CHANGE_STATES = {1: "COMM_UP", 2: "COMM_LOST", 3: "RESTART", 4: "SHUTDOWN_COMP", 5: "CANT_STR_ASSOC"}
"""sac_state of an SCTP_ASSOC_CHANGE notification (RFC 6458 6.1.1)."""
SCTP_STATES = {
    0x0000: "CLOSED", 0x1000: "BOUND", 0x2000: "LISTEN", 0x0002: "COOKIE-WAIT", 0x0004: "COOKIE-ECHOED",
    0x0008: "ESTABLISHED", 0x0010: "SHUTDOWN-SENT", 0x0020: "SHUTDOWN-RECEIVED", 0x0040: "SHUTDOWN-ACK-SENT",
    0x0080: "SHUTDOWN-PENDING",
}
"""sstat_state of SCTP_STATUS, named as RFC 4960 4 names the states (`model.sctp.state.AssociationState` values)."""


class UsrsctpUnavailable(RuntimeError):
    """The usrsctp library is not installed, not loadable or cannot be given a virtual clock; the message says
    which and names the Debian package."""


class UsrsctpError(OSError):
    """A usrsctp call failed; ``errno`` is its errno and the message names the call."""


# -- structs (usrsctp.h, Linux layout) -----------------------------------------------------------------


class _SockaddrConn(ctypes.Structure):
    _fields_ = [("sconn_family", ctypes.c_uint16), ("sconn_port", ctypes.c_uint16), ("sconn_addr", ctypes.c_void_p)]


class _SndInfo(ctypes.Structure):
    _fields_ = [("snd_sid", ctypes.c_uint16), ("snd_flags", ctypes.c_uint16), ("snd_ppid", ctypes.c_uint32),
                ("snd_context", ctypes.c_uint32), ("snd_assoc_id", ctypes.c_uint32)]


class _RcvInfo(ctypes.Structure):
    _fields_ = [("rcv_sid", ctypes.c_uint16), ("rcv_ssn", ctypes.c_uint16), ("rcv_flags", ctypes.c_uint16),
                ("rcv_ppid", ctypes.c_uint32), ("rcv_tsn", ctypes.c_uint32), ("rcv_cumtsn", ctypes.c_uint32),
                ("rcv_context", ctypes.c_uint32), ("rcv_assoc_id", ctypes.c_uint32)]


class _Event(ctypes.Structure):
    _fields_ = [("se_assoc_id", ctypes.c_uint32), ("se_type", ctypes.c_uint16), ("se_on", ctypes.c_uint8)]


class _InitMsg(ctypes.Structure):
    _fields_ = [("sinit_num_ostreams", ctypes.c_uint16), ("sinit_max_instreams", ctypes.c_uint16),
                ("sinit_max_attempts", ctypes.c_uint16), ("sinit_max_init_timeo", ctypes.c_uint16)]


class _SockaddrStorage(ctypes.Structure):
    _fields_ = [("ss_family", ctypes.c_uint16), ("_pad", ctypes.c_uint8 * 6), ("_align", ctypes.c_uint64 * 15)]


class _PaddrInfo(ctypes.Structure):
    _fields_ = [("spinfo_address", _SockaddrStorage), ("spinfo_assoc_id", ctypes.c_uint32),
                ("spinfo_state", ctypes.c_int32), ("spinfo_cwnd", ctypes.c_uint32), ("spinfo_srtt", ctypes.c_uint32),
                ("spinfo_rto", ctypes.c_uint32), ("spinfo_mtu", ctypes.c_uint32)]


class _Status(ctypes.Structure):
    _fields_ = [("sstat_assoc_id", ctypes.c_uint32), ("sstat_state", ctypes.c_int32), ("sstat_rwnd", ctypes.c_uint32),
                ("sstat_unackdata", ctypes.c_uint16), ("sstat_penddata", ctypes.c_uint16),
                ("sstat_instrms", ctypes.c_uint16), ("sstat_outstrms", ctypes.c_uint16),
                ("sstat_fragmentation_point", ctypes.c_uint32), ("sstat_primary", _PaddrInfo)]


class _PaddrParams(ctypes.Structure):
    _fields_ = [("spp_address", _SockaddrStorage), ("spp_assoc_id", ctypes.c_uint32),
                ("spp_hbinterval", ctypes.c_uint32), ("spp_pathmtu", ctypes.c_uint32), ("spp_flags", ctypes.c_uint32),
                ("spp_ipv6_flowlabel", ctypes.c_uint32), ("spp_pathmaxrxt", ctypes.c_uint16),
                ("spp_dscp", ctypes.c_uint8)]


STRUCT_SIZES = {
    "sockaddr_conn": ctypes.sizeof(_SockaddrConn), "sctp_sndinfo": ctypes.sizeof(_SndInfo),
    "sctp_rcvinfo": ctypes.sizeof(_RcvInfo), "sctp_event": ctypes.sizeof(_Event),
    "sctp_initmsg": ctypes.sizeof(_InitMsg), "sctp_status": ctypes.sizeof(_Status),
    "sctp_paddrparams": ctypes.sizeof(_PaddrParams),
}
"""sizeof of each struct as bound here, for a check against the C compiler's view of usrsctp.h."""

_OUTPUT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint8,
                           ctypes.c_uint8)


# -- the library -------------------------------------------------------------------------------------


def _unavailable(detail: str) -> UsrsctpUnavailable:
    return UsrsctpUnavailable(f"usrsctp is not available ({detail}): install Debian's {PACKAGE} "
                              f"(apt-get install {PACKAGE})")


_clock_mode: str | None = None
"""How this process loaded libusrsctp: "virtual" (`library`) or "real" (`real_time_library`); one per process,
as usrsctp keeps its state, and the redirected ``gettimeofday``, in the one copy of the library."""


def _library_names() -> list[str]:
    names = list(_SONAMES)
    found = ctypes.util.find_library("usrsctp")
    if found and found not in names:
        names.append(found)
    return names


def _claim_clock(mode: str) -> None:
    global _clock_mode
    if _clock_mode not in (None, mode):
        raise UsrsctpError(errno_codes.EBUSY, f"libusrsctp is already loaded in this process on the {_clock_mode} "
                                              f"clock; usrsctp runs on one clock per process")
    _clock_mode = mode


@functools.cache
def library() -> ctypes.CDLL:
    """The loaded libusrsctp with the prototypes used here, its clock the virtual one (see the module
    docstring); `UsrsctpUnavailable` when it is missing."""
    lib = _load(_library_names())
    _claim_clock("virtual")
    try:
        _redirect_import(lib, "usrsctp_init_nothreads", "gettimeofday", _virtual_gettimeofday)
    except (OSError, ValueError, struct.error) as error:
        raise UsrsctpUnavailable(f"usrsctp ({PACKAGE}) cannot be given a virtual clock here ({error}): "
                                 "sim.usrsctp redirects libusrsctp's gettimeofday, which needs Linux on x86-64 or "
                                 "AArch64") from None
    return lib


@functools.cache
def real_time_library() -> ctypes.CDLL:
    """libusrsctp with the same prototypes on the host's own clock: no redirection, for ``usrsctp_init`` with
    its threads (`sim.usrsctp_udp`); `UsrsctpError` (EBUSY) if `library` was loaded in this process first."""
    lib = _load(_library_names())
    _claim_clock("real")
    return lib


def _load(names: list[str]) -> ctypes.CDLL:
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            break
        except OSError as error:
            errors.append(str(error))
    else:
        raise _unavailable("; ".join(errors) or "libusrsctp not found")
    if not hasattr(lib, "usrsctp_init_nothreads") or not hasattr(lib, "usrsctp_handle_timers"):
        raise _unavailable("this libusrsctp lacks usrsctp_init_nothreads / usrsctp_handle_timers (0.9.5 has them)")
    P, I, U16, U32, SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_size_t
    prototypes = {
        "usrsctp_init_nothreads": (None, [U16, _OUTPUT, P]),
        "usrsctp_init": (None, [U16, P, P]),   # no output callback: usrsctp sends itself
        "usrsctp_finish": (I, []),
        "usrsctp_socket": (P, [I, I, I, P, P, U32, P]),
        "usrsctp_close": (None, [P]),
        "usrsctp_shutdown": (I, [P, I]),
        "usrsctp_bind": (I, [P, P, ctypes.c_uint32]),
        "usrsctp_listen": (I, [P, I]),
        "usrsctp_accept": (P, [P, P, P]),
        "usrsctp_connect": (I, [P, P, ctypes.c_uint32]),
        "usrsctp_set_non_blocking": (I, [P, I]),
        "usrsctp_setsockopt": (I, [P, I, I, P, ctypes.c_uint32]),
        "usrsctp_getsockopt": (I, [P, I, I, P, P]),
        "usrsctp_sendv": (ctypes.c_ssize_t, [P, P, SZ, P, I, P, ctypes.c_uint32, ctypes.c_uint, I]),
        "usrsctp_recvv": (ctypes.c_ssize_t, [P, P, SZ, P, P, P, P, P, P]),
        "usrsctp_conninput": (None, [P, P, SZ, ctypes.c_uint8]),
        "usrsctp_register_address": (None, [P]),
        "usrsctp_deregister_address": (None, [P]),
        "usrsctp_handle_timers": (None, [U32]),
        "usrsctp_disable_crc32c_offload": (None, []),
    }
    for name, (restype, argtypes) in prototypes.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


# -- the virtual clock -------------------------------------------------------------------------------

_EPOCH_SECONDS = 1_000_000_000
"""What usrsctp's time of day reads at virtual time 0: far from 0, as it subtracts RTOs from it."""
_clock_ms = 0
"""Virtual milliseconds since the process first loaded usrsctp; only `Stack.advance` moves it."""


class _Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


_GETTIMEOFDAY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Timeval), ctypes.c_void_p)


@_GETTIMEOFDAY
def _virtual_gettimeofday(timeval, timezone):  # noqa: ANN001, ARG001 - a C callback
    """usrsctp's ``gettimeofday``: the virtual clock."""
    if timeval:
        seconds, milliseconds = divmod(_clock_ms, 1000)
        timeval[0].tv_sec = _EPOCH_SECONDS + seconds
        timeval[0].tv_usec = milliseconds * 1000
    return 0


_JUMP_SLOT_TYPES = {62: (6, 7), 183: (1025, 1026)}
"""ELF e_machine -> (GLOB_DAT, JUMP_SLOT) relocation types: x86-64, AArch64."""


def _import_slot_offsets(path: str, symbol: str) -> list[int]:
    """Where the dynamic linker stores the address of `symbol` for the ELF64 shared object at `path`: the
    r_offset of its GLOB_DAT and JUMP_SLOT relocations (offsets from the load address)."""
    with open(path, "rb") as file:
        image = file.read()
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        raise ValueError(f"{path} is not a little-endian ELF64 object")
    machine, = struct.unpack_from("<H", image, 18)
    shoff, = struct.unpack_from("<Q", image, 40)
    shentsize, shnum = struct.unpack_from("<HH", image, 58)
    if machine not in _JUMP_SLOT_TYPES:
        raise ValueError(f"ELF machine {machine} is neither x86-64 nor AArch64")
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    offsets = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 4 or not entsize:  # SHT_RELA
            continue
        symtab, strtab = sections[link], sections[sections[link][6]]
        for r_offset, r_info, _addend in struct.iter_unpack("<QQq", image[offset:offset + size]):
            if r_info & 0xFFFFFFFF not in _JUMP_SLOT_TYPES[machine]:
                continue
            name_offset, = struct.unpack_from("<I", image, symtab[4] + (r_info >> 32) * symtab[9])
            start = strtab[4] + name_offset
            if image[start:image.index(b"\0", start)] == symbol.encode():
                offsets.append(r_offset)
    if not offsets:
        raise ValueError(f"{path} imports no {symbol}")
    return offsets


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p), ("dli_sname", ctypes.c_char_p),
                ("dli_saddr", ctypes.c_void_p)]


def _redirect_import(lib: ctypes.CDLL, function: str, symbol: str, replacement: ctypes._CFuncPtr) -> None:
    """Make `lib`'s calls of the imported `symbol` call `replacement`: write its address into the GOT slots
    (`function` is one of `lib`'s own, to find where it is loaded)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    info = _DlInfo()
    if not libc.dladdr(ctypes.cast(getattr(lib, function), ctypes.c_void_p), ctypes.byref(info)):
        raise ValueError("dladdr does not know libusrsctp")
    page = os.sysconf("SC_PAGE_SIZE")
    address = ctypes.cast(replacement, ctypes.c_void_p).value
    for offset in _import_slot_offsets(os.fsdecode(info.dli_fname), symbol):
        slot = info.dli_fbase + offset
        start = slot - slot % page
        length = slot + ctypes.sizeof(ctypes.c_void_p) - start
        if libc.mprotect(start, length, 3) != 0:  # PROT_READ | PROT_WRITE: the slot is in RELRO
            raise OSError(ctypes.get_errno(), "mprotect")
        ctypes.c_void_p.from_address(slot).value = address
        libc.mprotect(start, length, 1)  # PROT_READ, as RELRO left it


def check_installed() -> None:
    """`UsrsctpUnavailable` unless libusrsctp loads (for a process whose children run it: no clock chosen here)."""
    _load(_library_names())


def available() -> bool:
    """True when `library()` loads."""
    try:
        library()
    except UsrsctpUnavailable:
        return False
    return True


def _check(result: int, call: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise UsrsctpError(code, f"{call}: {os.strerror(code)}")
    return result


# -- the stack ---------------------------------------------------------------------------------------


class Stack:
    """The process's one usrsctp instance (usrsctp keeps its state in globals): `instance()` starts it."""

    _current: Stack | None = None

    def __init__(self) -> None:
        raise TypeError("use Stack.instance()")

    @classmethod
    def instance(cls) -> Stack:
        """The running stack, started (``usrsctp_init_nothreads``) on first use; `UsrsctpUnavailable` without
        the library."""
        if cls._current is None:
            lib = library()
            stack = object.__new__(cls)
            stack._lib = lib
            stack._conns = {}
            stack._sockets = []
            lib.usrsctp_init_nothreads(0, _conn_output, None)
            lib.usrsctp_disable_crc32c_offload()  # usrsctp computes and checks the CRC32c itself (RFC 4960 6.8)
            cls._current = stack
        return cls._current

    @property
    def lib(self) -> ctypes.CDLL:
        return self._lib

    def _check_running(self) -> None:
        if Stack._current is not self:
            raise UsrsctpError(errno_codes.ESHUTDOWN, "this usrsctp stack was finished; use Stack.instance()")

    def conn(self) -> Conn:
        """A new AF_CONN address (``usrsctp_register_address``): the wire of one association."""
        self._check_running()
        conn = Conn(self)
        self._conns[conn.address] = conn
        return conn

    def socket(self) -> Socket:
        """A one-to-one style (SOCK_STREAM) AF_CONN SCTP socket, non-blocking, polled with `Socket.receive`."""
        self._check_running()
        handle = self._lib.usrsctp_socket(AF_CONN, _socket.SOCK_STREAM, IPPROTO_SCTP, None, None, 0, None)
        if not handle:
            _check(-1, "usrsctp_socket")
        sock = Socket(self, handle)
        self._sockets.append(sock)
        return sock

    @property
    def clock_ms(self) -> int:
        """usrsctp's virtual time in milliseconds (what its timers and its ``gettimeofday`` see)."""
        return _clock_ms

    def advance(self, milliseconds: int) -> None:
        """Let `milliseconds` pass for usrsctp: its time of day moves on and its due timers fire
        (``usrsctp_handle_timers``), which may send packets."""
        global _clock_ms
        self._check_running()
        if milliseconds < 0:
            raise ValueError("time does not go back")
        if milliseconds:
            _clock_ms += milliseconds
            self._lib.usrsctp_handle_timers(milliseconds)

    def finish(self, max_seconds: int = 600) -> bool:
        """Close every socket, forget every address and stop usrsctp (``usrsctp_finish``), letting its timers
        free what closing left (in virtual time, up to `max_seconds`); False if it would not stop."""
        for sock in list(self._sockets):
            sock.close()
        for conn in list(self._conns.values()):
            conn.close()
        for _ in range(max_seconds):
            if self._lib.usrsctp_finish() == 0:
                Stack._current = None
                return True
            self.advance(1000)
        return False

    def _output(self, address: int | None, packet: bytes) -> None:
        conn = self._conns.get(address)
        if conn is not None:
            conn._outgoing.append(packet)


@_OUTPUT
def _conn_output(address, buffer, length, tos, set_df):  # noqa: ANN001, ARG001 - a C callback
    """usrsctp's output callback: queue the packet on its `Conn` (never call back into usrsctp from here)."""
    stack = Stack._current
    if stack is not None:
        stack._output(address, ctypes.string_at(buffer, length))
    return 0


class Conn:
    """One AF_CONN address: its packets out (`output`) and in (`input`), for one association's link."""

    def __init__(self, stack: Stack) -> None:
        self._stack = stack
        self._token = ctypes.c_int(0)  # usrsctp only compares and hands back the pointer; this keeps it unique
        self.address: int = ctypes.addressof(self._token)
        self._outgoing: list[bytes] = []
        self._closed = False
        stack.lib.usrsctp_register_address(self.address)

    def sockaddr(self, port: int) -> _SockaddrConn:
        return _SockaddrConn(AF_CONN, _socket.htons(port), self.address)

    def input(self, packet: bytes) -> None:
        """Hand usrsctp one packet from the peer (``usrsctp_conninput``); its answers queue for `output`."""
        if self._closed:
            return
        buffer = ctypes.create_string_buffer(bytes(packet), len(packet))
        self._stack.lib.usrsctp_conninput(self.address, buffer, len(packet), 0)

    def output(self) -> list[bytes]:
        """The packets usrsctp sent through this address since the last call, oldest first."""
        packets, self._outgoing = self._outgoing, []
        return packets

    def close(self) -> None:
        """Forget the address (``usrsctp_deregister_address``); later packets for it are dropped."""
        if not self._closed:
            self._closed = True
            self._stack.lib.usrsctp_deregister_address(self.address)
            self._stack._conns.pop(self.address, None)


# -- what a socket reads -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """A user message (``usrsctp_recvv`` with its struct sctp_rcvinfo)."""

    data: bytes
    stream: int
    ppid: int
    ssn: int
    tsn: int
    unordered: bool
    complete: bool
    """MSG_EOR: the whole message (usrsctp delivers partial messages only above its partial delivery point)."""


class Notification:
    """Base of the SCTP notifications a socket reads (RFC 6458 6.1)."""


@dataclass(frozen=True)
class AssocChange(Notification):
    """SCTP_ASSOC_CHANGE (RFC 6458 6.1.1): `state` is COMM_UP, COMM_LOST, SHUTDOWN_COMP..."""

    state: str
    error: int
    outbound_streams: int
    inbound_streams: int


@dataclass(frozen=True)
class ShutdownEvent(Notification):
    """SCTP_SHUTDOWN_EVENT (RFC 6458 6.1.5): the peer sent SHUTDOWN."""


@dataclass(frozen=True)
class AdaptationIndication(Notification):
    """SCTP_ADAPTATION_INDICATION (RFC 6458 6.1.6): the peer's Adaptation Layer Indication (RFC 5061 4.2.5)."""

    code_point: int


@dataclass(frozen=True)
class RemoteError(Notification):
    """SCTP_REMOTE_ERROR (RFC 6458 6.1.3): the peer sent an ERROR chunk."""

    cause: int
    """The code of its first cause (usrsctp 0.9.5 fills sre_error in host byte order)."""
    data: bytes
    """The ERROR chunk as received."""


@dataclass(frozen=True)
class OtherNotification(Notification):
    """Any other notification: its sn_type and its bytes as read (SCTP_PEER_ADDR_CHANGE, SCTP_SEND_FAILED_EVENT)."""

    type: int
    data: bytes


def _notification(data: bytes) -> Notification:
    kind, _flags, _length = struct.unpack_from("=HHI", data, 0)
    if kind == SCTP_ASSOC_CHANGE:
        state, error, outbound, inbound = struct.unpack_from("=HHHH", data, 8)
        return AssocChange(ASSOC_CHANGE_STATES.get(state, str(state)), error, outbound, inbound)
    if kind == SCTP_SHUTDOWN_EVENT:
        return ShutdownEvent()
    if kind == SCTP_ADAPTATION_INDICATION:
        return AdaptationIndication(struct.unpack_from("=I", data, 8)[0])
    if kind == SCTP_REMOTE_ERROR:
        return RemoteError(struct.unpack_from("=H", data, 8)[0], data[16:])
    return OtherNotification(kind, data)


@dataclass(frozen=True)
class Status:
    """SCTP_STATUS (RFC 6458 8.2) of a socket's association."""

    state: str
    """RFC 4960 4's name for the state: ESTABLISHED, SHUTDOWN-SENT..."""
    rwnd: int
    unacked: int
    pending: int
    inbound_streams: int
    outbound_streams: int
    fragmentation_point: int
    """Largest user message sent in one DATA chunk."""
    cwnd: int
    srtt_ms: int
    rto_ms: int
    mtu: int


# -- sockets -----------------------------------------------------------------------------------------


class Socket:
    """A usrsctp SCTP socket (one-to-one style, non-blocking); made by `Stack.socket` or `accept`."""

    family = AF_CONN
    """Its address family (`sim.usrsctp_udp`'s sockets are AF_INET)."""

    def __init__(self, stack: Stack, handle: int) -> None:
        self._stack = stack
        self._handle = handle
        self.closed = False
        self.eof = False
        """recvv returned 0: the peer shut down or the association is gone and everything was read."""
        self.error: int | None = None
        """The errno of the last failing `receive` other than EWOULDBLOCK (ECONNRESET after an ABORT)."""
        lib = stack.lib
        _check(lib.usrsctp_set_non_blocking(handle, 1), "usrsctp_set_non_blocking")
        self._set(IPPROTO_SCTP, SCTP_RECVRCVINFO, ctypes.c_int(1))
        for kind in _SUBSCRIBED:
            self._set(IPPROTO_SCTP, SCTP_EVENT, _Event(0, kind, 1))

    @property
    def _lib(self) -> ctypes.CDLL:
        return self._stack.lib

    def _set(self, level: int, option: int, value: ctypes._CData) -> None:
        result = self._lib.usrsctp_setsockopt(self._handle, level, option, ctypes.byref(value), ctypes.sizeof(value))
        _check(result, f"usrsctp_setsockopt(0x{option:x})")

    def _get(self, level: int, option: int, value: ctypes._CData) -> None:
        size = ctypes.c_uint32(ctypes.sizeof(value))
        result = self._lib.usrsctp_getsockopt(self._handle, level, option, ctypes.byref(value), ctypes.byref(size))
        _check(result, f"usrsctp_getsockopt(0x{option:x})")

    # -- options (set before connect or listen; an accepted socket inherits them, but see set_heartbeat)

    def set_nodelay(self, on: bool = True) -> None:
        """SCTP_NODELAY: no Nagle-like holding back of small messages (RFC 6458 8.1)."""
        self._set(IPPROTO_SCTP, SCTP_NODELAY, ctypes.c_int(int(on)))

    def set_send_buffer(self, nbytes: int) -> None:
        """SO_SNDBUF: a message larger than the send buffer is never taken by a non-blocking socket."""
        self._set(_socket.SOL_SOCKET, _socket.SO_SNDBUF, ctypes.c_int(nbytes))

    def set_receive_buffer(self, nbytes: int) -> None:
        """SO_RCVBUF: the receive window the association advertises (a_rwnd, RFC 4960 6.2)."""
        self._set(_socket.SOL_SOCKET, _socket.SO_RCVBUF, ctypes.c_int(nbytes))

    def set_blocking(self, on: bool = True) -> None:
        """``usrsctp_set_non_blocking``: with `on`, `send` waits for room in the send buffer and `receive` for
        data (None then only when the association is gone), inside usrsctp with the GIL released; for a
        process of its own on real time (`sim.usrsctp_udp`), not for AF_CONN, whose packets the caller moves."""
        _check(self._lib.usrsctp_set_non_blocking(self._handle, 0 if on else 1), "usrsctp_set_non_blocking")

    def set_disable_fragments(self, on: bool = True) -> None:
        """SCTP_DISABLE_FRAGMENTS (RFC 6458 8.1): a message above the fragmentation point is refused
        (EMSGSIZE) instead of split, as DDP over SCTP wants (RFC 5043 9)."""
        self._set(IPPROTO_SCTP, SCTP_DISABLE_FRAGMENTS, ctypes.c_int(int(on)))

    def set_adaptation_layer(self, code_point: int) -> None:
        """SCTP_ADAPTATION_LAYER (RFC 6458 8.1): the Adaptation Layer Indication in INIT / INIT ACK."""
        self._set(IPPROTO_SCTP, SCTP_ADAPTATION_LAYER, ctypes.c_uint32(code_point))

    def set_streams(self, outbound: int, max_inbound: int) -> None:
        """SCTP_INITMSG (RFC 6458 8.1): the stream counts of INIT / INIT ACK."""
        self._set(IPPROTO_SCTP, SCTP_INITMSG, _InitMsg(outbound, max_inbound, 0, 0))

    def set_heartbeat(self, on: bool) -> None:
        """SCTP_PEER_ADDR_PARAMS SPP_HB_ENABLE / SPP_HB_DISABLE (RFC 6458 8.1) for the socket's association, or
        its future ones before it has one. usrsctp 0.9.5 does not pass a listening socket's setting on to the
        associations it accepts: set it again on the accepted socket."""
        params = _PaddrParams()
        params.spp_address.ss_family = self.family  # every path (a null address)
        params.spp_flags = SPP_HB_ENABLE if on else SPP_HB_DISABLE
        self._set(IPPROTO_SCTP, SCTP_PEER_ADDR_PARAMS, params)

    def set_path_mtu(self, mtu: int) -> None:
        """SCTP_PEER_ADDR_PARAMS SPP_PMTUD_DISABLE with ``spp_pathmtu`` (RFC 6458 8.1): every path of the socket's
        association (or its future ones) carries SCTP packets of at most `mtu` bytes (AF_CONN puts no IP header
        in front, so this is the whole SCTP packet); usrsctp's fragmentation point follows."""
        params = _PaddrParams()
        params.spp_address.ss_family = self.family  # every path (a null address)
        params.spp_flags = SPP_PMTUD_DISABLE
        params.spp_pathmtu = mtu
        self._set(IPPROTO_SCTP, SCTP_PEER_ADDR_PARAMS, params)

    # -- association set-up

    def bind(self, conn: Conn, port: int) -> None:
        address = conn.sockaddr(port)
        _check(self._lib.usrsctp_bind(self._handle, ctypes.byref(address), ctypes.sizeof(address)), "usrsctp_bind")

    def listen(self, backlog: int = 1) -> None:
        _check(self._lib.usrsctp_listen(self._handle, backlog), "usrsctp_listen")

    def accept(self) -> Socket | None:
        """The next association the listening socket set up (``usrsctp_accept``), or None if none is ready."""
        handle = self._lib.usrsctp_accept(self._handle, None, None)
        if not handle:
            code = ctypes.get_errno()
            if code in (errno_codes.EWOULDBLOCK, errno_codes.EAGAIN):
                return None
            _check(-1, "usrsctp_accept")
        sock = type(self)(self._stack, handle)
        self._stack._sockets.append(sock)
        return sock

    def connect(self, conn: Conn, port: int) -> None:
        """Active open (``usrsctp_connect``): the INIT leaves at once; the set-up completes as packets move."""
        address = conn.sockaddr(port)
        result = self._lib.usrsctp_connect(self._handle, ctypes.byref(address), ctypes.sizeof(address))
        if result < 0 and ctypes.get_errno() != errno_codes.EINPROGRESS:
            _check(result, "usrsctp_connect")

    # -- data

    def send(self, data: bytes, ppid: int, stream: int = 0, unordered: bool = False) -> int:
        """One user message (``usrsctp_sendv`` with SCTP_SENDV_SNDINFO); the bytes accepted."""
        info = _SndInfo(stream, SCTP_UNORDERED if unordered else 0, _socket.htonl(ppid), 0, 0)
        return self._sendv(bytes(data), info)

    def _sendv(self, data: bytes, info: _SndInfo) -> int:
        buffer = ctypes.create_string_buffer(data, len(data))
        result = self._lib.usrsctp_sendv(self._handle, buffer, len(data), None, 0, ctypes.byref(info),
                                         ctypes.sizeof(info), SCTP_SENDV_SNDINFO, 0)
        return _check(result, "usrsctp_sendv")

    def receive(self, size: int = 1 << 16) -> Message | Notification | None:
        """The next message or notification (``usrsctp_recvv``), or None when there is none now (see `eof`
        and `error` for why the socket may have nothing more)."""
        buffer = ctypes.create_string_buffer(size)
        info = _RcvInfo()
        info_length = ctypes.c_uint32(ctypes.sizeof(info))
        info_type = ctypes.c_uint(0)
        flags = ctypes.c_int(0)
        source = _SockaddrConn()
        source_length = ctypes.c_uint32(ctypes.sizeof(source))
        result = self._lib.usrsctp_recvv(self._handle, buffer, size, ctypes.byref(source), ctypes.byref(source_length),
                                         ctypes.byref(info), ctypes.byref(info_length), ctypes.byref(info_type),
                                         ctypes.byref(flags))
        if result < 0:
            code = ctypes.get_errno()
            if code not in (errno_codes.EWOULDBLOCK, errno_codes.EAGAIN):
                self.error = code
            return None
        if result == 0:
            self.eof = True
            return None
        data = buffer.raw[:result]
        if flags.value & MSG_NOTIFICATION:
            return _notification(data)
        if info_type.value != SCTP_RECVV_RCVINFO:
            raise UsrsctpError(errno_codes.EPROTO, "usrsctp_recvv returned a message without its sctp_rcvinfo")
        return Message(data, info.rcv_sid, _socket.ntohl(info.rcv_ppid), info.rcv_ssn, info.rcv_tsn,
                       bool(info.rcv_flags & SCTP_UNORDERED), bool(flags.value & MSG_EOR))

    def receive_all(self) -> list[Message | Notification]:
        """Everything readable now."""
        out = []
        while (item := self.receive()) is not None:
            out.append(item)
        return out

    def status(self) -> Status:
        """SCTP_STATUS of the association (`UsrsctpError` once there is none)."""
        status = _Status()
        self._get(IPPROTO_SCTP, SCTP_STATUS, status)
        primary = status.sstat_primary
        return Status(SCTP_STATES.get(status.sstat_state, hex(status.sstat_state)), status.sstat_rwnd,
                      status.sstat_unackdata, status.sstat_penddata, status.sstat_instrms, status.sstat_outstrms,
                      status.sstat_fragmentation_point, primary.spinfo_cwnd, primary.spinfo_srtt, primary.spinfo_rto,
                      primary.spinfo_mtu)

    # -- the end

    def shutdown(self) -> None:
        """Graceful close of the sending side (``usrsctp_shutdown(SHUT_WR)``): SHUTDOWN once all data is
        acknowledged (RFC 4960 9.2)."""
        _check(self._lib.usrsctp_shutdown(self._handle, _socket.SHUT_WR), "usrsctp_shutdown")

    def abort(self, reason: bytes = b"") -> None:
        """ABORT the association at once (``usrsctp_sendv`` with SCTP_ABORT, RFC 6458 5.3.4): the ABORT chunk
        carries a User-Initiated Abort cause with `reason` (RFC 4960 9.1, 3.3.10.12)."""
        self._sendv(bytes(reason), _SndInfo(0, SCTP_ABORT, 0, 0, 0))

    def close(self) -> None:
        """``usrsctp_close``: a graceful shutdown of an association still up (RFC 4960 9.2); no-op if closed."""
        if not self.closed:
            self.closed = True
            self._lib.usrsctp_close(self._handle)
            if self in self._stack._sockets:
                self._stack._sockets.remove(self)
