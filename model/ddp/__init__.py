"""DDP (RFC 5041) and its SCTP adaptation (RFC 5043): segments, data source and sink, memory protection, stream sessions, RFC 6581 negotiation."""
