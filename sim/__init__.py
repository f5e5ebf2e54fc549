"""Simulation and tooling layer: cocotb testbenches, the Verilator runner,
the `rnic` command line.  Joins `hdl`, `model` and `driver`."""
