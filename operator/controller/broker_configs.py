"""Dynamic broker configs in the image: an AlterBrokerConfigs applied to the image's layers. Pure.

The checks are `tinystream.config.broker_configs` (a standalone broker uses the
same ones): a key that is not dynamic or a value that does not parse is refused
with the reason, INVALID_REQUEST or INVALID_CONFIG as Kafka answers, and
nothing of the request is applied. Values are checked over BrokerSettings'
defaults: the controller knows no broker's server.properties (each broker
checks them over its own before forwarding, and skips, logged, what its own
settings refuse when it applies the image).
"""

from __future__ import annotations

from collections.abc import Sequence

from tinystream.config.broker_configs import Change, Op, Refused, altered, resource_problem
from tinystream.operator.controller.events import BrokerConfigAlteration
from tinystream.operator.controller.image import BrokerConfigsRecord


def resource_label(resource: str) -> str:
    return "the cluster default" if resource == "" else f"broker {resource}"


def fold(current: BrokerConfigsRecord, alterations: Sequence[BrokerConfigAlteration]) -> BrokerConfigsRecord:
    """The layers after the alterations; raises Refused (the first reason, naming the resource) and then
    nothing of them applies."""
    default = dict(current.default)
    brokers = {b: dict(v) for b, v in current.brokers.items()}
    seen: set[str] = set()
    for a in alterations:
        label = resource_label(a.resource)
        problem = resource_problem(a.resource)
        if problem is not None:
            raise Refused(problem, invalid_config=False)
        if a.resource in seen:
            raise Refused(f"{label} is named more than once", invalid_config=False)
        seen.add(a.resource)
        try:
            changes = [Change(_op(o.op), o.key, o.value) for o in a.ops]
            values = altered(default if a.resource == "" else brokers.get(a.resource, {}), changes)
        except Refused as exc:
            raise Refused(f"{label}: {exc}", invalid_config=exc.invalid_config) from None
        if a.resource == "":
            default = values
        else:
            brokers[a.resource] = values
    return BrokerConfigsRecord(default=default, brokers=brokers)


def _op(name: str) -> int:
    try:
        return Op[name]
    except KeyError:
        raise Refused(f"unknown config operation {name!r} (SET, DELETE, APPEND, SUBTRACT)",
                      invalid_config=False) from None
