"""Receive-engine configuration files (model/engine/config.py)."""

import json

import pytest

from model.ddp.memory import Access
from model.engine.config import ConfigError, ReceiveConfig

GOOD = {
    "local_mac": "02:00:00:00:00:02", "local_ip": "10.0.0.2",
    "associations": [{"index": 0, "local_port": 5002, "peer_port": 5001, "peer_ip": "10.0.0.1",
                      "tag": "0x5e6f7081"}],
    "streams": [{"association": 0, "stream_id": 0, "pd": 2}],
    "regions": [{"stag": "0x0142", "pd": 2, "base_to": "0x8000", "length": 8192,
                 "access": ["remote_read", "remote_write"], "host_address": "0x40000",
                 "stream": {"association": 0, "stream_id": 0}}],
    "buffers": [{"association": 0, "stream_id": 0, "qn": 0, "host_address": 393216, "length": 4096}],
}


def test_reads_every_field():
    config = ReceiveConfig.from_json(json.dumps(GOOD))
    assert config.local_mac == bytes.fromhex("020000000002") and config.udp_port == 9899
    assert config.associations[0].tag == 0x5E6F7081 and config.associations[0].ddp
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
    ],
)
def test_bad_files_name_the_problem(change, message):
    document = json.loads(json.dumps(GOOD))
    change(document)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        ReceiveConfig.from_dict(document)


def test_not_json():
    with pytest.raises(ConfigError, match="not JSON"):
        ReceiveConfig.from_json("{")
