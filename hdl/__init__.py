"""Amaranth gateware of the RNIC offload engine.

Every block is an `amaranth.lib.wiring.Component` parameterised by the
datapath width in bytes.  Imports nothing from `model`, `sim` or `driver`.
"""
