"""The `rnic` subcommands: demo, dissect, replay, benchmarks, sample capture."""
