"""`tinystream status`: the dashboard's overview, brokers, partitions and groups, in color, in a terminal.

Two ways in, same views (tinystream.operator.dashboard.views):

    tinystream status --controller http://127.0.0.1:9091 [--broker-admin http://127.0.0.1:PORT ...]
        reads the controller's image and, when given (or derivable with
        --admin-url-template 'http://{host}:3200'), the brokers' admin APIs
    tinystream status --dashboard http://127.0.0.1:3200
        reads a running dashboard's JSON twins (which already know every broker)
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Mapping
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tinystream.controller_client import controller_ssl_context
from tinystream.operator.dashboard import HttpClusterSource, views
from tinystream.operator.dashboard.sources import admin_urls_from_template


def _from_controller(controller: str, token: str | None, admin: tuple[str, ...], template: str | None,
                     ca_file: str | None = None, admin_token: str | None = None) -> dict[str, Any]:
    try:
        tls = controller_ssl_context(controller, ca_file)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    by_template = admin_urls_from_template(template)

    def admin_urls(metadata: Mapping[str, Any] | None) -> Mapping[int, str]:
        urls = dict(by_template(metadata))
        for item in admin:
            broker_id, sep, url = item.partition("=")
            if not sep:
                raise click.UsageError(f"--broker-admin expects ID=URL, got {item!r}")
            urls[int(broker_id)] = url
        return urls

    async def read() -> dict[str, Any]:
        source = HttpClusterSource(controller, controller_token=token, controller_ssl=tls, admin_urls=admin_urls,
                                   admin_token=admin_token)
        try:
            raw = await source.snapshot()
        finally:
            await source.close()
        topic_rows = views.topics(raw)
        broker_rows = views.brokers(raw)
        group_rows = views.groups(raw, topic_rows)
        return {"overview": views.overview(raw, broker_rows=broker_rows, topic_rows=topic_rows, group_rows=group_rows),
                "brokers": broker_rows, "topics": topic_rows, "groups": group_rows}

    return asyncio.run(read())


def _from_dashboard(url: str, token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def get(view: str) -> Any:
        request = urllib.request.Request(f"{url.rstrip('/')}/api/{view}", headers=headers)  # noqa: S310
        with urllib.request.urlopen(request, timeout=5.0) as response:  # noqa: S310
            return json.loads(response.read())

    return {"overview": get("overview"), "brokers": get("brokers")["brokers"], "topics": get("topics")["topics"],
            "groups": get("groups")["groups"]}


def _ok(flag: bool, good: str = "up", bad: str = "down") -> str:
    return f"[green]{good}[/]" if flag else f"[red]{bad}[/]"


def _n(value: Any) -> str:
    return "–" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:,.0f}"


def render(data: Mapping[str, Any], console: Console, *, internal: bool = False) -> None:
    o = data["overview"]
    c = o["controller"]
    b = o["brokers"]
    console.print(f"[bold]TinyStream[/] cluster [cyan]{o['cluster_id'] or '?'}[/]  metadata v{o['metadata_version']}")
    console.print(
        f"controller {_ok(c['up'])} {c['url'] or ''}   brokers [bold]{b['up']}/{b['total']}[/] up, "
        f"{'[red]' if b['fenced'] else '[green]'}{b['fenced']} fenced[/]   topics {o['topics']}  partitions {o['partitions']}   "
        f"offline {'[red]' if o['offline_partitions'] else '[green]'}{o['offline_partitions']}[/]   "
        f"under-replicated {'[yellow]' if o['under_replicated_partitions'] else '[green]'}"
        f"{o['under_replicated_partitions']}[/]   groups {o['groups']}  lag {_n(o['total_lag'])}"
    )
    if c.get("error"):
        console.print(f"[red]controller: {c['error']}[/]")

    t = Table(title="Brokers", title_justify="left")
    for col in ("id", "address", "rack", "state", "led", "hosted", "bytes in", "bytes out"):
        t.add_column(col, justify="right" if col in ("led", "hosted", "bytes in", "bytes out") else "left")
    for r in data["brokers"]:
        state = _ok(r["up"]) if not r["fenced"] else "[red]fenced[/]"
        t.add_row(str(r["broker_id"]), r["address"] or "?", r["rack"] or "", state, str(r["partitions_led"]),
                  str(r["partitions"]), _n(r["bytes_in"]), _n(r["bytes_out"]))
    console.print(t)

    t = Table(title="Partitions", title_justify="left")
    for col in ("topic", "part", "leader", "replicas", "ISR", "epoch", "start", "end", "HW", "size"):
        t.add_column(col, justify="left" if col in ("topic", "replicas", "ISR") else "right")
    for topic in data["topics"]:
        if topic["internal"] and not internal:
            continue
        for p in topic["partitions"]:
            style = "red" if p["offline"] else "yellow" if p["under_replicated"] else None
            t.add_row(topic["name"], str(p["partition"]), "none" if p["offline"] else str(p["leader"]),
                      ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])), str(p["leader_epoch"]),
                      _n(p["log_start_offset"]), _n(p["log_end_offset"]), _n(p["high_watermark"]), _n(p["size_bytes"]),
                      style=style)
    console.print(t)

    t = Table(title="Consumer groups", title_justify="left")
    for col in ("group", "state", "members", "topic", "part", "committed", "end", "lag"):
        t.add_column(col, justify="right" if col in ("members", "part", "committed", "end", "lag") else "left")
    for g in data["groups"]:
        for o_ in g["offsets"] or [None]:
            if o_ is None:
                t.add_row(g["group_id"], g["state"], str(len(g["members"])), "", "", "", "", "")
                continue
            lag = o_["lag"]
            t.add_row(g["group_id"], g["state"], str(len(g["members"])), o_["topic"], str(o_["partition"]),
                      _n(o_["committed"]), _n(o_["end_offset"]), f"[yellow]{_n(lag)}[/]" if lag else f"[green]{_n(lag)}[/]")
    console.print(t)


@click.command()
@click.option("--controller", envvar="TINYSTREAM_CONTROLLER_URL", default="http://127.0.0.1:9091", show_default=True,
              help="Controller API URL (env TINYSTREAM_CONTROLLER_URL).")
@click.option("--controller-token-file", type=click.Path(dir_okay=False, exists=True), default=None,
              envvar="TINYSTREAM_CONTROLLER_TOKEN_FILE",
              help="A controller API token (tinystream token --admin ...); the image is not public.")
@click.option("--controller-ca", type=click.Path(dir_okay=False, exists=True), default=None,
              envvar="TINYSTREAM_CONTROLLER_CA",
              help="The CA of an https controller (PEM), as brokers' controller.ssl.truststore.location.")
@click.option("--broker-admin", "broker_admin", multiple=True, metavar="ID=URL",
              help="A broker's admin HTTP URL (repeatable), for offsets, sizes, groups and byte counters.")
@click.option("--admin-url-template", default=None, metavar="TEMPLATE",
              help="Derive broker admin URLs from the image, e.g. 'http://{host}:3200' (Kubernetes).")
@click.option("--dashboard", default=None, metavar="URL",
              help="Read a running dashboard's JSON API instead (it knows every broker).")
@click.option("--dashboard-token-file", type=click.Path(dir_okay=False, exists=True), default=None,
              envvar="TINYSTREAM_DASHBOARD_TOKEN_FILE",
              help="The dashboard's login token (the operator's <release>-dashboard-login Secret).")
@click.option("--admin-token-file", type=click.Path(dir_okay=False, exists=True), default=None,
              envvar="TINYSTREAM_ADMIN_TOKEN_FILE", help="The brokers' admin HTTP token (admin.token.file).")
@click.option("--internal", is_flag=True, help="Show internal topics (__consumer_offsets) too.")
@click.option("--json", "as_json", is_flag=True, help="Print the views as JSON.")
def status(controller: str, controller_token_file: str | None, controller_ca: str | None,
           broker_admin: tuple[str, ...], admin_url_template: str | None, dashboard: str | None,
           dashboard_token_file: str | None, admin_token_file: str | None, internal: bool, as_json: bool) -> None:
    """The cluster at a glance: brokers, partitions, consumer groups (the dashboard, in a terminal)."""
    from tinystream.controller_auth import read_secret

    token = read_secret(controller_token_file) if controller_token_file else None
    admin_token = read_secret(admin_token_file) if admin_token_file else None
    try:
        if dashboard:
            data = _from_dashboard(dashboard, read_secret(dashboard_token_file) if dashboard_token_file else None)
        else:
            data = _from_controller(controller, token, broker_admin, admin_url_template, controller_ca, admin_token)
    except OSError as exc:
        raise click.ClickException(f"cannot read {dashboard or controller}: {exc}") from None
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    render(data, Console(highlight=False))
    if not data["overview"]["controller"]["up"]:
        raise SystemExit(1)
