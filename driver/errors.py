"""Typed errors of the host driver: misuse is refused at once, before anything reaches the device.

Every class derives from `DriverError`.  Errors the peer or the device
report later arrive as error work completions (`driver.cq.WC`) or
connection events (`driver.cm.CMEvent`), never as exceptions.
"""

from __future__ import annotations


class DriverError(Exception):
    """Base of every error the driver raises on purpose."""

    bad_wr: object | None = None
    """For a list of work requests posted at once: the first one refused (verbs' `bad_wr`); the ones before it
    were posted, the ones after it were not."""


class UnknownBackend(DriverError, ValueError):
    """A backend name the driver does not know."""


class BackendUnavailable(DriverError):
    """A known backend that cannot run here yet."""


class InvalidArgument(DriverError, ValueError):
    """A value out of range or inconsistent (a queue depth past the device limit, bad access flags...)."""


class WrongArgumentType(InvalidArgument, TypeError):
    """An argument of the wrong type (a str for an int, a tuple for a ConnParam...)."""


class InvalidState(DriverError):
    """A call the object's current state does not allow (accept on an id that has no request...)."""


class NotConnected(InvalidState):
    """A post on a queue pair whose connection is not established (or has ended)."""


class QueueFull(DriverError):
    """More work requests outstanding than the queue pair's capacity (`QPCap`)."""


class SgeError(DriverError, ValueError):
    """A scatter/gather element the request cannot use."""


class SgeOutsideRegion(SgeError):
    """An SGE whose bytes are not all inside the memory region its lkey names (or an unknown lkey)."""


class SgeAccessDenied(SgeError):
    """An SGE whose region lacks the access the request needs (LOCAL_WRITE to receive or read into)."""


class TooManySges(SgeError):
    """More SGEs than the queue pair or the device allows for this kind of request."""


class OrdExceeded(DriverError):
    """An RDMA Read past the connection's ORD: that many Reads are already outstanding (RFC 5040 5.2,
    RFC 6581 9)."""


class PrivateDataTooLong(InvalidArgument):
    """Private data past the RFC 5043 5.2.3 limit: 512 bytes in any message, of which the RFC 6581 9
    enhanced connection data take 4, leaving 508 for the user."""


class AddressInUse(InvalidState):
    """A second listen on a device that already listens."""


class OutOfResources(DriverError):
    """The device has no room left for the object asked for (every region row of the engine in use...)."""


class SimulationStalled(DriverError):
    """A wait that can never end: every coroutine waits, nothing is in flight and no timer runs."""


class WaitTimeout(DriverError):
    """A wait that did not end within its timeout (seconds of the backend's clock)."""


class TransportError(DriverError):
    """A real transport (`driver.open_device`) could not be opened or failed: a bad spec, an address that does
    not resolve, a port in use, a socket error."""


class AddressNotResolved(TransportError, InvalidArgument):
    """A host name that resolves to no IPv4 address (`socket.getaddrinfo`)."""


class TransportNotPermitted(TransportError, PermissionError):
    """A transport this process may not open: raw IPv4 or Ethernet sockets need CAP_NET_RAW."""
