"""DescribeConfigs / IncrementalAlterConfigs for BROKER (4) and BROKER_LOGGER (8) resources.

BROKER, as Kafka's ConfigHelper: resource name "" is the cluster default and
describes only the values set at that level; this broker's id describes every
broker setting with its source (DYNAMIC_BROKER_CONFIG > DYNAMIC_DEFAULT_BROKER_CONFIG
> STATIC_BROKER_CONFIG > DEFAULT_CONFIG) and, with synonyms, each level's value.
SET / DELETE change the keys in broker_configs/dynamic.py live (control/broker_configs.py
keeps and applies them); any other key is refused. A standalone broker takes only ""
and its own id. Under a controller any broker id may be named (as in KRaft): the
change is checked here (over this broker's static settings when it is "" or this
broker, over the defaults for another broker), then forwarded to the controller,
which puts it in its image; every broker applies the default and its own layer
from there, and answers DescribeConfigs from them.

BROKER_LOGGER (KIP-412; Kafka's ConfigAdminManager.validateLogLevelConfigs):
the resource name is this broker's id; entries are loggers and their levels
(control/broker_loggers.py). SET needs a known logger and a Kafka level name
(INVALID_CONFIG otherwise); DELETE makes a logger inherit again (the root
logger's cannot be removed: INVALID_REQUEST); APPEND / SUBTRACT are
INVALID_REQUEST. Every change is checked before any is applied.

Authorization is configs.py's: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster.
"""

from __future__ import annotations

from typing import Any

from tinystream.broker.broker_configs.dynamic import DYNAMIC_KEYS, Change, Level, Op, Refused
from tinystream.broker.broker_configs.log_levels import ROOT_LOGGER, UnknownLevel, python_level
from tinystream.broker.control import broker_loggers
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared.context import BrokerContext
from tinystream.broker.topics.config import ConfigSource, ConfigType, DescribedConfig
from tinystream.config.broker_configs import altered, resource_problem

Result = tuple[ErrorCode, str | None]

_SOURCE = {Level.BROKER: ConfigSource.DYNAMIC_BROKER_CONFIG, Level.DEFAULT: ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG}


def dynamic_sources(ctx: BrokerContext) -> dict[str, ConfigSource]:
    """Broker key -> the dynamic level that sets it on this broker (for topic configs' synonyms)."""
    if ctx.broker_configs is None:
        return {}
    layers = ctx.broker_configs.layers
    return {key: _SOURCE[level] for key in DYNAMIC_KEYS if (level := layers.level_of(key)) is not None}


def read_only(name: str) -> bool:
    return name not in DYNAMIC_KEYS


def _typed(value: object) -> tuple[str | None, ConfigType]:
    if isinstance(value, bool):
        return ("true" if value else "false"), ConfigType.BOOLEAN
    if isinstance(value, int):
        return str(value), ConfigType.LONG
    return (None if value is None else str(value)), ConfigType.STRING


# -- BROKER -----------------------------------------------------------------------------------------------------


def describe_broker(ctx: BrokerContext, name: str) -> tuple[ErrorCode, str | None, list[DescribedConfig]]:
    me = str(ctx.cluster.broker_id)
    if name not in ("", me):
        return ErrorCode.invalid_request, f"this is broker {me}, not {name!r}", []
    static = ctx.settings
    configs = ctx.broker_configs
    default = dict(configs.layers.default) if configs is not None else {}
    own = dict(configs.layers.broker) if configs is not None else {}
    effective = configs.settings if configs is not None else static
    out = []
    for key, attr in sorted(type(static).keys().items()):
        if name == "" and key not in default:
            continue  # Kafka: the default resource holds only what was set at the default level
        static_text, kind = _typed(getattr(static, attr))
        levels: list[tuple[str, str | None, ConfigSource]] = []
        if name and key in own:
            levels.append((key, own[key], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if key in default:
            levels.append((key, default[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if attr in static.model_fields_set:
            levels.append((key, static_text, ConfigSource.STATIC_BROKER_CONFIG))
        field = type(static).model_fields.get(attr)
        levels.append((key, _typed(field.default)[0] if field is not None else static_text,
                       ConfigSource.DEFAULT_CONFIG))
        # The id's value is the effective one (parsed: " 60000" -> "60000"); the default resource shows its own.
        value = default[key] if name == "" else _typed(getattr(effective, attr))[0]
        out.append(DescribedConfig(key, value, levels[0][2], kind, "", tuple(levels)))
    return ErrorCode.none, None, out


async def alter_broker(ctx: BrokerContext, resource: Any, validate_only: bool) -> Result:
    me = str(ctx.cluster.broker_id)
    changes = [Change(c.config_operation, c.name, c.value) for c in resource.configs]
    only_static_deletes = all(c.op == Op.DELETE and c.key not in DYNAMIC_KEYS for c in changes)
    if only_static_deletes and (ctx.forwarding is not None or resource.resource_name not in ("", me)):
        # Nothing but a dynamic key can be set, so none of these is set anywhere: Kafka answers such a delete
        # with success, and kafka-reassign-partitions.sh --verify sends one per broker (replication throttles).
        return ErrorCode.none, None
    if ctx.forwarding is not None and ctx.broker_configs is not None:
        return await _forward(ctx, resource.resource_name, changes, validate_only)
    if resource.resource_name not in ("", me):
        if only_static_deletes:
            # Nothing but a dynamic key can be set, so none of these is set anywhere: Kafka answers such a delete
            # with success, and kafka-reassign-partitions.sh --verify sends one per broker (replication throttles).
            return ErrorCode.none, None
        return ErrorCode.invalid_request, f"this is broker {me}, not {resource.resource_name!r}: send it there"
    if ctx.broker_configs is None:
        if only_static_deletes:
            return ErrorCode.none, None
        return ErrorCode.invalid_request, "broker configs are static on this broker; set them at start-up"
    level = Level.DEFAULT if resource.resource_name == "" else Level.BROKER
    try:
        ctx.broker_configs.alter(level, changes, validate_only=validate_only)
    except Refused as exc:
        return (ErrorCode.invalid_config if exc.invalid_config else ErrorCode.invalid_request), str(exc)
    return ErrorCode.none, None


async def _forward(ctx: BrokerContext, name: str, changes: list[Change], validate_only: bool) -> Result:
    """Under a controller: checked here first (Kafka's broker refuses what its config would), then the
    controller's, which changes the image all or nothing."""
    assert ctx.forwarding is not None and ctx.broker_configs is not None
    problem = resource_problem(name)
    if problem is not None:
        return ErrorCode.invalid_request, problem
    try:
        if name in ("", str(ctx.cluster.broker_id)):
            level = Level.DEFAULT if name == "" else Level.BROKER
            ctx.broker_configs.layers.alter(level, changes).effective(ctx.broker_configs.static)
        else:
            altered({}, changes)  # another broker's static settings are not known here: over the defaults
    except Refused as exc:
        return (ErrorCode.invalid_config if exc.invalid_config else ErrorCode.invalid_request), str(exc)
    return await ctx.forwarding.alter_broker_configs(name, changes, validate_only=validate_only)


# -- BROKER_LOGGER ----------------------------------------------------------------------------------------------


def describe_loggers(ctx: BrokerContext, name: str) -> tuple[ErrorCode, str | None, list[DescribedConfig]]:
    refused = _not_me(ctx, name)
    if refused:
        return refused[0], refused[1], []
    return ErrorCode.none, None, [
        DescribedConfig(logger, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, ConfigType.STRING, "", ())
        for logger, level in broker_loggers.levels().items()
    ]


def alter_loggers(ctx: BrokerContext, resource: Any, validate_only: bool) -> Result:
    refused = _not_me(ctx, resource.resource_name)
    if refused:
        return refused
    names = [c.name for c in resource.configs]
    if len(names) != len(set(names)):
        return ErrorCode.invalid_request, "a logger is named twice"
    known = set(broker_loggers.logger_names())
    for change in resource.configs:
        op, logger = change.config_operation, change.name
        if op in (Op.APPEND, Op.SUBTRACT):
            return ErrorCode.invalid_request, f"{Op(op).name} is not allowed for the BROKER_LOGGER resource"
        if op not in (Op.SET, Op.DELETE):
            return ErrorCode.invalid_request, f"unknown config operation {op}"
        if logger not in known:
            return ErrorCode.invalid_config, f"logger {logger!r} does not exist"
        if op == Op.SET:
            try:
                python_level(change.value or "")
            except UnknownLevel as exc:
                return ErrorCode.invalid_config, f"cannot set the log level of {logger}: {exc}"
        elif logger == ROOT_LOGGER:
            return ErrorCode.invalid_request, "removing the log level of the root logger is not allowed"
    if not validate_only:
        for change in resource.configs:
            if change.config_operation == Op.SET:
                broker_loggers.set_level(change.name, change.value)
            else:
                broker_loggers.unset_level(change.name)
    return ErrorCode.none, None


def _not_me(ctx: BrokerContext, name: str) -> Result | None:
    me = str(ctx.cluster.broker_id)
    if name != me:
        return ErrorCode.invalid_request, f"a broker logger resource names this broker ({me}), not {name!r}"
    return None
