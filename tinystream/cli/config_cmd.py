"""`tinystream config show`: the effective settings and the layer of each."""

from __future__ import annotations

from typing import Any

import click
import orjson

from tinystream.cli.settings_options import pop_settings
from tinystream.config import COMPONENTS


@click.group()
def config() -> None:
    """Inspect configuration."""


@config.command("show")
@click.option("--component", type=click.Choice(sorted(COMPONENTS)), default="broker", show_default=True)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="User config file (TOML or INI).")
@click.option("--set", "opt_overrides", multiple=True, metavar="KEY=VALUE", help="A flag-layer value.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def show(component: str, as_json: bool, **kwargs: Any) -> None:
    """Print effective settings and where each came from (flag, env, file, default)."""
    effective = pop_settings(component, kwargs)
    rows = effective.rows()
    if as_json:
        payload = {key: {"value": value, "source": source} for key, value, source in rows}
        click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
        return
    width = max(len(key) for key, _, _ in rows)
    vwidth = max(len(repr(value)) for _, value, _ in rows)
    for key, value, source in rows:
        click.echo(f"{key:<{width}}  {value!r:<{vwidth}}  {source}")
