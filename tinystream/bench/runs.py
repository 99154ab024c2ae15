"""Run one workload against our broker and then each peer; report the figures and ratios.

Shared by `tinystream bench produce` and `tinystream bench consume`. Brokers
run one after another (each started, measured, stopped), never together. A
peer that cannot run here (no jars, no tansu) is reported and skipped; a
failure of our own broker makes the command exit non-zero.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Sequence

import click

from tinystream.bench.stats import RunResult, ratio_lines, ratios
from tinystream.bench.targets import describe_spec, open_target
from tinystream.testing.peers import PeerError, PeerUnavailable


def run_everywhere(
    *,
    benchmark: str,
    workload: dict,
    runner: Callable,
    spec: object,
    bootstrap: str | None,
    peers: Sequence[str],
    as_json: bool,
    quiet: bool,
) -> None:
    results: list[RunResult] = []
    problems: dict[str, str] = {}
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if as_json else click.echo
    say(f"{benchmark}: " + ", ".join(f"{k}={v}" for k, v in workload.items()))
    for index, target_spec in enumerate(["tinystream", *peers]):
        name = describe_spec(target_spec)
        try:
            with open_target(target_spec, bootstrap=bootstrap if index == 0 else None, quiet=quiet) as target:
                result = runner(target, spec)
        except PeerUnavailable as exc:
            problems[name] = f"skipped: {exc}"
            say(f"{name}: skipped ({exc})")
            if index == 0:
                break
            continue
        except (PeerError, Exception) as exc:  # a broken peer must not hide the others' figures
            problems[name] = f"{type(exc).__name__}: {exc}"
            say(f"{name}: FAILED {type(exc).__name__}: {exc}")
            if not quiet:
                traceback.print_exc(file=sys.stderr)
            continue
        results.append(result)
        say(result.line())
    for line in ratio_lines(results) if results and results[0].target in ("tinystream", "external") else []:
        say(line)
    if as_json:
        click.echo(json.dumps({
            "benchmark": benchmark,
            "workload": workload,
            "results": [r.as_dict() for r in results],
            "ratios_records_per_s": ratios(results) if results and results[0].target in ("tinystream", "external")
            else {},
            "problems": problems,
        }, indent=2))
    ours = describe_spec("tinystream")
    if ours in problems or "external" in problems or (results and results[0].target in (ours, "external")
                                                       and not results[0].verified):
        raise SystemExit(1)
