"""cocotb test: a host driver program on the `sim` fabric (`sim.driver_sim`), run by `sim.driver_sim.run_program`.

Parameters (:func:`sim.runner.test_parameters`): ``module`` or ``file``, and
``function``: the program, a coroutine function taking the fabric;
``seed``; ``link`` (`model.rnic.link.LinkConfig` fields, or null); ``width_bytes`` (the DUT's),
``memory_bytes`` (host A's memory), ``record`` (keep the link's frames), ``arguments`` (keyword
arguments of the program).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging

import cocotb

from driver.device import Fabric
from hdl.abi import register_map
from model.engine.config import ReceiveConfig
from model.rnic.link import LinkConfig
from sim.driver_sim import MEMORY_BYTES, RTL_SIDE, SHAPE, WIDTH_BYTES, RtlEngine, SimFabric
from model.rnic.pair import IPS, MACS
from sim.runner import test_parameters
from sim.tb.rx_engine_tb import RxEngineTB


def _program(parameters: dict):
    if "module" in parameters:
        module = importlib.import_module(parameters["module"])
    else:
        spec = importlib.util.spec_from_file_location("driver_program_under_test", parameters["file"])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    target = module
    for name in parameters["function"].split("."):
        target = getattr(target, name)
    return target


@cocotb.test()
async def driver_program(dut):
    parameters = test_parameters()
    program = _program(parameters)
    for port in ("s_axil", "s_axis", "m_axi", "m_axis_exc", "m_axis_report", "m_axis_ack"):
        # a log line per table write and record: the program's output stays readable
        logging.getLogger(f"cocotb.{dut._name}.{port}").setLevel(logging.WARNING)
    tb = RxEngineTB(dut, int(parameters.get("width_bytes", WIDTH_BYTES)),
                    register_map(SHAPE.associations, SHAPE.stream_ids, SHAPE.regions), SHAPE,
                    memory_bytes=int(parameters.get("memory_bytes", MEMORY_BYTES)),
                    seed=int(parameters.get("seed", 1)))
    await tb.reset()
    await tb.configure(ReceiveConfig(MACS[RTL_SIDE], IPS[RTL_SIDE]))
    link = LinkConfig(**parameters["link"]) if parameters.get("link") else None
    backend = SimFabric(RtlEngine(tb), link=link, seed=int(parameters.get("seed", 1)),
                        record=bool(parameters.get("record")))
    await program(Fabric(backend), **parameters.get("arguments", {}))
    assert backend.frames_through_rtl, "no frame went through the RTL engine"
    dut._log.info(f"{backend.frames_through_rtl} frames through the RTL engine, every record as its model's")
