"""Dynamic broker configs: which keys change live and the checks of a change, shared by broker and controller.

Kafka keeps dynamic broker configs at two levels (DynamicBrokerConfig): one
broker's (resource name "1") over the cluster default (resource name ""),
both over server.properties. A key is dynamic here only when the broker reads
it at use time: the `log.*` defaults behind topic configs (and
message.max.bytes, min.insync.replicas), which the topic manager turns into
every open log's LogConfig again when they change, max.connections /
max.connections.per.ip, which admission checks at each new connection, and
the replication throttles' rates, read at each follower fetch. Kafka too lets
each of these change live. Any other broker key is refused (INVALID_REQUEST
for a known static setting, INVALID_CONFIG for an unknown name or a bad
value) rather than accepted and ignored.

A standalone broker checks a change with these before it writes its file
(broker/broker_configs/dynamic.py), the controller before it puts it in its
image (operator/controller/broker_configs.py): one rule. The controller knows
no broker's server.properties, so it checks values over BrokerSettings'
defaults; a broker checks them over its own static settings as well.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import ValidationError

from tinystream.config.settings import BrokerSettings
from tinystream.config.topic_configs import TOPIC_CONFIGS, AppliedBy

#: Kafka key -> BrokerSettings attribute, for every key that changes live: the topic defaults every
#: LogConfig is made from, and the connection limits admission reads at each new connection (Kafka
#: changes both live too: DynamicLogConfig, DynamicListenerConfig / ConnectionQuotas).
DYNAMIC_KEYS: Mapping[str, str] = MappingProxyType({
    **{key.broker_key: key.broker_setting
       for key in TOPIC_CONFIGS.values()
       if key.applied_by is AppliedBy.LOG and key.broker_setting and key.broker_key},
    "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    # Replication throttles (KIP-73): the replica manager and the fetcher read them at each fetch.
    "leader.replication.throttled.rate": "leader_replication_throttled_rate",
    "follower.replication.throttled.rate": "follower_replication_throttled_rate",
})

#: Kafka's throttle of moves between log dirs of one broker: there is no such move here, so never accepted.
THROTTLE_KEYS = frozenset({"replica.alter.log.dirs.io.max.bytes.per.second"})


class Op(enum.IntEnum):
    """IncrementalAlterConfigs' config_operation (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class Change:
    op: int
    key: str
    value: str | None = None


class Refused(ValueError):
    """A change Kafka would refuse; `invalid_config` tells INVALID_CONFIG from INVALID_REQUEST."""

    def __init__(self, message: str, *, invalid_config: bool) -> None:
        super().__init__(message)
        self.invalid_config = invalid_config


def resource_problem(name: str) -> str | None:
    """Why a BROKER resource name is not "" (the cluster default) or a broker id, or None (Kafka's
    ControllerConfigurationValidator answers such a name with INVALID_REQUEST)."""
    if name == "" or (name.isascii() and name.isdigit() and str(int(name)) == name):
        return None
    return f"invalid broker name {name!r}: the cluster default is \"\", a broker is its id"


def fold(values: Mapping[str, str], changes: Iterable[Change]) -> dict[str, str]:
    """One level's values after `changes`; raises Refused for the first change Kafka would refuse (a key
    named twice, a key that is not dynamic, APPEND / SUBTRACT). Values are checked by `validated`."""
    changes = list(changes)
    keys = [c.key for c in changes]
    if len(keys) != len(set(keys)):
        raise Refused("a config is named twice", invalid_config=False)
    result = dict(values)
    for change in changes:
        if change.op == Op.DELETE:
            result.pop(change.key, None)  # deleting what is not set succeeds, as in Kafka
        elif change.op == Op.SET:
            check_settable(change)
            result[change.key] = change.value  # type: ignore[assignment]
        elif change.op in (Op.APPEND, Op.SUBTRACT):
            raise Refused(f"{change.key}: APPEND and SUBTRACT do not apply to broker configs here; use SET",
                          invalid_config=False)
        else:
            raise Refused(f"unknown config operation {change.op}", invalid_config=False)
    return result


def altered(values: Mapping[str, str], changes: Iterable[Change]) -> dict[str, str]:
    """`fold`, and the values SET checked over BrokerSettings' defaults (what the controller can check: it
    knows no broker's static settings)."""
    changes = list(changes)
    result = fold(values, changes)
    validated(BrokerSettings(), {c.key: result[c.key] for c in changes if c.key in result})
    return result


def check_settable(change: Change) -> None:
    """Raises Refused unless `change` SETs a dynamic key to some value."""
    if change.value is None:
        raise Refused(f"{change.key}: SET needs a value", invalid_config=True)
    if change.key in DYNAMIC_KEYS:
        return
    if change.key in THROTTLE_KEYS:
        raise Refused(f"{change.key}: TinyStream moves no replica between log dirs, so nothing applies it",
                      invalid_config=False)
    if BrokerSettings.accepts(change.key):
        raise Refused(f"{change.key} cannot change while the broker runs; set it at start-up (dynamic broker "
                      f"configs: {', '.join(sorted(DYNAMIC_KEYS))})", invalid_config=False)
    raise Refused(f"unknown broker config {change.key!r}", invalid_config=True)


def layer_problem(values: object) -> str | None:
    """Why a stored layer is not {dynamic key: text}, or None (a file or an image being read)."""
    if not isinstance(values, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in values.items()):
        return "must map config names to strings"
    unknown = set(values) - set(DYNAMIC_KEYS)
    if unknown:
        return f"{sorted(unknown)} are not dynamic broker configs"
    return None


def validated(static: BrokerSettings, values: Mapping[str, str]) -> BrokerSettings:
    """`static` with `values` (Kafka keys, text) on top; raises Refused (INVALID_CONFIG) naming what does not parse."""
    if not values:
        return static
    try:
        return type(static).model_validate({**static.model_dump(by_alias=True), **values})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise Refused(f"invalid broker config value: {problems}", invalid_config=True) from None
