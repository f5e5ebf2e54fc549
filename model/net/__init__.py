"""Link, network and transport framing around SCTP: Ethernet II, IPv4, UDP (RFC 6951), checksums, capture files."""
