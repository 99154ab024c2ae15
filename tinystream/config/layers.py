"""Merge the four configuration layers and remember where each value came from.

Highest first: command-line flags, environment variables `TINYSTREAM_<NAME>`
(the Kafka key upper-cased, dots as underscores: `TINYSTREAM_LOG_SEGMENT_BYTES`),
a user file given with `--config` (TOML or INI), and the packaged defaults,
which are the defaults of the component's pydantic model (settings.py).

Parsing and type checks are pydantic's; this module only reads the layers,
refuses unknown keys, and turns a validation failure into one message that
names the key, the value and the layer it came from.

User files: TOML with a table per component (`[broker]`), keys either quoted
(`"log.segment.bytes" = 1048576`) or as nested tables; or INI with a
`[broker]` section. A file with no component section applies as a whole to
the component being loaded (like Kafka's server.properties).
"""

from __future__ import annotations

import configparser
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from tinystream.config.settings import COMPONENTS, ComponentSettings

ENV_PREFIX = "TINYSTREAM_"
DEFAULT_LAYER = "default"


class ConfigError(ValueError):
    """A setting that cannot be used; the message names key, value and layer."""


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer's raw values by public key, and a label per key for messages."""

    name: str
    values: dict[str, object]
    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class EffectiveConfig:
    """Validated settings plus the layer each key's value came from."""

    component: str
    settings: ComponentSettings
    sources: dict[str, str]

    def rows(self) -> list[tuple[str, object, str]]:
        public = self.settings.as_public()
        return [(key, public[key], self.sources.get(key, DEFAULT_LAYER)) for key in sorted(public)]


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_")


def flag_layer(flags: Mapping[str, object]) -> Layer:
    values = {key: value for key, value in flags.items() if value is not None}
    return Layer("flags", values, {key: f"flag --{key.replace('.', '-')}" for key in values})


def env_layer(component: str, environ: Mapping[str, str]) -> Layer:
    """Only variables naming one of this component's keys are read.

    The environment is shared by every component (and by other tools), so a
    variable that is a key of another component, or no key at all, is ignored
    rather than refused.
    """
    model = COMPONENTS[component]
    values: dict[str, object] = {}
    labels: dict[str, str] = {}
    names = {key: env_name(key) for key in model.keys()}
    names.update(model.env_keys(environ))  # the broker's listener.name.<listener>.<setting> keys
    for key, name in names.items():
        if name in environ:
            values[key] = _none_if_empty(environ[name])
            labels[key] = f"env {name}"
    return Layer("env", values, labels)


def file_layer(component: str, path: str | Path) -> Layer:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} not found (layer: file)")
    try:
        if path.suffix == ".toml":
            raw = _read_toml(path)
        else:
            raw = _read_ini(path)
    except (tomllib.TOMLDecodeError, configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be parsed: {exc}") from exc
    sections = {name for name in raw if isinstance(raw[name], dict) and name in COMPONENTS}
    if sections:
        stray = sorted(set(raw) - sections)
        if stray:
            raise ConfigError(
                f"config file {str(path)!r}: keys {stray} are outside any component table "
                f"(use [{component}] and the others: {sorted(COMPONENTS)})"
            )
        section = raw.get(component, {})
        if not isinstance(section, Mapping):
            raise ConfigError(f"config file {str(path)!r}: [{component}] must be a table of settings, not {section!r}")
        values = _flatten(section)
        where = f"file {path} [{component}]"
    else:
        values = _flatten(raw)
        where = f"file {path}"
    return Layer("file", values, {key: where for key in values})


def load_settings(
    component: str,
    *,
    flags: Mapping[str, object] | None = None,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> EffectiveConfig:
    """Build a component's effective settings from the four layers.

    Raises ConfigError with one message naming every bad key, its value and
    its layer.
    """
    if component not in COMPONENTS:
        raise ConfigError(f"unknown component {component!r}; choose one of {sorted(COMPONENTS)}")
    model = COMPONENTS[component]
    layers = [flag_layer(flags or {}), env_layer(component, os.environ if environ is None else environ)]
    if config_file is not None:
        layers.append(file_layer(component, config_file))

    merged: dict[str, object] = {}
    sources: dict[str, str] = {}
    problems: list[str] = []
    for layer in reversed(layers):  # lowest first, so higher layers overwrite
        for key, value in layer.values.items():
            if not model.accepts(key):
                problems.append(f"unknown key {key!r} = {value!r} from {layer.labels[key]}")
                continue
            merged[key] = value
            sources[key] = layer.labels[key]
    if problems:
        raise ConfigError(_message(component, problems))
    try:
        settings = model.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_message(component, _describe(exc, merged, sources))) from None
    return EffectiveConfig(component, settings, sources)


def _describe(exc: ValidationError, merged: dict[str, object], sources: dict[str, str]) -> list[str]:
    lines = []
    for error in exc.errors():
        key = str(error["loc"][0]) if error["loc"] else "?"
        value = merged.get(key, error.get("input"))
        layer = sources.get(key, DEFAULT_LAYER)
        lines.append(f"invalid value {value!r} for {key!r} from {layer}: {error['msg']}")
    return lines


def _message(component: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"{component} config: {problems[0]}"
    return f"{component} config has {len(problems)} problems:\n  " + "\n  ".join(problems)


def _read_toml(path: Path) -> dict[str, object]:
    with path.open("rb") as handle:
        return tomllib.load(handle)


def _read_ini(path: Path) -> dict[str, object]:
    text = path.read_text(encoding="utf-8")
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=", ":"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep Kafka keys' case (the documented way)
    if not text.lstrip().startswith("["):
        text = "[__whole_file__]\n" + text
    parser.read_string(text, source=str(path))
    if parser.sections() == ["__whole_file__"]:
        return dict(parser["__whole_file__"])
    return {name: dict(parser[name]) for name in parser.sections()}


def _flatten(table: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """TOML nested tables ({"log": {"segment": {"bytes": 1}}}) to dotted keys."""
    flat: dict[str, object] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _none_if_empty(value: str) -> str | None:
    return None if value == "" else value
