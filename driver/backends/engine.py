"""The `engine` backend: hosts whose data plane is the engines' golden models, both ways.

Two `model.rnic.engine_host.EngineRnic`s on the soft backend's simulated
link and clock (`driver.backends.soft`): each receives through a
`ReceiveEngineModel` (`ModelEngine`), the scoreboard of the gateware receive
engine, record for record what the RTL emits, sends every DATA chunk through
a `TransmitEngineModel`, the golden model of the transmit engine, and runs
the control plane in software.  It is the gateware hosts without the
simulator: the same tables, records and limits as an `hdl.rnic.Rnic` built
with the same parameters (by default the ECPIX-5 build's: 16 region rows, so
15 regions; 4 DDP streams; 8 posted buffers per queue, so IRD at most 7; one
gather piece per message, since an engine request has one address).

The build parameters are options (issue 30: tables at scale):

* `regions`: region rows (`Rnic`'s `regions`), 2 to 2**24; row 0 is never an
  STag's, so `query_device().max_mr` is one less;
* `buffers_per_queue`: posted buffers per queue (`Rnic`'s), a power of two;
  the default IRD and ORD are one less (a stream keeps IRD + 1 Read Request
  buffers posted, RFC 5040 4.2);
* `streams`: the DDP streams of the association, so the queue pairs
  (RFC 5043 8), 1 to 65535; the tables hold the next power of two
  (`Rnic`'s `stream_ids`);
* `key_bits`: the STag key width (STag = row << key_bits | key, default
  `abi.rx.STAG_KEY_BITS`, at most 32 less the row index's bits); each
  registration draws its key from the host's seeded generator.
"""

from __future__ import annotations

import random
from dataclasses import replace

from abi.rx import STAG_KEY_BITS
from model.ddp.memory import SparseMemory
from model.ddp.negotiation import LocalResources, RtrType
from model.rnic.host import RnicConfig
from model.rnic.link import Link, LinkConfig, Side
from model.rnic.engine_host import EngineRnic
from model.rnic.offload import ModelEngine, OffloadRnic
from model.rnic.pair import IPS, MACS, HostPair

from driver.backends.base import DeviceAttr
from driver.backends.soft import SoftDevice, SoftFabric
from driver.options import ENGINE_BUFFERS, ENGINE_REGIONS

STREAM_IDS = 4
"""DDP streams (SCTP streams, RFC 5043 8) the engine's stream table holds per association."""
ENGINE_RESOURCES = LocalResources(ird=7, ord=7, peer_to_peer=True, rtr_types=(RtrType.WRITE,))
"""IRD 7: a stream keeps IRD + 1 Read Request buffers posted and the engine holds 8 per queue."""


def engine_device_attr(soft: DeviceAttr, host: OffloadRnic) -> DeviceAttr:
    """A soft device's limits narrowed to the engine's tables."""
    return DeviceAttr(**{**vars(soft), "max_mr": host.regions - 1})


class EngineDevice(SoftDevice):
    def query(self) -> DeviceAttr:
        host = self._host
        assert isinstance(host, OffloadRnic)
        return engine_device_attr(super().query(), host)


class EngineFabric(SoftFabric):
    """Two engine-backed hosts on one simulated link (see the module docstring)."""

    device_class = EngineDevice

    def __init__(self, link: LinkConfig | None = None, seed: int = 1, *, key_bits: int = STAG_KEY_BITS,
                 regions: int = ENGINE_REGIONS, buffers_per_queue: int = ENGINE_BUFFERS, **options: object) -> None:
        self.key_bits, self.regions, self.buffers_per_queue = key_bits, regions, buffers_per_queue
        options.setdefault("streams", STREAM_IDS)
        options.setdefault("engine_sacks", True)   # the receive engines SACK (RFC 4960 6.2); False: the hosts
        super().__init__(link, seed, **options)

    def default_resources(self) -> LocalResources:
        depth = self.buffers_per_queue - 1
        return replace(ENGINE_RESOURCES, ird=depth, ord=depth)

    def _pair(self, link: LinkConfig | None, seed: int, configs: dict[Side, RnicConfig]) -> HostPair:
        hosts = {}
        for side in Side:
            memory = SparseMemory()
            hosts[side] = EngineRnic(configs[side], memory, random.Random(seed * 2 + (side is Side.B)),
                                     ModelEngine(MACS[side], IPS[side], memory, self.key_bits), session_policy=None,
                                     key_bits=self.key_bits, regions=self.regions,
                                     buffers_per_queue=self.buffers_per_queue)
        return HostPair(hosts, Link(link))
