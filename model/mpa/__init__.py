"""MPA Request/Reply (RFC 5044 7.1) with the RFC 6581 enhanced connection setup."""
