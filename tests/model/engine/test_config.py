"""Receive-engine configuration files (model/engine/config.py)."""

import json
import re

import pytest

from model.ddp.memory import Access
from model.engine.config import ConfigError, ReceiveConfig

GOOD = {
    "local_mac": "02:00:00:00:00:02", "local_ip": "10.0.0.2",
    "associations": [{"index": 0, "local_port": 5002, "peer_port": 5001, "peer_ip": "10.0.0.1",
                      "tag": "0x5e6f7080"}],
    "streams": [{"association": 0, "stream_id": 0, "pd": 2}],
    "regions": [{"stag": "0x0142", "pd": 2, "base_to": "0x8000", "length": 8192,
                 "access": ["remote_read", "remote_write"], "host_address": "0x40000",
                 "stream": {"association": 0, "stream_id": 0}}],
    "buffers": [{"association": 0, "stream_id": 0, "qn": 0, "host_address": 393216, "length": 4096}],
}


def test_reads_every_field():
    config = ReceiveConfig.from_json(json.dumps(GOOD))
    assert config.local_mac == bytes.fromhex("020000000002") and config.udp_port == 9899
    assert config.associations[0].tag == 0x5E6F7080 and config.associations[0].ddp
    region = config.regions[0]
    assert region.access == Access.REMOTE_READ | Access.REMOTE_WRITE and region.stream == (0, 0)
    assert config.buffers[0].host_address == 0x60000


def test_round_trip_through_to_dict():
    config = ReceiveConfig.from_dict(GOOD)
    assert ReceiveConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.pop("local_ip"), "missing 'local_ip'"),
        (lambda d: d.update(local_mac="02:00"), "not a MAC address"),
        (lambda d: d["associations"][0].update(tag="0x1ffffffff"), "32 bits"),
        (lambda d: d["associations"][0].update(colour="red"), "unknown field(s) colour"),
        (lambda d: d["regions"][0].update(access=["write"]), "access"),
        (lambda d: d["regions"][0].update(base_to=str(2**64 - 1)), "passes 2**64"),
        (lambda d: d["buffers"][0].update(qn=3), "RFC 5040 4.2"),
        (lambda d: d["buffers"][0].update(stream_id=5), "is not configured"),
        (lambda d: d["streams"][0].update(association=9), "association 9 is not configured"),
        (lambda d: d["regions"].append(dict(d["regions"][0])), "registered twice"),
        (lambda d: d["regions"][0].update(host_address=str(2**64 - 4096)), "host_address + length passes 2**64"),
        (lambda d: d["buffers"][0].update(host_address=2**64 - 1), "host_address + length passes 2**64"),
        (lambda d: d["associations"].append(dict(d["associations"][0], index=1, tag=0x71)),
         "associations[0] and associations[1] both have local port 5002, peer port 5001 and peer 10.0.0.1"),
        # the engine finds a row by the tag's low bits (abi.rx.association_row): a row its tag does not name
        (lambda d: d["associations"][0].update(tag="0x5e6f7083"), "tag 0x5e6f7083 names row 3, not its index 0"),
    ],
)
def test_bad_files_name_the_problem(change, message):
    document = json.loads(json.dumps(GOOD))
    change(document)
    with pytest.raises(ConfigError, match=re.escape(message)):
        ReceiveConfig.from_dict(document)


def test_not_json():
    with pytest.raises(ConfigError, match="not JSON"):
        ReceiveConfig.from_json("{")


def test_associations_apart_by_any_one_endpoint_field_are_accepted():
    """Port or peer address alone tells two associations apart (RFC 4960: an association is identified
    by its endpoints' transport addresses)."""
    document = json.loads(json.dumps(GOOD))
    first = document["associations"][0]
    document["associations"] += [dict(first, index=1, tag="0x11", local_port=6002),
                                 dict(first, index=2, tag="0x12", peer_port=6001),
                                 dict(first, index=3, tag="0x13", peer_ip="10.0.0.3")]
    assert len(ReceiveConfig.from_dict(document).associations) == 4


def test_host_range_may_end_at_the_top_of_the_address_space():
    document = json.loads(json.dumps(GOOD))
    document["regions"][0]["host_address"] = str(2**64 - 8192)  # its last byte at 2**64 - 1
    assert ReceiveConfig.from_dict(document).regions[0].host_address == 2**64 - 8192
