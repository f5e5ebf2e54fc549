"""Tests for model.sctp.cookie: the MAC-protected State Cookie (RFC 4960 5.1.3, 5.1.5)."""

import pytest

from model.sctp.cookie import COOKIE_LENGTH, CookieSigner, CookieState

STATE = CookieState(created=10.0, lifetime=60.0, local_port=1, peer_port=2, local_tag=0xDEADBEEF, peer_tag=7,
                    local_initial_tsn=100, peer_initial_tsn=200, peer_a_rwnd=65536, peer_outbound_streams=8,
                    peer_inbound_streams=8, local_outbound_streams=8, local_inbound_streams=8,
                    peer_adaptation_code_point=1, local_tie_tag=3, peer_tie_tag=4)


def test_rfc4960_5_1_5_round_trip_keeps_every_field() -> None:
    signer = CookieSigner(b"k" * 32)
    cookie = signer.seal(STATE)
    assert len(cookie) == COOKIE_LENGTH
    assert signer.open(cookie) == STATE
    no_adaptation = CookieState(**{**STATE.__dict__, "peer_adaptation_code_point": None})
    assert signer.open(signer.seal(no_adaptation)).peer_adaptation_code_point is None


def test_rfc4960_5_1_5_any_flipped_bit_or_other_key_fails_the_mac() -> None:
    signer = CookieSigner(b"k" * 32)
    cookie = signer.seal(STATE)
    for index in range(len(cookie)):
        tampered = bytearray(cookie)
        tampered[index] ^= 0x01
        assert signer.open(bytes(tampered)) is None
    assert CookieSigner(b"j" * 32).open(cookie) is None
    assert signer.open(cookie[:-1]) is None and signer.open(cookie + b"\0") is None


def test_rfc4960_5_1_5_staleness_is_time_past_the_lifetime() -> None:
    assert STATE.staleness(70.0) == 0.0
    assert STATE.staleness(71.5) == pytest.approx(1.5)
    assert STATE.staleness(20.0) < 0


def test_short_secret_refused() -> None:
    with pytest.raises(ValueError):
        CookieSigner(b"short")
