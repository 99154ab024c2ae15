"""`tinystream broker` (one broker, foreground) and `tinystream dev` (a local cluster).

`dev` supervises brokers as child processes: each child's command line and
environment alone are enough to start it again on its data, so a test (or a
person) can kill and restart one. `dev` reports a child that dies and keeps
the rest running; it restarts nothing behind the user's back.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

from tinystream.broker.app import BrokerInfo
from tinystream.broker.app import main as run_broker_main
from tinystream.cli.settings_options import pop_settings, settings_options
from tinystream.local_cluster import LocalCluster


@click.command()
@settings_options("broker")
def broker(**kwargs: Any) -> None:
    """Run one broker in the foreground (Kafka protocol on --port, admin HTTP on --admin-port)."""
    effective = pop_settings("broker", kwargs)

    def announce(info: BrokerInfo) -> None:
        click.echo(f"broker {info.broker_id} ready bootstrap={info.bootstrap}", err=False)
        click.echo(f"broker {info.broker_id} admin={info.admin_url}  (/healthz, /metrics)")
        sys.stdout.flush()

    run_broker_main(effective.settings, ready=announce)


@click.command()
@settings_options("controller")
def controller(**kwargs: Any) -> None:
    """Run the controller (local driver): the controller API over HTTP/JSON, state in a file."""
    from tinystream.operator.service import main as run_controller_main

    effective = pop_settings("controller", kwargs)

    def announce(info: Any) -> None:
        click.echo(f"controller ready url={info.url} cluster_id={info.cluster_id}")
        sys.stdout.flush()

    run_controller_main(effective.settings, ready=announce)


@click.command()
@click.option("--brokers", type=click.IntRange(1, 9), default=1, show_default=True, help="Number of brokers.")
@click.option("--data-dir", type=click.Path(file_okay=False), default="./data", show_default=True)
@click.option("--port", "first_port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="Kafka port of the first broker; the others follow (0: pick free ports).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Broker setting for every broker.")
def dev(brokers: int, data_dir: str, first_port: int, overrides: tuple[str, ...]) -> None:
    """Start a local cluster in the foreground; Ctrl-C stops it cleanly."""
    cluster = LocalCluster(brokers=brokers, data_dir=data_dir, first_port=first_port,
                           overrides=list(overrides), echo=click.echo)
    try:
        asyncio.run(cluster.run_until_stopped())
    except KeyboardInterrupt:
        pass
    if cluster.failed:
        raise SystemExit(1)
