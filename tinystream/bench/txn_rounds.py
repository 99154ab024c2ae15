"""`tinystream bench produce --transactional`: transactions' cost, in alternating rounds against peers.

A single pass is noise on a shared two-core machine, so this mode starts
every broker once (ours, then each `--peer`) and keeps them up, idle but
for the one being measured, and runs rounds:

    round 1: ours [idempotent, txn 100, txn 1000], kafka [idempotent, txn 100, txn 1000]
    round 2: ours [...], kafka [...]
    ...

Every cell is the confluent (librdkafka) producer of `produce_workloads`,
acks=all, enable.idempotence; "txn N" is a transactional producer
committing every N records (KIP-98). The summary gives, per broker and
cell, the median records/s over the rounds with the spread (min-max), and
two ratios computed per round and then summarised the same way:

- txn N / idempotent on the same broker (what transactions cost there);
- ours / peer for the same cell (how we compare, in the same round).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import click

from tinystream.bench.produce_workloads import ProduceSpec, run_confluent
from tinystream.bench.stats import RunResult
from tinystream.bench.targets import Target, describe_spec, open_target


@dataclass(frozen=True)
class Cell:
    """One measured run: which broker, which round, idempotent (txn_records 0) or transactional."""

    target: str
    round: int
    txn_records: int
    result: RunResult

    @property
    def label(self) -> str:
        return f"txn {self.txn_records}" if self.txn_records else "idempotent"


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(cells: Sequence[Cell], targets: Sequence[str], txn_sizes: Sequence[int]) -> dict:
    """records/s per (target, cell) and the per-round ratios, each as median and spread."""
    by = {(c.target, c.round, c.txn_records): c.result.records_per_s for c in cells}
    rounds = sorted({c.round for c in cells})
    labels = [0, *txn_sizes]
    out: dict = {"records_per_s": {}, "txn_over_idempotent": {}, "ours_over_peer": {}}

    def collect(key: Callable[[int], float | None]) -> list[float]:
        return [v for v in (key(r) for r in rounds) if v is not None]

    for t in targets:
        for n in labels:
            values = collect(lambda r, t=t, n=n: by.get((t, r, n)))
            if values:
                out["records_per_s"][f"{t} {_label(n)}"] = spread(values)
        for n in txn_sizes:
            values = collect(lambda r, t=t, n=n: _ratio(by.get((t, r, n)), by.get((t, r, 0))))
            if values:
                out["txn_over_idempotent"][f"{t} {_label(n)}"] = spread(values)
    ours = targets[0]
    for peer in targets[1:]:
        for n in labels:
            values = collect(lambda r, peer=peer, n=n: _ratio(by.get((ours, r, n)), by.get((peer, r, n))))
            if values:
                out["ours_over_peer"][f"{_label(n)} vs {peer}"] = spread(values)
    return out


def _label(n: int) -> str:
    return f"txn {n}" if n else "idempotent"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def run_rounds(*, spec: ProduceSpec, peers: Sequence[str], rounds: int, txn_sizes: Sequence[int],
               bootstrap: str | None, as_json: bool, quiet: bool) -> None:
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if as_json else click.echo
    specs = ["tinystream", *peers]
    names = [describe_spec(s) for s in specs]
    say(f"produce --transactional: {rounds} rounds of {', '.join(names)} (in that order), each "
        f"idempotent then {', '.join(f'txn {n}' for n in txn_sizes)}; {spec.records:,} records of "
        f"{spec.record_size} B per cell after {spec.warmup_records:,} warm-up, {spec.partitions} partitions, acks=all")
    cells: list[Cell] = []
    problems: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        targets: list[Target] = []
        for index, s in enumerate(specs):
            try:
                targets.append(stack.enter_context(
                    open_target(s, bootstrap=bootstrap if index == 0 else None, quiet=quiet)))
            except Exception as exc:  # a peer that cannot start is reported, ours stops the run
                problems[describe_spec(s)] = f"{type(exc).__name__}: {exc}"
                say(f"{describe_spec(s)}: not started ({exc})")
                if index == 0:
                    raise SystemExit(1) from exc
        for r in range(1, rounds + 1):
            for target in targets:
                for n in (0, *txn_sizes):
                    cell_spec = replace(spec, idempotent=n == 0, txn_records=n, progress=False)
                    try:
                        result = run_confluent(target, cell_spec)
                    except Exception as exc:  # noqa: BLE001 - a failed cell is reported, the rounds go on
                        problems[f"{target.name} round {r} {_label(n)}"] = f"{type(exc).__name__}: {exc}"
                        say(f"  round {r} {target.name:<12} {_label(n):<10} FAILED {exc}")
                        continue
                    cells.append(Cell(target.name, r, n, result))
                    if not quiet:
                        say(f"  round {r} {target.name:<12} {_label(n):<10} {result.records_per_s:>10,.0f} records/s"
                            f"  p99 {result.latency_ms.get('p99', float('nan')):7.1f} ms")
    summary = summarize(cells, [t.name for t in targets], txn_sizes)
    if as_json:
        click.echo(json.dumps({"benchmark": "produce --transactional", "rounds": rounds,
                               "cells": [{"target": c.target, "round": c.round, "cell": c.label,
                                          **c.result.as_dict()} for c in cells],
                               "summary": summary, "problems": problems}, indent=2))
    else:
        click.echo("median over rounds [min-max]:")
        for key, v in summary["records_per_s"].items():
            click.echo(f"  {key:<28} {v['median']:>10,.0f} records/s [{v['min']:,.0f}-{v['max']:,.0f}]")
        for title, table in (("transactional / idempotent, same broker", summary["txn_over_idempotent"]),
                             ("ours / peer, same round", summary["ours_over_peer"])):
            click.echo(f"{title}:")
            for key, v in table.items():
                click.echo(f"  {key:<28} {v['median']:.2f}x [{v['min']:.2f}-{v['max']:.2f}]")
    if problems and any(k.startswith(names[0]) for k in problems):
        raise SystemExit(1)
