"""The sample capture and its receive-engine configuration, shipped with the package."""

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
SAMPLE_CAPTURE = DIRECTORY / "sample.pcap"
SAMPLE_CONFIG = DIRECTORY / "sample_rx.json"
