"""The transmit path: work requests in, DDP segments in Ethernet frames out."""
