"""`tinystream bench fetch-sessions`: what incremental fetch sessions (KIP-227) save, on and off in one run.

Two of our brokers run side by side, identical but for
`max.incremental.fetch.session.cache.slots`: 1000 (Kafka's default, sessions
on) and 0 (no room, so every fetch stays full: sessions off). Each gets the
same topic of `--partitions` partitions. A consumer fetching all of them
(`fetch_session_workload.SessionConsumer`, Fetch v12) then runs `--fetches`
fetches per cell, idle (nobody writes) and light (a few partitions get one
record before each fetch), alternating which side goes first from round to
round so drift hits both alike.

Per cell: request bytes per fetch, response bytes per fetch, partitions per
response, broker CPU per fetch (the broker process's CPU time over the
round / fetches) and wall time per fetch. The summary gives the median over
rounds with the spread (min-max), and on/off ratios of the medians.

    tinystream bench fetch-sessions                       # 1000 partitions, 5 rounds
    tinystream bench fetch-sessions --rounds 3 --fetches 100 --json
    tinystream bench fetch-sessions --followers           # replica fetchers (fetch_session_followers.py)
    tinystream bench fetch-sessions --peer kafka --partitions 10000   # ours against Kafka, sessions on

`--peer kafka` compares brokers instead of settings: ours and Apache Kafka (both with sessions on,
Kafka's default 1000 slots), the same topic, the same consumer, alternating which goes first. The
figures are then named by broker and the ratio is ours over Kafka's.

`--max-wait-ms 0` (the default) has the consumer poll back to back, so each
fetch's cost is measured rather than its wait; an idle consumer with a
500 ms wait sends the same requests, only fewer per second.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import uuid
from collections.abc import Callable, Sequence

import click

from tinystream.bench.control import end_offsets, ensure_topic
from tinystream.bench.fetch_session_followers import run_follower_rounds
from tinystream.bench.fetch_session_workload import RoundResult, SessionConsumer, run_round
from tinystream.bench.wire_client import WireConnection
from tinystream.testing.peers import RunningBroker, start_peer

SLOTS = {"on": 1000, "off": 0}
SLOTS_KEY = "max.incremental.fetch.session.cache.slots"
PEERS = ("kafka",)
# side name -> (broker to start, its overrides)
Sides = dict[str, tuple[str, dict[str, object]]]
SESSION_SIDES: Sides = {mode: ("tinystream", {SLOTS_KEY: slots}) for mode, slots in SLOTS.items()}


def peer_sides(peer: str) -> Sides:
    """Ours against `peer`, both with sessions on (1000 slots, Kafka's default)."""
    return {"tinystream": ("tinystream", {SLOTS_KEY: SLOTS["on"]}), peer: (peer, {SLOTS_KEY: SLOTS["on"]})}
LOADS = ("idle", "light")
FIGURES: dict[str, Callable[[RoundResult], float | None]] = {
    "request B/fetch": lambda r: r.request_bytes_per_fetch,
    "response B/fetch": lambda r: r.response_bytes_per_fetch,
    "partitions/response": lambda r: r.partitions_per_response,
    "broker CPU ms/fetch": lambda r: r.cpu_ms_per_fetch,
    "wall ms/fetch": lambda r: r.ms_per_fetch,
}


def summarize(results: Sequence[RoundResult],
              sides: Sequence[str] = tuple(SLOTS)) -> dict[str, dict[str, dict[str, float]]]:
    """{"idle on": {figure: {"median", "min", "max"}}} over the rounds of each (load, side)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for load in LOADS:
        for mode in sides:
            cell = [r for r in results if r.load == load and r.mode == mode]
            if not cell:
                continue
            figures: dict[str, dict[str, float]] = {}
            for name, f in FIGURES.items():
                values = [v for v in (f(r) for r in cell) if v is not None]
                if values:
                    figures[name] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
            out[f"{load} {mode}"] = figures
    return out


def ratio_table(summary: dict[str, dict[str, dict[str, float]]],
                sides: tuple[str, str] = ("on", "off")) -> dict[str, dict[str, float]]:
    """first side over second of the medians, per load and figure (on/off below 1: sessions save)."""
    ratios: dict[str, dict[str, float]] = {}
    for load in LOADS:
        on, off = summary.get(f"{load} {sides[0]}"), summary.get(f"{load} {sides[1]}")
        if on is None or off is None:
            continue
        ratios[load] = {name: round(on[name]["median"] / off[name]["median"], 4) if off[name]["median"] else 0.0
                        for name in FIGURES if name in on and name in off}
    return ratios


async def _prepare(broker: RunningBroker, topic: str, partitions: int) -> None:
    conn = await WireConnection.open(broker.host, broker.port)
    try:
        await ensure_topic(conn, topic, partitions, timeout=900)  # 10,000 partitions take Kafka minutes
        # ...and their leaders more than the cells' 30 s on a loaded machine (NOT_LEADER_OR_FOLLOWER until then).
        await end_offsets(conn, topic, partitions, timeout=900)
    finally:
        await conn.close()


async def _cell(broker: RunningBroker, *, mode: str, load: str, topic: str, partitions: int, fetches: int,
                warmup: int, light_partitions: int, max_wait_ms: int, seed: int) -> RoundResult:
    conn = await WireConnection.open(broker.host, broker.port)
    try:
        positions = await end_offsets(conn, topic, partitions)
        consumer = SessionConsumer(topic, positions, max_wait_ms=max_wait_ms)
        return await run_round(conn=conn, broker_pid=broker.process.pid, consumer=consumer, mode=mode, load=load,
                               fetches=fetches, warmup=warmup, light_partitions=light_partitions,
                               partitions=partitions, rng=random.Random(seed))
    finally:
        await conn.close()


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3f}"


def _line(r: RoundResult) -> str:
    return (f"  {r.load:<5} {r.mode:<10}: request {r.request_bytes_per_fetch:>9,.0f} B  "
            f"response {r.response_bytes_per_fetch:>9,.0f} B  partitions {r.partitions_per_response:>7.1f}  "
            f"broker CPU {r.cpu_ms_per_fetch:7.3f} ms  wall {r.ms_per_fetch:7.3f} ms  per fetch "
            f"({r.incremental}/{r.fetches} incremental)")


@click.command("fetch-sessions")
@click.option("--partitions", default=1000, show_default=True, type=click.IntRange(1))
@click.option("--rounds", default=5, show_default=True, type=click.IntRange(1),
              help="Alternating rounds; each runs every load with sessions on and off.")
@click.option("--fetches", default=200, show_default=True, type=click.IntRange(1), help="Measured fetches per cell.")
@click.option("--warmup", default=5, show_default=True, type=click.IntRange(1),
              help="Unmeasured fetches first in each cell (the session opens with a full fetch).")
@click.option("--light-partitions", default=10, show_default=True, type=click.IntRange(1),
              help="light load: partitions that get one record before each fetch.")
@click.option("--load", "loads", multiple=True, type=click.Choice(LOADS), help="Default: both.")
@click.option("--max-wait-ms", default=0, show_default=True, type=click.IntRange(0))
@click.option("--followers", is_flag=True,
              help="Measure replica fetchers instead: two 2-broker clusters (RF 2), windows of --seconds.")
@click.option("--seconds", default=10.0, show_default=True, type=click.FloatRange(1), help="--followers: window.")
@click.option("--peer", type=click.Choice(PEERS), default=None,
              help="Ours against this broker, both with sessions on, instead of sessions on against off.")
@click.option("--json", "as_json", is_flag=True, help="Print the rounds and the summary as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No per-round lines.")
def fetch_session_bench_command(partitions: int, rounds: int, fetches: int, warmup: int, light_partitions: int,
                                loads: tuple[str, ...], max_wait_ms: int, followers: bool, seconds: float,
                                peer: str | None, as_json: bool, quiet: bool) -> None:
    """Fetch sessions on vs off (or ours vs --peer): request/response bytes and broker CPU per fetch."""
    if light_partitions > partitions:
        raise click.UsageError("--light-partitions cannot exceed --partitions")
    if peer and followers:
        raise click.UsageError("--followers measures our replica fetchers on and off; it takes no --peer")
    sides = peer_sides(peer) if peer else SESSION_SIDES
    loads = loads or LOADS
    say = (lambda text: click.echo(text, err=True)) if as_json or quiet else click.echo
    say(f"fetch-sessions: partitions={partitions} rounds={rounds} fetches/cell={fetches} warmup={warmup} "
        f"loads={','.join(loads)} light_partitions={light_partitions} max_wait_ms={max_wait_ms}")
    if followers:
        say(f"  followers: {seconds:g} s windows (replica fetchers long-poll 500 ms)")
        results = run_follower_rounds(partitions=partitions, rounds=rounds, seconds=seconds, loads=loads,
                                      light_partitions=light_partitions, slots=SLOTS, say=say, quiet=True)
    else:
        results = _consumer_rounds(sides, partitions=partitions, rounds=rounds, fetches=fetches, warmup=warmup,
                                   light_partitions=light_partitions, loads=loads, max_wait_ms=max_wait_ms,
                                   say=say, quiet=quiet)
    _report(results, tuple(sides), partitions=partitions, rounds=rounds, fetches=fetches, loads=loads,
            light_partitions=light_partitions, max_wait_ms=max_wait_ms, followers=followers, as_json=as_json)


def _consumer_rounds(sides: Sides, *, partitions: int, rounds: int, fetches: int, warmup: int,
                     light_partitions: int, loads: tuple[str, ...], max_wait_ms: int, say: Callable[[str], None],
                     quiet: bool) -> list[RoundResult]:
    topic = f"bench-sessions-{uuid.uuid4().hex[:8]}"
    brokers: dict[str, RunningBroker] = {}
    results: list[RoundResult] = []
    first, second = sides
    try:
        for mode, (spec, overrides) in sides.items():
            brokers[mode] = start_peer(spec, overrides=overrides)
            say(f"  {mode}: {spec} {brokers[mode].version} pid {brokers[mode].process.pid} at "
                f"{brokers[mode].bootstrap} ({SLOTS_KEY}={overrides.get(SLOTS_KEY)})")
            asyncio.run(_prepare(brokers[mode], topic, partitions))
        for index in range(rounds):
            order = (first, second) if index % 2 == 0 else (second, first)
            say(f"round {index + 1}/{rounds} ({' then '.join(order)})")
            for load in loads:
                for mode in order:
                    r = asyncio.run(_cell(brokers[mode], mode=mode, load=load, topic=topic, partitions=partitions,
                                          fetches=fetches, warmup=warmup, light_partitions=light_partitions,
                                          max_wait_ms=max_wait_ms, seed=index))
                    results.append(r)
                    if not quiet:
                        say(_line(r))
    finally:
        for broker in brokers.values():
            broker.stop()
    return results


def _report(results: list[RoundResult], sides: tuple[str, ...], *, partitions: int, rounds: int, fetches: int,
            loads: tuple[str, ...], light_partitions: int, max_wait_ms: int, followers: bool, as_json: bool) -> None:
    first, second = sides
    summary = summarize(results, sides)
    ratios = ratio_table(summary, (first, second))
    if as_json:
        click.echo(json.dumps({"workload": {"partitions": partitions, "rounds": rounds, "fetches": fetches,
                                            "loads": list(loads), "light_partitions": light_partitions,
                                            "max_wait_ms": max_wait_ms, "fetcher": "followers" if followers
                                            else "consumer"},
                               "rounds": [r.__dict__ for r in results], "summary": summary,
                               f"{first}_over_{second}": ratios},
                              indent=2))
        return
    click.echo(f"median over {rounds} rounds [min-max]:")
    for cell, figures in summary.items():
        text = "  ".join(f"{name} {_num(v['median'])} [{_num(v['min'])}-{_num(v['max'])}]"
                         for name, v in figures.items())
        click.echo(f"  {cell:<10} {text}")
    for load, figures in ratios.items():
        click.echo(f"  {load} {first}/{second}: " + "  ".join(f"{name} {v:.3f}x" for name, v in figures.items()))
