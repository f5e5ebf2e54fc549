"""The host driver: a verbs- and rdma_cm-shaped API over the RNIC's backends (docs/driver.md).

Every call that waits is a coroutine (`CQ.wait`, `CMID.get_cm_event`); the
rest return at once.  `run(main, backend)` runs `main(fabric)` on the
backend's scheduler.  `open_device(spec)` opens one device of this process on a real
transport (SCTP over UDP or raw IPv4), whose waits run on the caller's asyncio loop.
"""

from model.ddp.negotiation import RtrType
from model.errors import ErrorNumber, TerminateLayer

from driver.backends.base import DeviceAttr
from driver.cm import CMID, MAX_USER_PRIVATE_DATA, CMEvent, CMEventType, CMState, ConnParam
from driver.cq import CQ, WC, CompletionChannel, WCFlags, WCOpcode, WCStatus
from driver.device import BACKENDS, AssociationEnd, Device, Fabric, open_device, open_fabric, run
from driver.errors import (
    AddressInUse,
    AddressNotResolved,
    BackendUnavailable,
    DriverError,
    InvalidArgument,
    InvalidState,
    NotConnected,
    OrdExceeded,
    OutOfResources,
    PrivateDataTooLong,
    QueueFull,
    SgeAccessDenied,
    SgeError,
    SgeOutsideRegion,
    SimulationStalled,
    TooManySges,
    TransportError,
    TransportNotPermitted,
    UnknownBackend,
    WaitTimeout,
    WrongArgumentType,
)
from driver.mr import MR, AccessFlags
from driver.options import LinkConfig
from driver.pd import PD
from driver.qp import QP, SGE, QPCap, QPState, RecvWR, SendFlags, SendWR, WROpcode

__all__ = [
    "AccessFlags", "AddressInUse", "AddressNotResolved", "AssociationEnd", "BACKENDS", "BackendUnavailable",
    "CMEvent", "CMEventType", "CMID", "CMState", "CompletionChannel", "ConnParam", "CQ", "Device", "DeviceAttr",
    "DriverError", "ErrorNumber", "Fabric", "InvalidArgument", "InvalidState", "LinkConfig",
    "MAX_USER_PRIVATE_DATA", "MR", "NotConnected", "OrdExceeded", "OutOfResources", "PD", "PrivateDataTooLong",
    "QP", "QPCap", "QPState", "QueueFull", "RecvWR", "RtrType", "SGE", "SendFlags", "SendWR", "SgeAccessDenied",
    "SgeError", "SgeOutsideRegion", "SimulationStalled", "TerminateLayer", "TooManySges", "TransportError",
    "TransportNotPermitted", "UnknownBackend", "WaitTimeout", "WC", "WCFlags", "WCOpcode", "WCStatus", "WROpcode",
    "WrongArgumentType", "open_device", "open_fabric", "run",
]
