"""Golden model of iWARP over SCTP: wire codecs and protocol semantics.

Pure Python, sans-I/O: bytes (and, for timers, the current time) in; events,
structures and bytes out.  Nothing here opens a socket, sleeps or reads a
clock.  It never imports `hdl`, `sim` or `driver`.
"""
