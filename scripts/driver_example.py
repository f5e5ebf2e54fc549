"""The host driver's example program (docs/driver.md): two RNICs, one connection, every kind of work.

    python scripts/driver_example.py [--backend soft|engine|sim|board] [--loss 0.01] [--seed 1]
    python scripts/driver_example.py --backend board --serial /dev/ttyUSB1 --ethernet eth1

The server listens; the client connects (RFC 6581 enhanced set-up, IRD/ORD
negotiated), registers memory, and the server posts a receive; then the
client Sends, RDMA Writes into the server's region and RDMA Reads from it,
and both poll their completion queues.  `example` is the user program: it
runs unchanged on every backend (`sim`: in a cocotb test on the gateware
receive engine under Verilator, `sim.driver_sim.run_program`; `board`: the
server is the RNIC core on a board, reached over its control link on
`--serial`, the client a software RNIC on `--ethernet`, cabled to the board).
"""

from __future__ import annotations

import argparse
import sys

from driver import (
    AccessFlags, BackendUnavailable, ConnParam, InvalidArgument, LinkConfig, RecvWR, SendWR, SGE, UnknownBackend,
    WROpcode, run,
)
from driver.ethernet import EthernetError
from driver.link import LinkError

ACCESS = AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ


async def example(fabric) -> None:
    server, client = fabric.devices
    listener = server.create_id()
    listener.listen()
    s_pd, c_pd = server.alloc_pd(), client.alloc_pd()
    s_cq, c_cq = server.create_cq(), client.create_cq()
    s_mr, c_mr = s_pd.reg_mr(4096, ACCESS), c_pd.reg_mr(4096, ACCESS)
    s_mr.write(b"the server's own bytes")
    c_mr.write(b"hello over iWARP/SCTP")
    c_id = client.create_id()
    c_qp = c_id.create_qp(c_pd, c_cq)
    c_id.connect(server.address, ConnParam(responder_resources=4, initiator_depth=4, private_data=b"client"))
    request = await listener.get_cm_event()                                   # CONNECT_REQUEST
    s_qp = request.id.create_qp(s_pd, s_cq)
    s_qp.post_recv(RecvWR(wr_id=1, sg_list=[SGE(s_mr.buf + 2048, 1024, s_mr.lkey)]))
    request.id.accept(ConnParam(private_data=b"server"))
    established = await c_id.get_cm_event()                                   # ESTABLISHED
    print(f"connected: {established.event_type.name}, IRD/ORD {established.conn_param.responder_resources}/"
          f"{established.conn_param.initiator_depth}, server said {established.private_data!r}")
    c_qp.post_send(SendWR(wr_id=10, opcode=WROpcode.SEND, sg_list=[SGE(c_mr.buf, 21, c_mr.lkey)]))
    c_qp.post_send(SendWR(wr_id=11, opcode=WROpcode.RDMA_WRITE, sg_list=[SGE(c_mr.buf, 5, c_mr.lkey)],
                          remote_addr=s_mr.buf + 1024, rkey=s_mr.rkey))
    c_qp.post_send(SendWR(wr_id=12, opcode=WROpcode.RDMA_READ, sg_list=[SGE(c_mr.buf + 512, 22, c_mr.lkey)],
                          remote_addr=s_mr.buf, rkey=s_mr.rkey))
    for wc in await c_cq.wait(3) + await s_cq.wait(1):
        print(f"completion: wr_id {wc.wr_id} {wc.opcode.name} {wc.status.name} {wc.byte_len} bytes")
    print(f"server received {s_mr.read(21, 2048)!r}, got written {s_mr.read(5, 1024)!r}; "
          f"client read {c_mr.read(22, 512)!r}; {fabric.now() * 1e3:.1f} ms of simulated time")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="soft",
                        help="soft (software RNICs), engine (receiving through the receive engine's model), "
                             "sim (the gateware receive engine under Verilator), board (the RNIC core on a board)")
    parser.add_argument("--serial", help="board: the control link's serial device (the ECPIX-5's /dev/ttyUSB1)")
    parser.add_argument("--ethernet", help="board: the network interface cabled to the board, or tcp:HOST:PORT "
                                           "for a simulated board")
    parser.add_argument("--loss", type=float, default=0.0, help="the link's frame loss rate")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    link = LinkConfig(loss=args.loss, seed=args.seed)
    if args.backend == "sim":
        from sim.driver_sim import run_program

        run_program(example, link=link, seed=args.seed)
        return 0
    board = {"serial": args.serial, "ethernet": args.ethernet} if args.backend == "board" else {}
    try:
        run(example, args.backend, link=link, seed=args.seed, **board)
    except (BackendUnavailable, UnknownBackend, InvalidArgument, LinkError, EthernetError) as error:
        print(f"driver_example: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
