"""Click options generated from a component's settings, feeding the flags layer.

Every key of the component becomes a flag (`log.segment.bytes` ->
`--log-segment-bytes`), plus `--set KEY=VALUE` for any key by its Kafka name
and `--config FILE` for the user file layer. Values stay strings here: types
and ranges are checked once, by the settings model, so a bad flag gets the
same message as a bad env variable or file entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from tinystream.config import COMPONENTS, ConfigError, EffectiveConfig, load_settings


def flag_name(key: str) -> str:
    return "--" + key.replace(".", "-").replace("_", "-")


def param_name(key: str) -> str:
    return "opt_" + key.replace(".", "_").replace("-", "_")


def settings_options(component: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command with --config, --set and one flag per setting."""
    model = COMPONENTS[component]

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for key in reversed(list(model.keys())):
            func = click.option(flag_name(key), param_name(key), default=None, metavar="VALUE",
                                help=f"Sets {key}.")(func)
        func = click.option("--set", "opt_overrides", multiple=True, metavar="KEY=VALUE",
                            help="Any setting by its Kafka name (repeatable).")(func)
        func = click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                            help="User config file (TOML or INI).")(func)
        return func

    return decorate


def pop_settings(component: str, kwargs: dict[str, Any], **fixed: object) -> EffectiveConfig:
    """Take the generated options out of kwargs and load the effective settings.

    `fixed` are flags a command sets itself (e.g. `dev` choosing ports); an
    explicit user flag still wins over them.
    """
    model = COMPONENTS[component]
    flags: dict[str, object] = {key: value for key, value in fixed.items() if value is not None}
    for item in kwargs.pop("opt_overrides", ()) or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise click.UsageError(f"--set expects KEY=VALUE, got {item!r}")
        flags[key.strip()] = value.strip()
    for key in model.keys():
        value = kwargs.pop(param_name(key), None)
        if value is not None:
            flags[key] = value
    config_file = kwargs.pop("config_file", None)
    try:
        return load_settings(component, flags=flags, config_file=config_file)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
