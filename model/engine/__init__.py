"""Scoreboard model of the gateware receive engine and its configuration."""
