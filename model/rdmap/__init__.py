"""RDMAP (RFC 5040): wire formats and the stream endpoint."""
