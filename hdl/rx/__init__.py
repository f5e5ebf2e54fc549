"""The receive path: Ethernet frames in, DDP payloads placed in host memory, reports and exceptions out."""
