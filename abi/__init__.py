"""The contract between the gateware and the host: registers, records and enums, in plain Python.

A top-level package, beside ``hdl`` and ``driver``, because both sides depend
on it and neither owns it: the gateware builds its ``StructLayout`` layouts from these
definitions (:func:`hdl.layout.struct_layout`), the driver, the model and the
testbenches pack and unpack the same records with :class:`abi.layout.Struct`,
so the two can never drift. It imports nothing but the standard library (no
Amaranth), so a host driver installs without the HDL.

* :mod:`abi.layout`: records as named bit fields;
* :mod:`abi.register_file`: the AXI4-Lite register file's map (ID, PARAMS,
  configuration, counters, table windows);
* :mod:`abi.rx`: the receive engine: its registers, tables and output records;
* :mod:`abi.tx`: the transmit engine: its requests, completions, tables and
  transport unit;
* :mod:`abi.link`: the board's control link: framing, requests and responses.
"""
