"""`tinystream rebalance`: a proposal to review and, with --execute, carry it out (Strimzi's KafkaRebalance,
locally).

    tinystream token --admin --secret-file ./data/controller/controller.secret --out admin.token
    tinystream rebalance --mode full --controller-token-file admin.token
    tinystream rebalance --mode remove-brokers --brokers 2 --execute --throttle 10485760 ...

Flow: partition sizes from the brokers (DescribeLogDirs, kafka-python), the
proposal from the controller (POST /v1/rebalance/proposal), printed. With
--execute: the moves (POST /v1/rebalance/execute), with --throttle the
controller also sets the moving topics' throttled replicas and the involved
brokers' leader/follower.replication.throttled.rate in one step before them
(as kafka-reassign-partitions.sh --throttle; a rate set by hand is kept),
then /verify until nothing is left (the controller then takes the throttles
and the rates it set out and elects the preferred leaders). Ctrl-C or
--timeout stops the moves still running (POST /v1/rebalance/stop), which
takes them out too.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import click

from tinystream.cli.kafka_client import admin, translated
from tinystream.controller_client import ControllerClient, ControllerClientError, controller_ssl_context

MODES = ("full", "add-brokers", "remove-brokers")

Moves = dict[tuple[str, int], list[int]]


def partition_sizes(log_dirs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], int]:
    """The largest replica's size per partition from kafka-python's describe_log_dirs answer (the leader's
    log is the one a move copies)."""
    sizes: dict[tuple[str, int], int] = {}
    for broker in log_dirs:
        for log_dir in broker.get("log_dirs", ()):
            for topic in log_dir.get("topics", ()):
                for p in topic.get("partitions", ()):
                    key = (topic["name"], p["partition_index"])
                    sizes[key] = max(sizes.get(key, 0), int(p.get("partition_size", 0)))
    return sizes


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def render(proposal: Mapping[str, Any], *, sizes_measured: int) -> list[str]:
    """The proposal as a person reviews it: totals, per-broker load before -> after, then the moves."""
    lines = [
        f"mode {proposal['mode']}" + (f" brokers {','.join(map(str, proposal['brokers']))}" if proposal["brokers"]
                                      else ""),
        f"replica movements {proposal['num_replica_movements']}, leader movements "
        f"{proposal['num_leader_movements']}, data to move {_mb(proposal['data_to_move_bytes'])}"
        f" ({sizes_measured} partition sizes measured)",
        f"imbalance score {proposal['score_before']:.4f} -> {proposal['score_after']:.4f} (0 = balanced)",
        "",
        f"{'broker':>6} {'replicas':>14} {'leaders':>12} {'disk':>22}",
    ]
    after = {x["broker_id"]: x for x in proposal["loads_after"]}
    for x in proposal["loads_before"]:
        y = after.get(x["broker_id"], {"replicas": 0, "leaders": 0, "disk_bytes": 0})
        lines.append(f"{x['broker_id']:>6} {x['replicas']:>6} -> {y['replicas']:<5} {x['leaders']:>5} -> "
                     f"{y['leaders']:<4} {_mb(x['disk_bytes']):>10} -> {_mb(y['disk_bytes'])}")
    if proposal["moves"]:
        lines += ["", f"{'topic':<24} {'partition':>9}  replicas before -> after"]
        for m in proposal["moves"]:
            lines.append(f"{m['topic']:<24} {m['partition']:>9}  {m['before']} -> {m['after']}")
    else:
        lines += ["", "nothing to move: the cluster is as balanced as the goals allow"]
    return lines


async def _run(client: ControllerClient, *, mode: str, brokers: Sequence[int], sizes: dict[tuple[str, int], int],
               execute: bool, throttle: int | None, timeout_s: float, echo: Any) -> dict[str, Any]:
    reply = await client.rebalance_proposal(mode, brokers=brokers, sizes=sizes)
    proposal = reply["proposal"]
    echo(proposal, reply["sizes_measured"])
    moves: Moves = {(m["topic"], m["partition"]): m["after"] for m in proposal["moves"]}
    if not execute or not moves:
        return proposal
    await client.rebalance_execute(moves, throttle=throttle is not None, rate=throttle)
    deadline = time.monotonic() + timeout_s
    try:
        while not (await client.rebalance_verify(moves, rate=throttle))["done"]:
            if time.monotonic() > deadline:
                raise click.ClickException(f"the moves did not finish in {timeout_s:.0f} s")
            await asyncio.sleep(0.5)
    except BaseException:
        stopped = await client.rebalance_stop(moves, rate=throttle)
        click.echo(f"stopped: {len(stopped['cancelled'])} move(s) cancelled", err=True)
        raise
    return proposal


@click.command()
@click.option("--mode", type=click.Choice(MODES), default="full", show_default=True,
              help="full: balance all brokers; add-brokers: move onto --brokers; remove-brokers: empty --brokers.")
@click.option("--brokers", "broker_ids", default="", metavar="IDS",
              help="Comma-separated broker ids added or removed (add-brokers, remove-brokers).")
@click.option("--execute", is_flag=True, help="Carry the proposal out and wait for it (else only print it).")
@click.option("--throttle", type=click.IntRange(1), default=None, metavar="BYTES",
              help="While moving, hold replication of moving replicas to BYTES per second on each broker a move "
                   "involves (the controller sets and removes the rates; a rate set by hand is kept).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1), default=3600, show_default=True,
              help="Seconds to wait for the moves; then they are stopped.")
@click.option("--bootstrap-server", "bootstrap", envvar="TINYSTREAM_BOOTSTRAP", default="127.0.0.1:9092",
              show_default=True, help="Brokers, for partition sizes (DescribeLogDirs).")
@click.option("--controller", envvar="TINYSTREAM_CONTROLLER_URL", default="http://127.0.0.1:9091", show_default=True,
              help="Controller API URL (env TINYSTREAM_CONTROLLER_URL).")
@click.option("--controller-token-file", type=click.Path(dir_okay=False, exists=True), default=None,
              envvar="TINYSTREAM_CONTROLLER_TOKEN_FILE",
              help="The admin's controller API token (tinystream token --admin ...): rebalancing is admin only.")
@click.option("--controller-ca", type=click.Path(dir_okay=False, exists=True), default=None,
              envvar="TINYSTREAM_CONTROLLER_CA", help="The CA of an https controller (PEM).")
@click.option("--json", "as_json", is_flag=True, help="Print the proposal as JSON.")
def rebalance(mode: str, broker_ids: str, execute: bool, throttle: int | None, timeout_s: float, bootstrap: str,
              controller: str, controller_token_file: str | None, controller_ca: str | None, as_json: bool) -> None:
    """Propose (and with --execute, apply) a rebalance of partitions over the brokers."""
    from tinystream.controller_auth import read_secret  # noqa: PLC0415 - as status_cmd

    try:
        brokers = [int(b) for b in broker_ids.split(",") if b.strip()]
    except ValueError:
        raise click.BadParameter(f"{broker_ids!r} is not a comma-separated list of broker ids",
                                 param_hint="--brokers") from None
    with admin(bootstrap) as client, translated(bootstrap):
        sizes = partition_sizes(client.describe_log_dirs())

    def echo(proposal: Mapping[str, Any], measured: int) -> None:
        click.echo(json.dumps(proposal, indent=2) if as_json else "\n".join(render(proposal, sizes_measured=measured)))

    async def main() -> dict[str, Any]:
        token = read_secret(controller_token_file) if controller_token_file else None
        async with ControllerClient(controller, token=token,
                                    ssl_context=controller_ssl_context(controller, controller_ca)) as c:
            return await _run(c, mode=mode, brokers=brokers, sizes=sizes, execute=execute,
                              throttle=throttle, timeout_s=timeout_s, echo=echo)

    try:
        proposal = asyncio.run(main())
    except (ControllerClientError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if execute and proposal["moves"]:
        click.echo(f"done: {proposal['num_replica_movements']} replica(s) moved, "
                   f"{proposal['num_leader_movements']} leader(s) moved")
