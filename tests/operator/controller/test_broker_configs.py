"""Dynamic broker configs in the controller's image: AlterBrokerConfigs sets, deletes, checks; the image keeps them."""

from __future__ import annotations

import json

import pytest
from controller_helpers import Cluster

from tinystream.config.broker_configs import Change, Op, Refused, altered, resource_problem
from tinystream.operator.controller import (
    AlterBrokerConfigs,
    BrokerConfigAlteration,
    BrokerConfigOp,
    BrokerConfigsChanged,
    BrokerConfigsRecord,
    ControllerError,
    MetadataImage,
    StateFormatError,
)
from tinystream.operator.controller.builder import ImageBuilder


def alter(*alterations: tuple[str, list[tuple[str, str, str | None]]]) -> AlterBrokerConfigs:
    return AlterBrokerConfigs(alterations=tuple(
        BrokerConfigAlteration(resource=resource, ops=tuple(BrokerConfigOp(key=k, op=op, value=v) for k, op, v in ops))
        for resource, ops in alterations))


def layers(c: Cluster) -> dict:
    return c.image.broker_configs.to_plain()


def test_set_the_default_and_one_broker_then_delete():
    c = Cluster()
    before = c.image.version
    d = c.apply(alter(("", [("log.retention.ms", "SET", "60000")]),
                      ("2", [("follower.replication.throttled.rate", "SET", "1048576")])))
    assert d.error is None and d.image.version == before + 1
    assert d.actions == (BrokerConfigsChanged(resources=("", "2")),)
    assert layers(c) == {"default": {"log.retention.ms": "60000"},
                         "brokers": {"2": {"follower.replication.throttled.rate": "1048576"}}}
    c.apply(alter(("2", [("follower.replication.throttled.rate", "DELETE", None)])))
    assert layers(c) == {"default": {"log.retention.ms": "60000"}, "brokers": {}}  # an empty layer goes
    c.apply(alter(("", [("log.retention.ms", "DELETE", None)])))
    assert not c.image.broker_configs and "broker_configs" not in c.image.to_dict()


@pytest.mark.parametrize(("alteration", "error", "fragment"), [
    (("", [("num.partitions", "SET", "3")]), ControllerError.INVALID_REQUEST, "cannot change while the broker runs"),
    (("", [("no.such.key", "SET", "3")]), ControllerError.INVALID_CONFIG, "unknown broker config 'no.such.key'"),
    (("1", [("log.retention.ms", "SET", "soon")]), ControllerError.INVALID_CONFIG, "invalid broker config value"),
    (("1", [("log.cleanup.policy", "APPEND", "compact")]), ControllerError.INVALID_REQUEST, "APPEND"),
    (("x", [("log.retention.ms", "SET", "1")]), ControllerError.INVALID_REQUEST, "invalid broker name 'x'"),
    (("", [("log.retention.ms", "SET", "1"), ("log.retention.ms", "DELETE", None)]),
     ControllerError.INVALID_REQUEST, "named twice"),
    (("", [("log.retention.ms", "RENAME", "1")]), ControllerError.INVALID_REQUEST, "unknown config operation"),
])
def test_a_bad_change_is_refused_with_the_reason_and_nothing_applies(alteration, error, fragment):
    c = Cluster()
    before = c.image
    d = c.apply(alter(("3", [("log.retention.ms", "SET", "1000")]), alteration), ok=False)  # the good one: neither
    assert d.error is error and fragment in (d.message or ""), d
    assert c.image == before


def test_the_same_resource_twice_is_refused():
    d = Cluster().apply(alter(("2", [("max.connections", "SET", "5")]), ("2", [("max.connections", "SET", "6")])),
                        ok=False)
    assert d.error is ControllerError.INVALID_REQUEST and "broker 2 is named more than once" in (d.message or "")


def test_the_image_round_trips_and_refuses_a_bad_layer_on_load():
    builder = ImageBuilder(MetadataImage.empty(cluster_id="c"))
    builder.set_broker_configs({"log.retention.ms": "5"}, {2: {"max.connections": "7"}, 3: {}})
    image = builder.finish()
    assert image is not None
    plain = json.loads(json.dumps(image.to_dict()))
    assert plain["broker_configs"] == {"default": {"log.retention.ms": "5"}, "brokers": {"2": {"max.connections": "7"}}}
    assert MetadataImage.from_dict(plain) == image
    for bad, fragment in [({"default": {"num.partitions": "3"}}, "not dynamic broker configs"),
                          ({"default": {"log.retention.ms": 5}}, "expected str"),
                          ({"brokers": {"two": {"max.connections": "7"}}}, "not a broker id"),
                          ({"colour": {}}, "colour")]:
        with pytest.raises(StateFormatError, match=fragment):
            MetadataImage.from_dict({**plain, "broker_configs": bad})


def test_the_builder_marks_no_change_when_the_layers_are_the_same():
    image = MetadataImage(version=3, cluster_id="c", broker_configs=BrokerConfigsRecord(default={"max.connections": "1"}))
    builder = ImageBuilder(image)
    builder.set_broker_configs({"max.connections": "1"}, {})
    assert builder.finish() is None


def test_the_shared_checks():
    assert altered({"max.connections": "1"}, [Change(Op.SET, "log.retention.ms", "5"),
                                              Change(Op.DELETE, "max.connections")]) == {"log.retention.ms": "5"}
    with pytest.raises(Refused) as refused:
        altered({}, [Change(Op.SET, "message.max.bytes", "-1")])
    assert refused.value.invalid_config
    assert resource_problem("") is None and resource_problem("12") is None
    assert resource_problem("012") and resource_problem("-1") and resource_problem("a")
