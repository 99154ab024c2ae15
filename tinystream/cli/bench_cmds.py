"""`tinystream bench ...`: benchmarks that print their figures (and --json)."""

from __future__ import annotations

import importlib

import click


@click.group()
def bench() -> None:
    """Benchmarks: storage log, produce, consume."""


for _module, _attribute, _name in [
    ("tinystream.bench.log_bench", "log_bench_command", "log"),
    ("tinystream.bench.produce_bench", "produce_bench_command", "produce"),
    ("tinystream.bench.consume_bench", "consume_bench_command", "consume"),
]:
    try:
        bench.add_command(getattr(importlib.import_module(_module), _attribute), _name)
    except ModuleNotFoundError as exc:  # not built yet: keep --help honest
        if not (exc.name or "").startswith("tinystream"):
            raise
