"""The impaired in-memory link (model/rnic/link.py)."""

import pytest

from model.errors import EncodeError
from model.rnic.link import Link, LinkConfig, Side, Unframed


def run(link, count=2000):
    for i in range(count):
        link.send(Side.A, i.to_bytes(4, "big") * 4, now=i * 1e-4)
    return link.deliveries(now=10.0)


def test_perfect_link_delivers_everything_in_order_after_the_delay():
    link = Link(LinkConfig(delay=0.001))
    link.send(Side.A, b"one", 0.0)
    link.send(Side.B, b"two", 0.0)
    assert link.deliveries(0.0009) == []
    assert link.next_arrival() == pytest.approx(0.001)
    assert link.deliveries(0.001) == [(Side.B, b"one", 0.001), (Side.A, b"two", 0.001)]
    assert link.next_arrival() is None


def test_impairments_happen_at_about_their_rates():
    link = Link(LinkConfig(loss=0.05, duplication=0.05, reordering=0.1, corruption=0.05, seed=7))
    frames = run(link)
    stats = link.stats
    assert stats.sent == 2000
    assert 60 < stats.lost < 140 and 60 < stats.duplicated < 140 and 60 < stats.corrupted < 140
    assert stats.delivered == 2000 - stats.lost + stats.duplicated == len(frames)
    sent_order = [int.from_bytes(f[:4], "big") for _, f, _ in frames]
    assert sent_order != sorted(sent_order)  # something was reordered


def test_same_seed_same_run():
    assert run(Link(LinkConfig(loss=0.1, reordering=0.2, corruption=0.1, seed=3))) == \
        run(Link(LinkConfig(loss=0.1, reordering=0.2, corruption=0.1, seed=3)))


def test_corruption_flips_exactly_one_bit():
    link = Link(LinkConfig(corruption=1.0))
    link.send(Side.A, bytes(64), 0.0)
    ((_, frame, _),) = link.deliveries(1.0)
    assert sum(bin(b).count("1") for b in frame) == 1


def test_recording_keeps_arrivals_with_their_times():
    link = Link(LinkConfig(delay=0.5), record=True)
    link.send(Side.A, b"x", 1.0)
    link.deliveries(2.0)
    assert link.recording == [(1.5, b"x")]


@pytest.mark.parametrize("field", ["loss", "duplication", "reordering", "corruption"])
def test_probabilities_are_checked(field):
    with pytest.raises(EncodeError):
        LinkConfig(**{field: 1.5})


def test_a_rated_link_serializes_each_direction_with_ethernet_framing():
    """At 1 Gb/s a 1476-byte frame takes (1476 + 8 preamble + 4 FCS + 12 gap) * 8 ns = 12 us on the wire
    (IEEE 802.3); frames from one side queue behind each other, the other direction is a wire of its own."""
    link = Link(LinkConfig(delay=0.001, rate=1e9))
    link.send(Side.A, bytes(1476), 0.0)
    link.send(Side.A, bytes(1476), 0.0)
    link.send(Side.B, bytes(1476), 0.0)
    link.send(Side.A, bytes(1476), 1.0)  # the wire has long been idle
    arrivals = [(side, at) for side, _, at in link.deliveries(2.0)]
    assert arrivals == [(Side.B, pytest.approx(0.001012)), (Side.A, pytest.approx(0.001012)),
                        (Side.B, pytest.approx(0.001024)), (Side.B, pytest.approx(1.001012))]


@pytest.mark.parametrize("rate", [0, -1e9, float("inf"), float("nan")])
def test_a_rate_must_be_bits_per_second_above_zero(rate):
    with pytest.raises(EncodeError):
        LinkConfig(rate=rate)



def test_a_clean_link_owes_its_draws_when_the_configuration_turns_impaired():
    """Frames on a link without impairments draw nothing, but once the configuration changes the generator
    stands where the draws of every frame before would have left it: the run is that of a link that drew."""
    def run(first: LinkConfig):
        link = Link(first)
        for i in range(50):
            link.send(Side.A, bytes([i]) * 20, now=i * 1e-4)
        link.send(Side.A, b"", now=0.0051)           # an empty frame has no bit to corrupt: one draw fewer
        link.config = LinkConfig(seed=4, loss=0.3, duplication=0.2, reordering=0.3, corruption=0.2)
        for i in range(200):
            link.send(Side.B, bytes([i]) * 20, now=0.01 + i * 1e-4)
        return link.deliveries(now=10.0), link.stats

    # loss=1e-300 takes the drawing path and loses nothing (random() gives 0.0 with probability 2**-53)
    assert run(LinkConfig(seed=4)) == run(LinkConfig(seed=4, loss=1e-300))


def test_an_unframed_packet_goes_as_its_frame_would_and_is_never_corrupted():
    """An `Unframed` takes the wire time of the frame it stands for and the same random draws as a frame: lost,
    duplicated and delayed alike; a link with corruption refuses it."""
    config = LinkConfig(loss=0.1, duplication=0.1, reordering=0.2, rate=1e9, seed=5)
    framed, unframed = Link(config), Link(config)
    for i in range(500):
        frame = i.to_bytes(4, "big") * 100
        framed.send(Side.A, frame, now=i * 1e-6)
        unframed.send(Side.A, Unframed(frame[:40], len(frame)), now=i * 1e-6)
    got = unframed.deliveries(now=10.0)
    assert [(side, packet.packet, at) for side, packet, at in got] == \
        [(side, frame[:40], at) for side, frame, at in framed.deliveries(now=10.0)]
    assert unframed.stats == framed.stats
    with pytest.raises(ValueError):
        Link(LinkConfig(corruption=0.01)).send(Side.A, Unframed(b"packet", 40), now=0.0)
