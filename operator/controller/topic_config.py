"""Topic configs as the controller sees them: checked against the one table, stored as given.

The controller stores a topic's config dict as given (JSON scalars, Kafka's
dotted names) and serves it in the metadata image; brokers interpret it.
Like Kafka's CreateTopics / IncrementalAlterConfigs it refuses unknown names
and values of the wrong type or range (INVALID_CONFIG), with the same table
a broker uses (tinystream/config/topic_configs.py), so a typo in a Topic
resource fails loudly instead of being ignored. The controller itself reads only
`unclean.leader.election.enable`. `tinystream.value.schema` (TinyStream's own
key: a JSON Schema for record values, enforced by partition leaders) is
checked to be a valid schema here too, so a Topic resource with a bad schema
is refused at the controller rather than on every produce.
"""

from __future__ import annotations

from collections.abc import Mapping

from tinystream.config.topic_configs import (
    TOPIC_CONFIGS,
    UNCLEAN_LEADER_ELECTION_ENABLE,
    VALUE_SCHEMA,
    InvalidConfig,
    parse,
    schema_error,
)
from tinystream.operator.controller.errors import ControllerError

__all__ = ["TOPIC_CONFIGS", "UNCLEAN_LEADER_ELECTION_ENABLE", "VALUE_SCHEMA", "ConfigValue", "config_error",
           "schema_error", "unclean_election_enabled"]

ConfigValue = str | int | float | bool


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def config_error(config: Mapping[str, object], *, allow_deletes: bool = False) -> tuple[ControllerError, str] | None:
    """Why `config` is invalid (INVALID_CONFIG and a message), or None.

    Each key is checked against the one topic-config table (names, types,
    ranges), as a broker checks it. With `allow_deletes`, a None value
    (IncrementalAlterConfigs' DELETE) is allowed.
    """
    for key, value in config.items():
        if not isinstance(key, str) or key not in TOPIC_CONFIGS:
            return ControllerError.INVALID_CONFIG, f"unknown topic config {key!r}"
        if value is None:
            if allow_deletes:
                continue
            return ControllerError.INVALID_CONFIG, f"topic config {key!r} has no value"
        if key == VALUE_SCHEMA and (why := schema_error(value)) is not None:
            return ControllerError.INVALID_CONFIG, f"topic config {key!r} {why}"
        try:
            parse(key, value)
        except InvalidConfig as exc:
            return ControllerError.INVALID_CONFIG, f"topic config {exc}"
    return None


def unclean_election_enabled(config: Mapping[str, object], *, cluster_default: bool) -> bool:
    """The topic's `unclean.leader.election.enable`, else the cluster default."""
    value = config.get(UNCLEAN_LEADER_ELECTION_ENABLE)
    parsed = _as_bool(value)
    return cluster_default if parsed is None else parsed
