"""Topic configs as the controller sees them: Kafka names, light validation.

The controller stores a topic's config dict as given (JSON scalars, Kafka's
dotted names) and serves it in the metadata image; brokers interpret it.
Like Kafka's CreateTopics / IncrementalAlterConfigs it refuses unknown names
and values of the wrong type (INVALID_CONFIG), so a typo in a Topic resource
fails loudly instead of being ignored. The controller itself reads only
`unclean.leader.election.enable`. `tinystream.value.schema` (TinyStream's own
key: a JSON Schema for record values, enforced by partition leaders) is
checked to be a valid schema here too, so a Topic resource with a bad schema
is refused at the controller rather than on every produce.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import jsonschema
from jsonschema.exceptions import SchemaError

from tinystream.operator.controller.errors import ControllerError

ConfigValue = str | int | float | bool

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
VALUE_SCHEMA = "tinystream.value.schema"  # same name as tinystream.broker.topics.value_schema.SCHEMA_CONFIG


class _Kind:
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"
    JSON_SCHEMA = "JSON Schema"


# Kafka's TopicConfig names and types (the subset Kafka 3.x/4.x documents).
TOPIC_CONFIGS: dict[str, str] = {
    "cleanup.policy": _Kind.LIST,
    "compression.type": _Kind.STRING,
    "delete.retention.ms": _Kind.LONG,
    "file.delete.delay.ms": _Kind.LONG,
    "flush.messages": _Kind.LONG,
    "flush.ms": _Kind.LONG,
    "follower.replication.throttled.replicas": _Kind.LIST,
    "index.interval.bytes": _Kind.LONG,
    "leader.replication.throttled.replicas": _Kind.LIST,
    "local.retention.bytes": _Kind.LONG,
    "local.retention.ms": _Kind.LONG,
    "max.compaction.lag.ms": _Kind.LONG,
    "max.message.bytes": _Kind.LONG,
    "message.downconversion.enable": _Kind.BOOLEAN,
    "message.format.version": _Kind.STRING,
    "message.timestamp.after.max.ms": _Kind.LONG,
    "message.timestamp.before.max.ms": _Kind.LONG,
    "message.timestamp.difference.max.ms": _Kind.LONG,
    "message.timestamp.type": _Kind.STRING,
    "min.cleanable.dirty.ratio": _Kind.DOUBLE,
    "min.compaction.lag.ms": _Kind.LONG,
    "min.insync.replicas": _Kind.LONG,
    "preallocate": _Kind.BOOLEAN,
    "remote.storage.enable": _Kind.BOOLEAN,
    "retention.bytes": _Kind.LONG,
    "retention.ms": _Kind.LONG,
    "segment.bytes": _Kind.LONG,
    "segment.index.bytes": _Kind.LONG,
    "segment.jitter.ms": _Kind.LONG,
    "segment.ms": _Kind.LONG,
    UNCLEAN_LEADER_ELECTION_ENABLE: _Kind.BOOLEAN,
    VALUE_SCHEMA: _Kind.JSON_SCHEMA,
}


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def schema_error(text: object) -> str | None:
    """Why `text` is not a JSON Schema document (Draft 2020-12 unless it says `$schema`), or None."""
    if not isinstance(text, str):
        return "is not a string"
    try:
        schema = json.loads(text)
    except ValueError as exc:
        return f"is not a JSON document: {exc}"
    if not isinstance(schema, (dict, bool)):
        return "is not a JSON Schema (an object or a boolean)"
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        return f"is not a valid JSON Schema at {where}: {exc.message}"
    return None


def _valid(kind: str, value: object) -> bool:
    if kind == _Kind.BOOLEAN:
        return _as_bool(value) is not None
    if kind == _Kind.LONG:
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return True
        return isinstance(value, str) and value.strip().lstrip("-").isdigit()
    if kind == _Kind.DOUBLE:
        if isinstance(value, bool):
            return False
        if isinstance(value, (int, float)):
            return True
        try:
            float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return True
    return isinstance(value, str)


def config_error(config: Mapping[str, object], *, allow_deletes: bool = False) -> tuple[ControllerError, str] | None:
    """Why `config` is invalid (INVALID_CONFIG and a message), or None.

    With `allow_deletes`, a None value (IncrementalAlterConfigs' DELETE) is allowed.
    """
    for key, value in config.items():
        if not isinstance(key, str) or key not in TOPIC_CONFIGS:
            return ControllerError.INVALID_CONFIG, f"unknown topic config {key!r}"
        if value is None:
            if allow_deletes:
                continue
            return ControllerError.INVALID_CONFIG, f"topic config {key!r} has no value"
        if TOPIC_CONFIGS[key] == _Kind.JSON_SCHEMA:
            if (why := schema_error(value)) is not None:
                return ControllerError.INVALID_CONFIG, f"topic config {key!r} {why}"
            continue
        if not _valid(TOPIC_CONFIGS[key], value):
            return ControllerError.INVALID_CONFIG, f"topic config {key!r}: {value!r} is not a valid {TOPIC_CONFIGS[key]}"
    if "min.insync.replicas" in config and config["min.insync.replicas"] is not None:
        if int(str(config["min.insync.replicas"])) < 1:  # validated above as an int
            return ControllerError.INVALID_CONFIG, "min.insync.replicas must be at least 1"
    return None


def unclean_election_enabled(config: Mapping[str, object], *, cluster_default: bool) -> bool:
    """The topic's `unclean.leader.election.enable`, else the cluster default."""
    value = config.get(UNCLEAN_LEADER_ELECTION_ENABLE)
    parsed = _as_bool(value)
    return cluster_default if parsed is None else parsed
