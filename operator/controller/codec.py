"""Plain-dict codec for the core's frozen dataclasses.

The local driver writes the state to a JSON file and the operator to a CR
status; brokers receive the image and send events as JSON. Every record and
message here is a frozen dataclass whose field types are few (int, str, bool,
float, None, enums, tuples, str-keyed mappings, nested dataclasses), so one
codec driven by the type hints serves them all: `to_plain` produces only
dicts, lists, str, int, float, bool and None; `from_plain` checks each value
against its hint and names the path of the first bad one in a
StateFormatError. bool is never accepted where an int is meant (JSON `true`
is not broker 1).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

from tinystream.operator.controller.errors import StateFormatError

# Version of every dict shape produced here (state, image, events, actions).
# Bump it on an incompatible change and teach `ControllerState.from_dict` to
# upgrade the old shape.
SCHEMA_VERSION = 1


def check_schema_version(data: Any, *, what: str) -> None:
    if not isinstance(data, Mapping):
        raise StateFormatError(f"$: expected an object for {what}, got {type(data).__name__}")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StateFormatError(f"$.schema_version: {what} has schema version {version!r}; this code reads {SCHEMA_VERSION}")


#: Field metadata: leave the field out while it has its default, so a state written by this version
#: stays readable by the previous one (which refuses unknown fields) until the field is used.
OMIT_DEFAULT = {"omit_default": True}


def to_plain(value: Any) -> Any:
    """A JSON-able copy of `value` (dataclasses become dicts keyed by field)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get("omit_default") and getattr(value, f.name) == f.default)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [to_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {name: hint for name, hint in typing.get_type_hints(cls).items() if name in names}


def from_plain(cls: type, data: Any, *, path: str = "$", ignore: frozenset[str] = frozenset()) -> Any:
    """Build dataclass `cls` from a plain dict; unknown keys are refused."""
    if not isinstance(data, Mapping):
        raise StateFormatError(f"{path}: expected an object for {cls.__name__}, got {type(data).__name__}")
    hints = _hints(cls)
    unknown = sorted(set(data) - set(hints) - ignore)
    if unknown:
        raise StateFormatError(f"{path}: unknown field(s) {unknown} for {cls.__name__}")
    kwargs = {name: convert(hints[name], data[name], path=f"{path}.{name}") for name in hints if name in data}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"{path}: {cls.__name__}: {exc}") from exc


def convert(hint: Any, value: Any, *, path: str) -> Any:
    """Check `value` against the type hint and build the typed value."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(arg, value, path=path)
            except StateFormatError:
                continue
        raise StateFormatError(f"{path}: {value!r} is not a {hint}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise StateFormatError(f"{path}: expected a list, got {type(value).__name__}")
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(args[0], v, path=f"{path}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise StateFormatError(f"{path}: expected {len(args)} items, got {len(value)}")
        return tuple(convert(a, v, path=f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise StateFormatError(f"{path}: expected an object, got {type(value).__name__}")
        key_hint, value_hint = typing.get_args(hint)
        if key_hint is not str:
            raise StateFormatError(f"{path}: only str-keyed mappings are plain")  # pragma: no cover
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise StateFormatError(f"{path}: key {k!r} is not a string")
            out[k] = convert(value_hint, v, path=f"{path}.{k}")
        return out
    if hint is Any:
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise StateFormatError(f"{path}: {value!r} is not a {hint.__name__}") from None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_plain(hint, value, path=path)
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif hint is type(None):
        if value is None:
            return None
    else:  # pragma: no cover - a hint this codec was never taught
        raise StateFormatError(f"{path}: cannot decode type {hint!r}")
    raise StateFormatError(f"{path}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


def frozen_mapping(value: Mapping[Any, Any]) -> types.MappingProxyType[Any, Any]:
    """A read-only private copy, so a shared image cannot be mutated by a caller."""
    return types.MappingProxyType(dict(value))
