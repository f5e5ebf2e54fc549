"""The association's transition table (RFC 4960 4): complete for chunks, cited, and strict for the rest."""

from __future__ import annotations

import random
import re

import pytest

from model.errors import TransitionError
from model.sctp.association import TRANSITIONS, Association, AssociationState, InvalidStateError, Trigger
from model.sctp.config import AssociationConfig
from model.sctp.packet import PPID_DDP_SEGMENT, ChunkType

RFC_SECTION = re.compile(r"RFC \d{4} \d+(\.\d+)*")


def test_every_row_cites_an_rfc_section() -> None:
    uncited = [key for key, row in TRANSITIONS.items() if not RFC_SECTION.search(row.rfc)]
    assert not uncited, uncited


def test_every_chunk_type_has_a_row_in_every_state() -> None:
    """A chunk from the network never falls through: discarding is a row with the section that says so."""
    missing = [(state, chunk) for state in AssociationState for chunk in ChunkType if (state, chunk) not in TRANSITIONS]
    assert not missing, missing


def test_every_row_names_a_handler_of_the_association() -> None:
    for (state, trigger), row in TRANSITIONS.items():
        assert getattr(Association, row.handler.__name__) is row.handler, (state, trigger)


def test_rows_leading_to_established_come_from_the_handshake() -> None:
    """RFC 4960 4: only COOKIE ECHO and COOKIE ACK bring an association up."""
    up = {trigger for (_, trigger), row in TRANSITIONS.items() if row.next_state is AssociationState.ESTABLISHED}
    assert up == {ChunkType.COOKIE_ECHO, ChunkType.COOKIE_ACK}


def _association() -> Association:
    return Association(AssociationConfig(5000, 6000, rng=random.Random(1), hmac_secret=b"k" * 32))


def test_an_unknown_state_trigger_pair_raises_a_typed_error() -> None:
    """SEND in COOKIE-WAIT, SHUTDOWN in CLOSED and a timer no state of the table runs have no row."""
    association = _association()
    with pytest.raises(InvalidStateError) as raised:
        association.shutdown(0.0)
    assert isinstance(raised.value, TransitionError)
    assert (raised.value.state, raised.value.trigger) == (AssociationState.CLOSED, Trigger.SHUTDOWN)
    association.connect(0.0)
    with pytest.raises(TransitionError):
        association.send(0, PPID_DDP_SEGMENT, b"x")
    with pytest.raises(TransitionError):
        association._fire(Trigger.T2_SHUTDOWN, 0.0)
    assert association.state is AssociationState.COOKIE_WAIT  # a refused trigger changes nothing
