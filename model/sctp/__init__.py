"""SCTP (RFC 4960, RFC 9260): the packet codec and the sans-I/O association endpoint."""
