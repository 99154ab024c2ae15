"""`tinystream broker` (one broker, foreground) and `tinystream dev` (a local cluster).

`dev` supervises a controller and N brokers as child processes
(tinystream/dev/cluster.py): each child's command line and environment
alone are enough to start it again on its data, so a test (or a person) can
kill and restart one. `dev` reports a child that dies and keeps the rest
running; it restarts nothing behind the user's back.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tinystream.broker.app import BrokerInfo
from tinystream.broker.app import main as run_broker_main
from tinystream.cli.settings_options import pop_settings, settings_options
from tinystream.dev.cluster import LocalCluster
from tinystream.operator.service import main as run_controller_main


@click.command()
@settings_options("broker")
def broker(**kwargs: Any) -> None:
    """Run one broker in the foreground (Kafka protocol on --port, admin HTTP on --admin-port)."""
    effective = pop_settings("broker", kwargs)

    def announce(info: BrokerInfo) -> None:
        click.echo(f"broker {info.broker_id} ready bootstrap={info.bootstrap}", err=False)
        for address in info.listeners:
            click.echo(f"broker {info.broker_id} listener {address.name}={address.host}:{address.port}")
        click.echo(f"broker {info.broker_id} admin={info.admin_url}  (/healthz, /metrics)")
        sys.stdout.flush()

    run_broker_main(effective.settings, ready=announce)


@click.command()
@settings_options("controller")
def controller(**kwargs: Any) -> None:
    """Run the controller (local driver): the controller API over HTTP/JSON, state in a file."""
    effective = pop_settings("controller", kwargs)

    def announce(info: Any) -> None:
        click.echo(f"controller ready url={info.url} cluster_id={info.cluster_id}")
        click.echo(f"controller API tokens are signed by {info.secret_file}; a broker's token: "
                   f"tinystream token --secret-file {info.secret_file} --broker ID")
        sys.stdout.flush()

    run_controller_main(effective.settings, ready=announce)


@click.command()
@click.option("--secret-file", type=click.Path(dir_okay=False, exists=True), required=True,
              help="The controller's secret (controller.secret.file; by default beside its state file).")
@click.option("--broker", "broker_id", type=click.IntRange(0), default=None, help="A token for this broker id.")
@click.option("--admin", is_flag=True, help="A token for the admin principal (operators, the CLI, dashboards).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write it to this file (0600).")
def token(secret_file: str, broker_id: int | None, admin: bool, out: str | None) -> None:
    """Make a controller API token: for one broker (controller.token.file) or the admin."""
    from tinystream.controller_auth import ADMIN, broker_principal, read_secret, token_for, write_token_file

    if (broker_id is None) == (not admin):
        raise click.UsageError("give exactly one of --broker ID and --admin")
    made = token_for(read_secret(secret_file), ADMIN if admin else broker_principal(broker_id or 0))
    if out:
        write_token_file(out, made)
    else:
        click.echo(made)


@click.command()
@click.option("--brokers", type=click.IntRange(1, 9), default=3, show_default=True, help="Number of brokers.")
@click.option("--data-dir", type=click.Path(file_okay=False), default="./data", show_default=True,
              help="One folder per broker, the controller's state and the logs; reused on the next start.")
@click.option("--port", "first_port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="Kafka port of the first broker; the others follow (0: pick free ports for everything).")
@click.option("--controller-port", type=click.IntRange(0, 65535), default=None,
              help="Controller API port.  [default: 9091; 0 with --port 0]")
@click.option("--dashboard-port", type=click.IntRange(0, 65535), default=None,
              help="Dashboard port.  [default: 3200; 0 with --port 0]")
@click.option("--schema-registry-port", type=click.IntRange(0, 65535), default=None,
              help="Schema registry port (started when the [registry] extra is installed).  [default: 8081; 0 with --port 0]")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A setting by its Kafka name, for every broker and/or the controller (whichever knows it; "
                   "e.g. min.insync.replicas=2, broker.session.timeout.ms=3000).")
def dev(brokers: int, data_dir: str, first_port: int, controller_port: int | None, dashboard_port: int | None,
        schema_registry_port: int | None, overrides: tuple[str, ...]) -> None:
    """Start a local cluster (controller + N brokers) in the foreground; Ctrl-C stops it cleanly."""
    if first_port and first_port + brokers - 1 > 65535:
        raise click.UsageError(f"--port {first_port} leaves no room for {brokers} brokers")
    try:
        cluster = LocalCluster(brokers=brokers, data_dir=data_dir, first_port=first_port,
                               controller_port=controller_port, dashboard_port=dashboard_port,
                               schema_registry_port=schema_registry_port, overrides=list(overrides),
                               echo=lambda line: click.echo(line))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    cluster.run_until_stopped()
    if cluster.failed:
        raise SystemExit(1)
