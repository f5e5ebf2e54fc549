"""cocotb testbenches (each module is a cocotb test module run under Verilator)."""
