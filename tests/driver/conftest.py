"""Every driver test runs on each backend that needs no simulator: the same user programs, unchanged."""

import pytest

BACKENDS = ("soft", "engine")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """`soft`: software RNICs; `engine`: hosts receiving through the receive engine's golden model."""
    return request.param
