"""The `board` backend with the transmit engine's transport unit (issue 29: the host per message), against the
model board built with it (sim/board_model.py, `transport=True`).

The board's unit takes the peer's SACKs from the board's receive engine, keeps the windows and T3-rtx on the
board's clock and retransmits (RFC 4960 6.1, 6.2.1, 6.3, 7.2); the host pushes one record a message over the
control link. Every RDMAP operation both ways completes with the right bytes, on a clean link and on one that
loses, duplicates, reorders and corrupts; a silent peer fails the association in the board's unit (8.1) and
the host learns it from the unit's stop record; a board built without the unit refuses the option.
"""

import pytest

from abi.link import TxInput, TxOutput
from driver import SGE, InvalidArgument, SendWR, WROpcode
from driver.backends.board import BoardFabric
from driver.device import AssociationEnd, Fabric
from model.rnic.link import LinkConfig, Side
from model.rnic.pair import IPS, MACS
from model.sctp.state import AssociationState
from sim.board_model import ModelBoard
from sim.commands.demo import impaired
from sim.e2e_program import end_to_end_checked
from tests.driver.harness import connected


def open_transport_board(link: LinkConfig | None = None, seed: int = 1, **options) -> tuple[ModelBoard, Fabric]:
    board = ModelBoard(MACS[Side.A], IPS[Side.A], transport=True)
    return board, Fabric(BoardFabric(board.control, board.port, link=link, seed=seed, engine_transport=True,
                                     **options))


@pytest.mark.parametrize("link", [None, impaired(0.02, seed=3)], ids=["clean", "impaired"])
def test_every_operation_both_ways_through_the_boards_transport_unit(link):
    """RDMA Write, Read and the four Sends both ways at the segment edges and over several segments (RFC 5041 5.2),
    each completion and byte checked by the program; the association shuts down (RFC 4960 9.2)."""
    board, fabric = open_transport_board(link, seed=3)
    mulpdu = fabric.devices[0].query_device().mulpdu
    sizes = (0, 1, mulpdu - 14, mulpdu - 13, 3 * mulpdu + 5)
    report = fabric.backend.run(lambda: end_to_end_checked(fabric, sizes))
    assert report.sizes == list(sizes)
    association = fabric.backend.pair.hosts[Side.A].association
    assert association.transport_by_engine and association.state is AssociationState.CLOSED
    # The host's SCTP sent no DATA again: the board's unit did, on the SACKs its receive engine handed it.
    assert association.statistics.retransmitted_by_timeout == association.statistics.fast_retransmitted == 0
    assert board.tx.peer_sacks_from_receive_engine > 0 and board.tx.peer_sacks_from_host == 0
    if link is not None:
        assert board.tx.transport_resends > 0
    # One record a message: the host asked the engine for no TSN (LIMIT, ACK, RESEND); the unit decided them.
    assert board.pushed[TxInput.TSN] == 0 and board.pushed[TxInput.WORK] > 0


def test_a_silent_peer_fails_the_association_in_the_boards_unit():
    """RFC 4960 8.1: the wire goes dead once the connection is up; the board's Send is resent at each T3-rtx
    expiry on the board's clock, and the expiry past Association.Max.Retrans (2 here, RTOs of 20 to 40 ms) stops
    the row: the unit's stop record reaches the host over the link, the only way it learns (its own SCTP keeps
    no T3-rtx for the row), and the association fails."""
    board, fabric = open_transport_board(rto_initial=0.02, rto_min=0.02, rto_max=0.04, association_max_retrans=2)

    async def main(fabric):
        server, _ = await connected(fabric, region=4096)   # the server is device 0, the board
        fabric.backend.pair.link.config = LinkConfig(loss=1.0)
        server.mr.write(b"x" * 100)
        server.qp.post_send([SendWR(1, WROpcode.SEND, [SGE(server.mr.buf, 100, server.mr.lkey)])])
        return await server.device.wait_closed(timeout=5)

    assert fabric.backend.run(lambda: main(fabric)) is AssociationEnd.FAILED
    assert board.tx.transport_resends == 2 and board.tx.transport.state(0).failed
    assert not board.tx_records[TxOutput.TRANSPORT_STOPPED]   # popped by the host
    association = fabric.backend.pair.hosts[Side.A].association
    assert association.transport_by_engine and association.statistics.retransmitted_by_timeout == 0


def test_a_board_without_the_unit_refuses_the_option():
    board = ModelBoard(MACS[Side.A], IPS[Side.A])
    with pytest.raises(InvalidArgument, match="built without the transport unit .*TX_PARAMS say transport 0"):
        BoardFabric(board.control, board.port, engine_transport=True)


def test_the_transport_needs_the_boards_sacks():
    board = ModelBoard(MACS[Side.A], IPS[Side.A], transport=True)
    with pytest.raises(InvalidArgument, match="needs engine_sacks"):
        BoardFabric(board.control, board.port, engine_transport=True, engine_sacks=False)
