"""cocotb test: a host driver program on the `sim` fabric (`sim.driver_sim`), run by `sim.driver_sim.run_program`.

Parameters (:func:`sim.runner.test_parameters`): ``module`` or ``file``, and
``function``: the program, a coroutine function taking the fabric;
``seed``; ``link`` (`model.rnic.link.LinkConfig` fields, or null); ``width_bytes`` (the DUT's),
``gateware_peer`` (the DUT is a `sim.tb.rnic_pair.RnicPair`: host B on the RTL too),
``memory_bytes`` (each RTL host's memory), ``record`` (keep the link's frames), ``usrsctp_peer`` (host B a
software host over usrsctp, `sim.usrsctp_host.usrsctp_host`), ``arguments`` (keyword arguments of the
program), ``options`` (the fabric's, `sim.driver_sim.SimFabric`'s keywords).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging

import cocotb

from driver.device import Fabric
from model.engine.config import ReceiveConfig
from model.engine.tx import TransmitConfig
from model.rnic.link import LinkConfig, Side
from model.rnic.pair import IPS, MACS
from sim.driver_sim import MEMORY_BYTES, SHAPE, WIDTH_BYTES, RtlEngine, RtlHost, SimFabric
from sim.runner import test_parameters
from sim.tb.rnic_pair import PortPrefix
from sim.tb.rnic_tb import RNIC_IRD, RnicTB
from sim.tb.rnic_transmit import RtlTransmit
from sim.usrsctp_host import usrsctp_host


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
    memory_bytes = int(parameters.get("memory_bytes", MEMORY_BYTES))
    width, seed = int(parameters.get("width_bytes", WIDTH_BYTES)), int(parameters.get("seed", 1))
    sides = (Side.A, Side.B) if parameters.get("gateware_peer") else (Side.A,)
    views = {side: PortPrefix(dut, side.name.lower()) if len(sides) == 2 else dut for side in sides}
    for view in views.values():
        for port in ("s_axil", "s_axis", "m_axi", "m_axis_exc", "m_axis_report", "m_axis_ack", "m_axis",
                     "s_axis_wr", "s_axis_rr", "s_axis_ctl", "s_axis_tsn", "m_axis_completion",
                     "m_axis_tsn_refused", "m_axis_rr_refused"):
            # a log line per table write and record: the program's output stays readable
            logging.getLogger(f"cocotb.{view._name}.{port}").setLevel(logging.WARNING)
    tbs = {side: RnicTB(view, width, SHAPE, memory_bytes=memory_bytes, seed=seed, clock=side is Side.A)
           for side, view in views.items()}
    await tbs[Side.A].reset()   # one reset for both tops
    hosts = {}
    for side, tb in tbs.items():
        await tb.configure(ReceiveConfig(MACS[side], IPS[side]))
        engine = RtlEngine(tb, MACS[side], IPS[side])
        transmit = RtlTransmit(tb, engine.memory, TransmitConfig(
            MACS[side], IPS[side], associations=SHAPE.associations, stream_ids=SHAPE.stream_ids, ird=RNIC_IRD))
        hosts[side] = RtlHost(engine, transmit, memory_bytes)
    link = LinkConfig(**parameters["link"]) if parameters.get("link") else None
    a = hosts[Side.A]
    backend = SimFabric(a.engine, link=link, seed=seed, record=bool(parameters.get("record")),
                        transmit=a.transmit, memory_bytes=memory_bytes, peer=hosts.get(Side.B),
                        peer_host=usrsctp_host if parameters.get("usrsctp_peer") else None,
                        **parameters.get("options", {}))
    await program(Fabric(backend), **parameters.get("arguments", {}))
    for side, rtl in backend.rtl_hosts.items():
        assert rtl.frames_received, f"no frame went through host {side.name}'s RTL receive engine"
        assert rtl.transmit.frames_sent, f"no frame came from host {side.name}'s RTL transmit engine"
        dut._log.info(f"host {side.name}: {rtl.frames_received} frames through the RTL receive engine, every "
                      f"record as its model's; {rtl.transmit.frames_sent} frames from the RTL transmit engine, "
                      "each as its model's")
        dut._log.info(f"host {side.name}: {rtl.transmit.sack_frames_sent} SACK frames from the RTL's "
                      f"acknowledgement unit, {rtl.transmit.transport_resends} chunks resent by its transport unit; "
                      f"{rtl.engine.tb.ticks} timer ticks; {rtl.transmit.peer_sacks_from_receive_engine} of the "
                      f"peer's SACKs from its receive engine, {rtl.transmit.peer_sacks_from_host} from the host")
    if parameters.get("usrsctp_peer"):
        association = backend.pair.hosts[Side.B].association
        if association is not None:
            stats = association.statistics
            dut._log.info(f"host B (usrsctp): {stats.data_chunks_sent} new DATA chunks sent, "
                          f"{stats.data_chunks_resent} sent again, {stats.data_chunks_received} messages received, "
                          f"{stats.sacks_received} SACKs of host A taken")
