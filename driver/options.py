"""The fabric's options, checked with the driver's errors: the link's impairments and the hosts' protocol settings.

`LinkConfig` is the model's (`model.rnic.link.LinkConfig`) with its fields
checked as every public argument is (`driver.arguments`): `LinkConfig(loss=2)`
is `InvalidArgument("loss 2 is not within 0..1")`, not the model's own error.
`check_fabric_options` does the same for `open_fabric`'s and `run`'s keyword
options, which become `RnicConfig` fields (`model.rnic.host`) of both hosts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from abi.rx import MIN_STAG_KEY_BITS, STAG_BITS
from model.ddp.negotiation import LocalResources
from model.rnic.host import RnicConfig, UDP_HEADER_LENGTH
from model.rnic.link import LinkConfig as ModelLinkConfig
from model.sctp.config import DDP_SSN_LENGTH, IPV4_HEADER_LENGTH, MIN_MULPDU, SACK_WITHOUT_GAPS_LENGTH
from model.sctp.packet import COMMON_HEADER_LENGTH, DataChunk

from driver.arguments import U32, boolean, instance, whole
from driver.errors import InvalidArgument, WrongArgumentType

SEED_LIMIT = 1 << 63
ENGINE_STREAMS = 4
"""DDP streams per association in a board's stream table (`driver.backends.engine.STREAM_IDS`, the ECPIX-5 build's)."""
ENGINE_MAX_STREAMS = 0xFFFF
"""The engine backend's streams: RFC 4960 3.3.2's 65535; its tables are built with the next power of two (as
`hdl.rnic.Rnic`'s `stream_ids`, up to 2**16, `abi.rx.STREAM_BITS`)."""
MAX_DELAYED_ACK = 0.5
"""RFC 4960 6.2: an acknowledgement MUST be sent within 500 ms of the arrival of an unacknowledged DATA chunk."""
MIN_A_RWND = 1500
"""RFC 4960 6.2: the receive window announced is at least 1500 bytes."""
BOARD_LINK_OPTIONS = {"baud", "latency", "time_scale"}
"""Options of a board's control link and clock: the `board` backend's and the `board:` device's."""
BOARD_OPTIONS = {"serial", "ethernet"} | BOARD_LINK_OPTIONS
"""Options only the `board` backend takes (`driver.backends.board.BoardFabric`)."""
ENGINE_OPTIONS = {"key_bits", "regions", "buffers_per_queue"}
"""Options only the `engine` backend takes (`driver.backends.engine.EngineFabric`): the engines' build parameters."""
ENGINE_REGIONS = 16
"""Region rows of the engine backend's table by default (`model.rnic.offload.OffloadRnic`'s, `hdl.rnic.Rnic`'s)."""
ENGINE_MAX_REGIONS = 1 << (STAG_BITS - MIN_STAG_KEY_BITS)
"""Region rows an engine can be built with: the STag's 32 bits less the least key (`abi.rx.check_key_bits`)."""
ENGINE_BUFFERS = 8
"""Posted buffers per queue of the engine backend by default (`hdl.rnic.Rnic`'s `buffers_per_queue`)."""
ENGINE_MAX_BUFFERS = 1 << 16
"""Posted buffers per queue an engine can be built with (a power of two, `hdl.rx.untagged_buffers`)."""


def number(name: str, value: object, low: float, high: float = math.inf, low_open: bool = False) -> float:
    """A finite int or float (not a bool) from `low` (above it if `low_open`) to `high`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WrongArgumentType(f"{name} must be a number, not {type(value).__name__}")
    inside = (value > low if low_open else value >= low) and value <= high
    if not (math.isfinite(value) and inside):
        bounds = f"above {low:g}" if low_open else f"within {low:g}..{high:g}" if math.isfinite(high) else \
            f"at least {low:g}"
        raise InvalidArgument(f"{name} {value} is not a finite number {bounds}")
    return value


@dataclass(frozen=True)
class LinkConfig(ModelLinkConfig):
    """The simulated link's impairments (`model.rnic.link.LinkConfig`): probabilities per frame from 0 to 1,
    delays in seconds, a seed, and a rate in bits per second (None: no serialisation time)."""

    def __post_init__(self) -> None:
        for name in ("loss", "duplication", "reordering", "corruption"):
            number(name, getattr(self, name), 0.0, 1.0)
        for name in ("delay", "reorder_delay"):
            number(name, getattr(self, name), 0.0)
        whole("seed", self.seed, -SEED_LIMIT, SEED_LIMIT - 1)
        if self.rate is not None:
            number("rate", self.rate, 0.0, low_open=True)
        super().__post_init__()


def minimum_path_mtu(udp: bool) -> int:
    """The smallest path MTU whose packets carry a DDP segment of 516 bytes, RFC 5043 9's least MULPDU (room for
    a Session Control message with 512 bytes of private data), a DDP-SSN and a SACK beside it."""
    overhead = IPV4_HEADER_LENGTH + (UDP_HEADER_LENGTH if udp else 0)
    segment = -(-(MIN_MULPDU + DDP_SSN_LENGTH) // 4) * 4
    return overhead + COMMON_HEADER_LENGTH + DataChunk.HEADER_LENGTH + SACK_WITHOUT_GAPS_LENGTH + segment


def _resources(name: str, value: object) -> None:
    resources = instance(name, value, LocalResources)
    for field in ("ird", "ord"):  # 14 bits, 0x3FFF meaning "no automatic negotiation" (RFC 6581 9)
        whole(f"{name}.{field}", getattr(resources, field), 0, 0x3FFE)


def _power_of_two(name: str, value: object) -> None:
    whole(name, value, 2, ENGINE_MAX_BUFFERS)
    if value & (value - 1):  # type: ignore[operator]
        raise InvalidArgument(f"{name} {value} is not a power of two (the engine's queues are)")


def _seconds_or_none(name: str, value: object) -> None:
    if value is not None:
        number(name, value, 0.0, low_open=True)


def check_fabric_options(options: dict[str, object], backend: str) -> None:
    """Every option `open_fabric(backend, **options)` takes, checked; an unknown name is refused.  `backend`
    "board:" is the board as one device (`driver.open_device("board:...")`): its link's options, no ports."""
    known = {f.name for f in fields(RnicConfig)} - {"mac", "ip", "port"} | {"link", "seed"}
    if backend == "board:":
        known |= BOARD_LINK_OPTIONS
    if backend == "engine":
        known |= ENGINE_OPTIONS
    if backend == "board":
        known |= BOARD_OPTIONS
        for name in ("serial", "ethernet"):
            if options.get(name) is None:
                raise InvalidArgument(f"the board backend needs {name}= (see driver.backends.board)")
    for name in options:
        if name not in known:
            raise InvalidArgument(f"option {name} is none of the fabric's: {', '.join(sorted(known))}")
    if backend == "soft" and options.get("engine_sacks"):
        raise InvalidArgument("engine_sacks: the soft backend has no receive engine to SACK (backend 'engine', "
                              "'sim' or 'board')")
    if options.get("engine_transport") and backend not in ("engine", "sim", "board"):
        raise InvalidArgument("engine_transport: only the engine, sim and board backends have a transmit engine "
                              "with the transport unit (on board, a build with it: its TX_PARAMS say so)")
    regions = options.get("regions", ENGINE_REGIONS)
    checks = {
        "link": lambda name, value: value is None or instance(name, value, ModelLinkConfig),
        "seed": lambda name, value: whole(name, value, -SEED_LIMIT, SEED_LIMIT - 1),
        "resources": _resources,
        "udp": boolean,
        "ddp": boolean,
        "engine_sacks": boolean,
        "engine_transport": boolean,
        # RFC 4960 3.3.2: 1 to 65535 streams; a board's or the simulated top's table holds 4 per association
        "streams": lambda name, value: whole(name, value, 1, ENGINE_MAX_STREAMS if backend in ("soft", "engine")
                                             else ENGINE_STREAMS),
        "path_mtu": lambda name, value: whole(name, value, minimum_path_mtu(options.get("udp") is True), 0xFFFF),
        "receive_buffer": lambda name, value: whole(name, value, MIN_A_RWND, U32),  # a_rwnd, RFC 4960 3.3.2
        "heartbeat_interval": _seconds_or_none,
        "delayed_ack_time": lambda name, value: number(name, value, 0.0, MAX_DELAYED_ACK),
        "pending_limit": lambda name, value: whole(name, value, 0, (1 << 31) - 1),  # RFC 5043 6.4: finite
        "pd_id": lambda name, value: whole(name, value, 0, 0xFFFF),  # a row's PD field is 16 bits
        "close_timeout": _seconds_or_none,
        "send_buffer": lambda name, value: whole(name, value, 1, U32),
        # RFC 4960 15's protocol parameters: RTO.* in seconds, the retransmission limits as counts
        "rto_initial": lambda name, value: number(name, value, 0.0, low_open=True),
        "rto_min": lambda name, value: number(name, value, 0.0, low_open=True),
        "rto_max": lambda name, value: number(name, value, 0.0, low_open=True),
        "association_max_retrans": lambda name, value: whole(name, value, 1, 0xFFFF),
        "path_max_retrans": lambda name, value: whole(name, value, 1, 0xFFFF),
        "max_init_retransmits": lambda name, value: whole(name, value, 1, 0xFFFF),
        "baud": lambda name, value: number(name, value, 0.0, low_open=True),
        "latency": lambda name, value: number(name, value, 0.0),
        "time_scale": lambda name, value: number(name, value, 0.0, low_open=True),
        # the STag key: at least 8 bits, and with the row index within the STag's 32 (abi.rx.check_key_bits)
        "key_bits": lambda name, value: whole(name, value, MIN_STAG_KEY_BITS, STAG_BITS - (regions - 1).bit_length()),
        # the engine's tables (`hdl.rnic.Rnic`'s `regions`, `buffers_per_queue`): row 0 is never an STag's
        "regions": lambda name, value: whole(name, value, 2, ENGINE_MAX_REGIONS),
        "buffers_per_queue": _power_of_two,
    }
    for name in sorted(options, key=lambda name: name != "regions"):  # the regions bound key_bits
        check = checks.get(name)
        if check is not None:
            check(name, options[name])
    resources, buffers = options.get("resources"), options.get("buffers_per_queue", ENGINE_BUFFERS)
    if backend == "engine" and isinstance(resources, LocalResources) and resources.ird >= buffers:  # type: ignore[operator]
        raise InvalidArgument(f"resources.ird {resources.ird} with buffers_per_queue {buffers}: a stream keeps "
                              "IRD + 1 Read Request buffers posted (RFC 5040 4.2)")
    rto_min, rto_max = options.get("rto_min", RnicConfig.rto_min), options.get("rto_max", RnicConfig.rto_max)
    if rto_min > rto_max:  # type: ignore[operator]
        raise InvalidArgument(f"rto_min {rto_min} is above rto_max {rto_max} (RFC 4960 6.3.1)")
