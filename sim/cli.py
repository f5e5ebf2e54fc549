"""The `rnic` command line.

    rnic dissect CAPTURE [--json] [--udp-port N]
                                      decode a capture down to DDP, RDMAP and session control
    rnic sample-capture OUT.pcap      write the sample capture the model generates
    rnic bench model [--seconds S]    golden-model throughput table (encode, validate, place)
    rnic demo [--backend soft|sim] [--peer model|gateware] [--loss P] [--pcap FILE] [--seed N] [--udp] [--size BYTES] [--no-progress]
                                      two RNICs run every RDMAP operation over a lossy link (sim: host A on the RTL)
    rnic bench e2e [--total BYTES] [--losses P ...] [--plot FILE | --no-plot]
                                      model-to-model goodput, 4 KiB and 1 MiB messages, swept over loss:
                                      a table and a goodput-versus-loss plot (PNG)
    rnic bench usrsctp [--sizes BYTES ...] [--iters N] [--profile | --udp [--mtus BYTES ...]]
                                      the software RNIC's RDMA Writes beside usrsctp's SCTP, same process
                                      (--udp: two processes each over loopback UDP), MB/s of each and their ratio
    rnic bench rx [--widths 8 64] [--payloads BYTES ...] [--frames N] [--synth] [--target-mhz F] [--waves fst|vcd]
                                      RTL receive engine: fraction of line rate, latency, Fmax
    rnic bench tx [--widths 8 64] [--payloads BYTES ...] [--loads write read-response] [--synth] [--target-mhz F]
                                      RTL transmit engine: fraction of line rate, doorbell latency, Fmax
    rnic perf [--backend soft|engine|sim|board] [--test write_bw|send_bw|send_lat|read_bw|all] [--sizes BYTES ...]
              [--iters N] [--qps N] [--rate GBPS] [--delay USEC] [--loss P] [--seed N] [--host-sacks]
              [--engine-transport] [--peer model|gateware] [--serial DEV --ethernet IFACE|tcp:HOST:PORT] [--baud B]
              [--latency S] [--time-scale X] [--direction to-board|from-board|both]
                                      perftest-shaped bandwidth and latency through the host driver; on the
                                      board backend also its control link's requests and bytes per message
    rnic perf --server [--bind [udp:|ip:|eth:IFACE:]ADDR[:PORT]|board:CONTROL@ADDR[:PORT]] [--mtu BYTES]
    rnic perf --client HOST[:PORT] [--bind ...] [--mtu BYTES] [--test ...] [--sizes BYTES ...] [--iters N]
                                      the same between two processes, each a device on a real transport
                                      or a board on its network
    rnic replay CAPTURE --config CFG [--width W] [--gap CYCLES] [--memory-stall P] [--model] [--json] [--bytes]
                [--waves fst|vcd]
                                      a capture through the receive engine (RTL under Verilator, or the model)

    rnic --version                    the installed version

Exit status: 0 on success, 1 when the input could not be read or decoded
(dissect still prints every frame it could read, and exits 1 when a frame it
dissects, one carrying SCTP, has an error), 2 on bad usage, 130 when
interrupted. Each failure is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from sim.toolchain import WAVE_FORMATS


# -- argument types: every bad value is one line from argparse and exit status 2 -------------------


def probability(text: str) -> float:
    """A probability: a finite number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a probability from 0 to 1")
    return value


def _integer(text: str, minimum: int) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text} is below the minimum of {minimum}")
    return value


def count(text: str) -> int:
    """A whole number, 1 or more."""
    return _integer(text, 1)


def size(text: str) -> int:
    """A byte count, 0 or more."""
    return _integer(text, 0)


def demo_size(text: str) -> int:
    """Bytes per demo operation: 0 up to the largest DDP message, 2**32 - 1 (RFC 5041 5.2); the demo's memory
    map (`sim.commands.demo.MemoryMap`) spaces its buffers by the size, so any such size fits."""
    from sim.commands.demo import LARGEST_SIZE

    value = size(text)
    if value > LARGEST_SIZE:
        raise argparse.ArgumentTypeError(f"{text} is above the maximum of {LARGEST_SIZE}: a DDP message is "
                                         "shorter than 2**32 bytes (RFC 5041 5.2)")
    return value


def cycles(text: str) -> int:
    """A number of clock cycles, 0 or more."""
    return _integer(text, 0)


def stall_probability(text: str) -> float:
    """A probability from 0 up to, not including, 1: the chance a stalled party holds still on a cycle
    (at 1 it would never move)."""
    value = probability(text)
    if value == 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not below 1 (a party that always stalls never moves)")
    return value


def loss_rate(text: str) -> float:
    """A link impairment rate from 0 up to, not including, 1 (at 1 every frame is lost and nothing arrives)."""
    value = probability(text)
    if value == 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not below 1 (a link that loses every frame carries nothing)")
    return value


def positive_number(text: str) -> float:
    """A finite number above 0 (seconds, MHz)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number above 0")
    return value


def output_file(text: str) -> Path:
    """A file to write: checked before any work starts, so a long run never ends in a failed write."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"directory {parent} does not exist")
    existed = path.exists()
    try:
        with open(path, "ab"):  # appends nothing: an existing file keeps its bytes
            pass
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {error.strerror}") from None
    if not existed:
        path.unlink(missing_ok=True)  # the probe leaves nothing behind
    return path


def _port(text: str) -> int:
    port = int(text) if text.isdigit() else -1
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a UDP port (1-65535)")
    return port


def _dissect(args: argparse.Namespace) -> int:
    from sim.commands.dissect import dissect_capture, format_frame
    from model.errors import DecodeError
    import json

    try:
        data = Path(args.capture).read_bytes()
    except OSError as error:
        print(f"rnic dissect: cannot read {args.capture}: {error.strerror}", file=sys.stderr)
        return 1
    status = 0
    frames = dissect_capture(data, udp_ports=args.udp_port)
    try:
        for frame in frames:
            if args.json:
                print(json.dumps(frame, sort_keys=False))
            else:
                print(format_frame(frame))
            if frame["errors"]:
                status = 1
    except DecodeError as error:
        print(f"rnic dissect: {args.capture}: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        sys.stderr.close()
    return status


def _sample_capture(args: argparse.Namespace) -> int:
    from sim.commands.sample_capture import sample_capture

    try:
        args.output.write_bytes(sample_capture())
    except OSError as error:
        print(f"rnic sample-capture: cannot write {args.output}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from sim.commands.bench_model import run_model_bench

    run_model_bench(seconds=args.seconds)
    return 0


def _sim_extra_missing(command: str, purpose: str) -> bool:
    """True, after saying which extra to install, when the 'sim' extra is not installed."""
    from sim.toolchain import MissingExtra, require_extra

    try:
        require_extra("sim", purpose)
    except MissingExtra as error:
        print(f"rnic {command}: {error}", file=sys.stderr)
        return True
    return False


def _resolve_waves(args: argparse.Namespace, command: str) -> int | None:
    """Set ``args.waves`` to the RTL run's waveform format: ``--waves``, else ``$WAVES`` (False for none). Returns
    an exit status, after one line on stderr, when ``WAVES`` holds no setting (2) or FST cannot be written here (1)."""
    from sim.runner import WavesSettingError, WavesUnavailable, require_waves, waves_format

    try:
        args.waves = args.waves or waves_format() or False
        require_waves(args.waves or None)
    except WavesSettingError as error:
        print(f"rnic {command}: {error}", file=sys.stderr)
        return 2
    except WavesUnavailable as error:
        print(f"rnic {command}: {error}", file=sys.stderr)
        return 1
    return None


def _replay(args: argparse.Namespace) -> int:
    from model.engine.config import ReceiveConfig
    from model.errors import RnicError
    from sim.commands.replay import capture_frames, format_replay, replay_model, replay_rtl, rtl_misfit

    status = None if args.model else _resolve_waves(args, "replay")
    if status is not None:
        return status
    try:
        capture = Path(args.capture).read_bytes()
        config = ReceiveConfig.from_json(Path(args.config).read_text())
    except OSError as error:
        print(f"rnic replay: cannot read {error.filename}: {error.strerror}", file=sys.stderr)
        return 1
    except UnicodeDecodeError:
        print(f"rnic replay: {args.config}: not a JSON text file (not UTF-8)", file=sys.stderr)
        return 1
    except RnicError as error:
        print(f"rnic replay: {args.config}: {error}", file=sys.stderr)
        return 1
    try:
        frames = len(capture_frames(capture))
    except RnicError as error:
        print(f"rnic replay: {args.capture}: {error}", file=sys.stderr)
        return 1
    misfit = rtl_misfit(config)
    if misfit is not None and not args.model:
        print(f"rnic replay: {args.config}: does not fit the RTL engine, only the model (--model): {misfit}",
              file=sys.stderr)
        return 1
    try:
        if args.model:
            if misfit is not None:
                print(f"rnic replay: {args.config}: fits the model only, not the RTL engine: {misfit}",
                      file=sys.stderr)
            if args.gap or args.memory_stall or args.waves:
                print("rnic replay: --gap, --memory-stall and --waves apply to the RTL engine; the model has no "
                      "clock (ignored)", file=sys.stderr)
            outputs = replay_model(capture, config)
        else:
            if _sim_extra_missing("replay", "replaying through the RTL engine (without --model)"):
                return 1
            outputs = replay_rtl(Path(args.capture), Path(args.config), args.width, gap=args.gap,
                                 memory_stall=args.memory_stall, waves=args.waves)
            print(f"rnic replay: the RTL engine (W = {args.width}) consumed {frames} frames and drained in "
                  f"{outputs.cycles} cycles", file=sys.stderr)
    except RnicError as error:
        print(f"rnic replay: {args.capture}: {error}", file=sys.stderr)
        return 1
    print(format_replay(capture, outputs, as_json=args.json, with_bytes=args.bytes))
    return 0


def _bench_rx(args: argparse.Namespace) -> int:
    from sim.commands.bench_rx import largest_payload, run_rx_bench

    widest = max(args.widths)
    limit = largest_payload(widest)
    too_long = [payload for payload in args.payloads if payload > limit]
    if too_long:
        args.usage_error(f"argument --payloads: {too_long[0]} is above the maximum of {limit} at W = {widest}: "
                         "a longer frame does not fit the engine's frame buffer")
    status = _resolve_waves(args, "bench rx")
    if status is not None:
        return status
    if _sim_extra_missing("bench rx", "the RTL engine under Verilator"):
        return 1

    run_rx_bench(tuple(args.widths), tuple(args.payloads), args.frames, args.synth, args.target_mhz, args.waves)
    return 0


def _bench_tx(args: argparse.Namespace) -> int:
    from sim.commands.bench_tx import MEMORY_BYTES, run_tx_bench

    too_long = [payload for payload in args.payloads if payload > MEMORY_BYTES // 2]
    if too_long:
        args.usage_error(f"argument --payloads: {too_long[0]} is above the bench's maximum of {MEMORY_BYTES // 2} "
                         "(half its host memory)")
    run_tx_bench(tuple(args.widths), tuple(args.payloads), tuple(dict.fromkeys(args.loads)), args.synth,
                 args.target_mhz)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from sim.commands.demo import SIM_LARGEST_SIZE, demo_command

    if args.backend == "sim":
        if args.udp:
            args.usage_error("argument --udp: not with --backend sim (the RTL run is SCTP over IPv4)")
        if args.size > SIM_LARGEST_SIZE:
            args.usage_error(f"argument --size: {args.size} is above the maximum of {SIM_LARGEST_SIZE} with "
                             "--backend sim (host A's memory is the testbench's RAM)")
        if _sim_extra_missing("demo --backend sim", "the RNIC top under Verilator"):
            return 1
    elif args.peer != "model":
        args.usage_error("argument --peer: only with --backend sim (host B on a second RNIC top)")
    try:  # progress: a bar on a terminal, else a line every 10 s (demo_command decides)
        return demo_command(args.loss, args.seed, args.udp, args.size, args.pcap,
                            show_progress=not args.no_progress, backend=args.backend,
                            gateware_peer=args.peer == "gateware")
    except OSError as error:  # the capture, written after the run (its file was checked before)
        print(f"rnic demo: cannot write {error.filename}: {error.strerror}", file=sys.stderr)
        return 1


BOARD_ONLY = ("serial", "ethernet", "baud", "latency", "time_scale", "direction")
"""`rnic perf`'s options for the board backend alone."""


SIMULATION_ONLY = ("rate", "delay", "serial", "ethernet", "baud", "latency", "time_scale", "direction")
"""`rnic perf`'s options of a simulated link or a board: none of them with --server or --client."""


def _perf_between_processes(args: argparse.Namespace) -> int:
    """`rnic perf --server` or `--client HOST`: the measurements between two processes on a real transport."""
    from driver.options import minimum_path_mtu
    from sim.commands.perf import DEFAULT_ITERS, DEFAULT_SIZES, TESTS, PerfPlan
    from sim.commands.perf_remote import client_command, server_command

    role = "--server" if args.server else "--client"
    if args.server and args.client is not None:
        args.usage_error("arguments --server and --client: one process is one of them")
    if args.qps is not None:
        args.usage_error(f"argument --qps: not with {role} (the processes measure on one data connection)")
    given = [name for name in SIMULATION_ONLY if getattr(args, name) is not None]
    if given:
        args.usage_error(f"argument --{given[0].replace('_', '-')}: not with {role} (a real network, no simulated "
                         "link or board)")
    for flag, unusual in (("--backend", args.backend != "soft"), ("--loss", args.loss != 0.0),
                          ("--seed", args.seed != 1), ("--peer", args.peer != "model"),
                          ("--host-sacks", args.host_sacks), ("--engine-transport", args.engine_transport)):
        if unusual:
            args.usage_error(f"argument {flag}: not with {role} (a device of its own on a real transport, its "
                             "secrets from the system)")
    options = {}
    if args.mtu is not None:
        if (args.bind or "").startswith("board:"):
            args.usage_error("argument --mtu: not with a board (its core's path MTU is the board's own)")
        udp = not (args.bind or "").startswith(("ip:", "eth:"))
        least = minimum_path_mtu(udp)
        if not least <= args.mtu <= 0xFFFF:
            args.usage_error(f"argument --mtu: {args.mtu} is not within {least}..65535 (the least that carries a "
                             f"DDP segment of RFC 5043 9's least MULPDU over {'UDP' if udp else 'IPv4'})")
        options["path_mtu"] = args.mtu
    if args.server:
        if args.test != "all" or args.sizes or args.iters:
            args.usage_error("arguments --test, --sizes, --iters: the client chooses them, not the server")
        return server_command(args.bind, options=options)
    plan = PerfPlan(TESTS if args.test == "all" else (args.test,), tuple(args.sizes or DEFAULT_SIZES),
                    args.iters or DEFAULT_ITERS)
    return client_command(args.client, plan, args.bind, options=options)


def _perf(args: argparse.Namespace) -> int:
    if args.server or args.client is not None:
        return _perf_between_processes(args)
    if args.bind is not None or args.mtu is not None:
        args.usage_error(f"argument {'--bind' if args.bind is not None else '--mtu'}: only with --server or "
                         "--client")
    from sim.commands.perf import (BOARD_SIZES, DEFAULT_DELAY_USEC, DEFAULT_ITERS, DEFAULT_RATE_GBPS, DEFAULT_SIZES,
                                   DIRECTIONS, LARGEST_SIZE, SIM_SIZES, SOFT_QPS_LIMIT, TESTS, BoardOptions, PerfPlan,
                                   perf_command, perf_link)

    if args.host_sacks and args.backend not in ("engine", "sim", "board"):
        args.usage_error("argument --host-sacks: only with --backend engine, sim or board (where the receive "
                         "engine SACKs by default)")
    if args.engine_transport and args.backend not in ("engine", "sim", "board"):
        args.usage_error("argument --engine-transport: only with --backend engine, sim or board (a board built "
                         "with the transport unit: the model board is then built with it)")
    if args.peer == "gateware" and args.backend != "sim":
        args.usage_error("argument --peer gateware: only with --backend sim (host B on a second RNIC top)")
    if args.peer == "usrsctp" and args.backend == "board":
        args.usage_error("argument --peer usrsctp: only with --backend soft, engine or sim (the board's peer is "
                         "its own)")
    qps = args.qps or 1
    if qps > 1 and args.backend == "sim":
        args.usage_error("argument --qps: above 1 only with --backend soft, engine or board (sim's program runs "
                         "under cocotb's scheduler, one queue pair at a time)")
    if args.backend in ("soft", "engine") and qps > SOFT_QPS_LIMIT:
        args.usage_error(f"argument --qps: {qps} is above the maximum of {SOFT_QPS_LIMIT} on backend {args.backend}")
    if args.backend != "board":
        given = [name for name in BOARD_ONLY if getattr(args, name) is not None]
        if given:
            args.usage_error(f"argument --{given[0].replace('_', '-')}: only with --backend board")
    elif (args.serial is None) != (args.ethernet is None):
        args.usage_error("arguments --serial and --ethernet: both name the board, or neither (the model board)")
    sizes = tuple(args.sizes) if args.sizes else {"sim": SIM_SIZES, "board": BOARD_SIZES}.get(args.backend,
                                                                                              DEFAULT_SIZES)
    largest = LARGEST_SIZE[args.backend]
    if max(sizes) > largest:
        args.usage_error(f"argument --sizes: {max(sizes)} is above the maximum of {largest} on backend "
                         f"{args.backend}")
    if args.backend == "sim" and _sim_extra_missing("perf", "the RTL engine under Verilator (--backend sim)"):
        return 1
    plan = PerfPlan(TESTS if args.test == "all" else (args.test,), sizes, args.iters or DEFAULT_ITERS, qps)
    link = perf_link(args.rate or DEFAULT_RATE_GBPS, args.delay or DEFAULT_DELAY_USEC, args.loss, args.seed)
    board = None
    if args.backend == "board":
        defaults = BoardOptions()
        board = BoardOptions(args.serial, args.ethernet, args.baud or defaults.baud,
                             args.latency or defaults.latency, args.time_scale or defaults.time_scale,
                             DIRECTIONS[args.direction or "both"], not args.host_sacks, args.engine_transport)
    return perf_command(args.backend, plan, link, args.seed, board=board, engine_sacks=not args.host_sacks,
                        engine_transport=args.engine_transport, peer=args.peer)


def _bench_usrsctp(args: argparse.Namespace) -> int:
    from driver import DriverError
    from driver.options import minimum_path_mtu
    from sim.commands.bench_usrsctp import (DEFAULT_ITERS, DEFAULT_MTUS, DEFAULT_SIZES, BenchFailed,
                                            run_loopback_bench, run_usrsctp_bench)
    from sim.commands.perf import LARGEST_SIZE
    from sim.loopback_bench import LoopbackFailed
    from sim.toolchain import MissingExtra, require_extra
    from sim.usrsctp import UsrsctpUnavailable

    if args.profile:
        try:
            require_extra("profile", "--profile")
        except MissingExtra as error:
            print(f"rnic bench usrsctp: {error}", file=sys.stderr)
            return 1
    sizes = tuple(args.sizes or DEFAULT_SIZES)
    if max(sizes) > LARGEST_SIZE["soft"]:
        args.usage_error(f"argument --sizes: {max(sizes)} is above the maximum of {LARGEST_SIZE['soft']}")
    if args.profile and args.udp:
        args.usage_error("argument --profile: not with --udp (the runs are in processes of their own)")
    if args.mtus is not None and not args.udp:
        args.usage_error("argument --mtus: only with --udp")
    mtus = tuple(args.mtus or DEFAULT_MTUS)
    least = minimum_path_mtu(udp=True)
    if not least <= min(mtus) <= max(mtus) <= 0xFFFF:
        args.usage_error(f"argument --mtus: each within {least}..65535 (the least that carries a DDP segment of "
                         "RFC 5043 9's least MULPDU over UDP)")
    try:
        if args.udp:
            run_loopback_bench(sizes, args.iters or DEFAULT_ITERS, mtus)
        else:
            run_usrsctp_bench(sizes, args.iters or DEFAULT_ITERS, profile=args.profile)
    except UsrsctpUnavailable as error:
        print(f"rnic bench usrsctp: {error}", file=sys.stderr)
        return 1
    except (BenchFailed, LoopbackFailed, DriverError) as error:
        print(f"rnic bench usrsctp: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


DEFAULT_PLOT = "bench-e2e.png"
WAVES_HELP = ("write the RTL run's waveform in this format to sim_build/waves/ and print its path (default: "
              "$WAVES, fst or vcd; none when unset)")


def _bench_e2e(args: argparse.Namespace) -> int:
    from sim.commands.bench_e2e import plot_goodput, run_e2e_bench
    from sim.toolchain import MissingExtra, require_extra

    if not args.no_plot:
        if args.plot is None:  # the default, checked only when a plot is wanted
            try:
                args.plot = output_file(DEFAULT_PLOT)
            except argparse.ArgumentTypeError as error:
                args.usage_error(f"argument --plot: {error}")
        try:
            require_extra("plot", "the goodput-versus-loss plot")
        except MissingExtra as error:
            print(f"rnic bench e2e: {error}; or --no-plot for the table alone", file=sys.stderr)
            return 1
    rows = run_e2e_bench(total=args.total, losses=tuple(args.losses))
    if not args.no_plot:
        try:
            plot_goodput(rows, args.plot, args.total)
        except OSError as error:
            print(f"rnic bench e2e: cannot write {args.plot}: {error.strerror}", file=sys.stderr)
            return 1
        print(f"plot: {args.plot}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rnic", description="Open RNIC for iWARP over SCTP (RFC 5040, 5041, 5043, 6581)."
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dissect = commands.add_parser(
        "dissect", help="decode a pcap/pcapng capture down to DDP, RDMAP and session control"
    )
    dissect.add_argument("capture", help="libpcap or pcapng file (Ethernet or raw IPv4 link type)")
    dissect.add_argument("--json", action="store_true", help="one JSON object per frame (keys: docs/cli/dissect.md)")
    dissect.add_argument("--udp-port", type=_port, action="append", default=[], metavar="N",
                         help="also decode UDP port N as SCTP over UDP (besides 9899, RFC 6951); repeatable")
    dissect.set_defaults(handler=_dissect)

    sample = commands.add_parser("sample-capture", help="write the sample capture generated by the model")
    sample.add_argument("output", type=output_file, help="path of the pcap file to write")
    sample.set_defaults(handler=_sample_capture)

    bench = commands.add_parser("bench", help="benchmarks that print tables")
    targets = bench.add_subparsers(dest="target", required=True, metavar="TARGET")
    model = targets.add_parser("model", help="golden model: segments per second for encode, validate, place")
    model.add_argument("--seconds", type=positive_number, default=0.5, help="time spent on each measurement (default 0.5)")
    model.set_defaults(handler=_bench)
    e2e = targets.add_parser("e2e", help="two software RNICs: RDMA Write goodput per wall-clock and simulated second")
    e2e.add_argument("--total", type=count, default=4 << 20, help="bytes written per table cell (default 4 MiB)")
    e2e.add_argument("--losses", type=loss_rate, nargs="+", default=[0.0, 0.005, 0.01, 0.02, 0.05], metavar="P",
                     help="link loss rates of the sweep, each also the duplication, reordering and corruption rate "
                          "(0 to below 1; default 0 0.005 0.01 0.02 0.05)")
    plot = e2e.add_mutually_exclusive_group()
    plot.add_argument("--plot", type=output_file, metavar="FILE",
                      help="where the goodput-versus-loss plot goes (PNG; default bench-e2e.png; needs the 'plot' "
                           "extra)")
    plot.add_argument("--no-plot", action="store_true", help="the table alone, no plot")
    e2e.set_defaults(handler=_bench_e2e, usage_error=e2e.error)
    usrsctp = targets.add_parser("usrsctp", help="the software RNIC's RDMA Writes beside usrsctp, MB/s and ratio")
    usrsctp.add_argument("--sizes", type=count, nargs="+", metavar="BYTES",
                         help="message sizes (default 1434 65536 1048576; at most 64 MiB)")
    usrsctp.add_argument("--iters", type=count, help="messages per size (default 16)")
    usrsctp.add_argument("--profile", action="store_true",
                         help="then pyinstrument's call tree of the software RNIC's run (the 'profile' extra)")
    usrsctp.add_argument("--udp", action="store_true",
                         help="two processes each over loopback UDP (RFC 6951), not one process over an in-memory "
                              "link: usrsctp's sockets, and rnic perf --server and --client")
    usrsctp.add_argument("--mtus", type=count, nargs="+", metavar="BYTES",
                         help="with --udp, the path MTUs, IPv4 and UDP headers included (default 1500 9000)")
    usrsctp.set_defaults(handler=_bench_usrsctp, usage_error=usrsctp.error)

    replay = commands.add_parser("replay", help="run a capture through the receive engine (RTL or model)")
    replay.add_argument("capture", help="libpcap or pcapng file of Ethernet frames")
    replay.add_argument("--config", required=True, help="receive-engine configuration (JSON, see docs/cli/replay.md)")
    replay.add_argument("--width", type=int, choices=(8, 16, 32, 64), default=8, help="datapath bytes (RTL)")
    replay.add_argument("--gap", type=cycles, default=0, metavar="CYCLES",
                        help="idle cycles on s_axis before every frame but the first (RTL; default 0, back to back)")
    replay.add_argument("--memory-stall", type=stall_probability, default=0.0, metavar="P",
                        help="chance per cycle that host memory holds AW, W or B not ready, in short runs "
                             "(RTL; 0 to below 1, default 0)")
    replay.add_argument("--model", action="store_true", help="run the golden model instead of the RTL")
    replay.add_argument("--json", action="store_true",
                        help="one JSON object per frame, then a summary (keys: docs/cli/replay.md)")
    replay.add_argument("--bytes", action="store_true", help="also print every written run of host memory in hex")
    replay.add_argument("--waves", choices=WAVE_FORMATS, help=WAVES_HELP)
    replay.set_defaults(handler=_replay)

    rx = targets.add_parser("rx", help="RTL receive engine: fraction of line rate, latency; --synth adds Fmax/LUTs")
    rx.add_argument("--widths", type=int, nargs="+", choices=(8, 16, 32, 64), default=[8, 64])
    rx.add_argument("--payloads", type=count, nargs="+", default=[64, 256, 1024, 1460, 4096, 9000])
    rx.add_argument("--frames", type=count, default=24, help="back-to-back frames per payload size")
    rx.add_argument("--synth", action="store_true", help="also synthesize the engine (minutes per width)")
    rx.add_argument("--target-mhz", type=positive_number, default=156.25, help="clock the synthesis aims at (MHz)")
    rx.add_argument("--waves", choices=WAVE_FORMATS, help=WAVES_HELP)
    rx.set_defaults(handler=_bench_rx, usage_error=rx.error)

    tx = targets.add_parser("tx", help="RTL transmit engine: fraction of line rate, doorbell latency; --synth adds "
                                       "Fmax/LUTs")
    tx.add_argument("--widths", type=int, nargs="+", choices=(8, 16, 32, 64), default=[8, 64])
    tx.add_argument("--payloads", type=size, nargs="+", default=[64, 256, 1024, 1460, 4096, 9000],
                    help="message sizes in bytes (default 64 256 1024 1460 4096 9000)")
    tx.add_argument("--loads", nargs="+", choices=("write", "read-response"), default=["write", "read-response"],
                    help="RDMA Writes from work requests, Read Responses to inbound Read Requests (default both)")
    tx.add_argument("--synth", action="store_true", help="also synthesize the transmit engine (minutes per width)")
    tx.add_argument("--target-mhz", type=positive_number, default=156.25, help="clock the synthesis aims at (MHz)")
    tx.set_defaults(handler=_bench_tx, usage_error=tx.error)

    perf = commands.add_parser("perf", help="perftest-shaped bandwidth and latency (ib_write_bw, ib_send_bw, "
                                            "ib_send_lat, ib_read_bw) through the host driver; on the board "
                                            "backend also the control link's cost per message")
    perf.add_argument("--backend", choices=("soft", "engine", "sim", "board"), default="soft",
                      help="soft (software RNICs), engine (receiving through the receive engine's model), sim "
                           "(device 0's receive engine the RTL under Verilator), board (device 0 an RNIC core on a "
                           "board over its control link: the model board unless --serial and --ethernet name "
                           "one); default soft")
    perf.add_argument("--test", choices=("write_bw", "send_bw", "send_lat", "read_bw", "all"), default="all",
                      help="which measurement (default all)")
    perf.add_argument("--sizes", type=count, nargs="+", metavar="BYTES",
                      help="message sizes (default 2 to 1 MiB in powers of two; on sim and board 2 64 1024 16384)")
    perf.add_argument("--iters", type=count, help="iterations per size (default 10)")
    perf.add_argument("--qps", type=count, metavar="N",
                      help="queue pairs measured at once, each a connection of its own (perftest's -q; default "
                           "1): a row per pair and one for them all; at most the device's queue pairs (engine and "
                           "board 4, soft up to 1024: its streams raised to N; sim 1)")
    perf.add_argument("--rate", type=positive_number, metavar="GBPS", help="the link's rate each way in Gb/s "
                                                                           "(default 10)")
    perf.add_argument("--delay", type=positive_number, metavar="USEC",
                      help="the link's one-way delay in microseconds (default 500, the model's link)")
    perf.add_argument("--loss", type=loss_rate, default=0.0, help="the link's frame loss rate (0 to below 1; "
                                                                  "default 0, lossless)")
    perf.add_argument("--seed", type=int, default=1, help="seed of the link and the hosts (default 1)")
    perf.add_argument("--serial", metavar="DEV", help="board: the control link's serial device (a board's, e.g. "
                                                      "/dev/ttyUSB1, or sim/board_server.py's pty)")
    perf.add_argument("--ethernet", metavar="IFACE|tcp:HOST:PORT",
                      help="board: the port cabled to the board's Ethernet (an interface, or a simulated board's "
                           "socket)")
    perf.add_argument("--baud", type=positive_number, help="board: the control link's baud (default 3000000)")
    perf.add_argument("--latency", type=positive_number, metavar="S",
                      help="board: seconds a response may take to start (default 0.05; 2 for a simulated board)")
    perf.add_argument("--time-scale", type=positive_number, metavar="X",
                      help="board: the fabric's seconds per wall-clock second (default 1; less for a simulated "
                           "board)")
    perf.add_argument("--direction", choices=("to-board", "from-board", "both"),
                      help="board: where the data lands, on the board (the peer Writes and Sends into it, the "
                           "board Reads), from it (the board Writes and Sends, the peer Reads), or both in turn "
                           "(default both)")
    perf.add_argument("--host-sacks", action="store_true",
                      help="engine, sim and board: the host SACKs the peer's DATA from the engine's ack records, "
                           "not the receive engine itself (RFC 4960 6.2; the engine's SACKs are the default)")
    perf.add_argument("--engine-transport", action="store_true",
                      help="engine, sim and board: the transmit engine's transport unit processes the peer's SACKs "
                           "and retransmits (RFC 4960 6, 7), not the host's SCTP; on board the host pushes one "
                           "request a message (the model board is built with the unit)")
    perf.add_argument("--peer", choices=("model", "gateware", "usrsctp"), default="model",
                      help="host B: the backend's own (default: on sim the engines' golden models); gateware: on "
                           "a second RNIC top in the same simulation (sim); usrsctp: a software host whose SCTP is "
                           "usrsctp (soft, engine, sim; needs libusrsctp)")
    perf.add_argument("--server", action="store_true",
                      help="be the sink of a run between two processes: a device of this process on a real "
                           "transport (--bind) waits for one rnic perf --client, which chooses the tests")
    perf.add_argument("--client", metavar="HOST[:PORT]",
                      help="run the tests against an rnic perf --server at HOST (port 9899 by default), from a "
                           "device of this process on a real transport (--bind), and print the tables")
    perf.add_argument("--bind", metavar="[udp:|ip:|eth:IFACE:]ADDR[:PORT]|board:CONTROL@ADDR[:PORT]",
                      help="--server, --client: this process's device, as driver.open_device takes it (default "
                           "udp::9899 for the server, udp::0, any free port, for the client; ADDR:PORT alone is UDP; "
                           "board:CONTROL@ADDR: the board on the control link CONTROL, a serial device or "
                           "socket://HOST:PORT, at ADDR on its network)")
    perf.add_argument("--mtu", type=count, metavar="BYTES",
                      help="--server, --client: this process's device's path MTU, IPv4 (and UDP) headers included "
                           "(RnicConfig.path_mtu; default 1500); not with a board")
    perf.set_defaults(handler=_perf, usage_error=perf.error)

    demo = commands.add_parser("demo", help="two RNICs run every RDMAP operation over a lossy link")
    demo.add_argument("--backend", choices=("soft", "sim"), default="soft",
                      help="soft: two software RNICs (default); sim: through the host driver, host A on the "
                           "RNIC top (W = 8, receive and transmit engines) under Verilator")
    demo.add_argument("--peer", choices=("model", "gateware"), default="model",
                      help="with --backend sim, host B: on the engines' golden models (default), or on a second "
                           "RNIC top in the same simulation")
    demo.add_argument("--loss", type=probability, default=0.0,
                      help="link loss probability, also used for duplication, reordering and corruption (0..1)")
    demo.add_argument("--pcap", metavar="FILE", type=output_file, help="write the frames the link delivered as a libpcap file")
    demo.add_argument("--seed", type=int, default=1, help="seed of the link and the hosts (default 1)")
    demo.add_argument("--udp", action="store_true", help="SCTP over UDP port 9899 (RFC 6951)")
    demo.add_argument("--size", type=demo_size, default=1 << 20,
                      help="bytes per operation, 0 to 2**32 - 1 (default 1 MiB)")
    demo.add_argument("--no-progress", action="store_true",
                      help="no progress on stderr (a bar on a terminal, else a line every 10 s)")
    demo.set_defaults(handler=_demo, usage_error=demo.error)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"rnic {version('rnic-sctp')}"
    except PackageNotFoundError:
        return "rnic (version unknown: the rnic-sctp package is not installed)"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        end_of_bar = "\n" if sys.stderr.isatty() else ""  # a progress bar may hold the line
        print(f"{end_of_bar}rnic {args.command}: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports it
    except BrokenPipeError:
        # The reader of stdout went away (`rnic dissect ... | head`): nothing left to print to.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
