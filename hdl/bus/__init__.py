"""Bus interfaces: AXI4 / AXI4-Lite / AXI4-Stream signatures and adapters, and the register file."""
