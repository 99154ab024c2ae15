"""The invariant checker finds each broken rule (so the property tests can fail)."""

from __future__ import annotations

import dataclasses

import pytest

from tinystream.operator.controller import (
    BrokerRecord,
    LeaderRecoveryState,
    MetadataImage,
    PartitionRecord,
    TopicRecord,
    violations,
)


def _image(partition: PartitionRecord, *, fenced=(), drained=()) -> MetadataImage:
    brokers = {
        b: BrokerRecord(broker_id=b, host="h", port=1, incarnation_id="i", epoch=1, fenced=b in fenced,
                        drained=b in drained)
        for b in (1, 2, 3)
    }
    topic = TopicRecord(name="t", topic_id="x", partitions=(partition,))
    return MetadataImage(version=3, cluster_id="c", brokers=brokers, topics={"t": topic})


GOOD = PartitionRecord(partition=0, replicas=(1, 2, 3), isr=(1, 2), leader=1)


def test_a_sound_image_has_no_violations() -> None:
    assert violations(_image(GOOD)) == []
    offline = dataclasses.replace(GOOD, isr=(1,), leader=-1)
    assert violations(_image(offline, fenced=(1,))) == []


@pytest.mark.parametrize(
    ("changes", "fenced", "drained", "fragment"),
    [
        ({"leader": 3}, (), (), "not in ISR"),
        ({"isr": (1, 4)}, (), (), "not a subset"),
        ({"isr": ()}, (), (), "empty"),
        ({"replicas": (1, 1, 2)}, (), (), "repeat"),
        ({}, (1,), (), "fenced or unregistered"),
        ({"isr": (1,), "leader": 1}, (1,), (), "leader 1 is fenced"),
        ({}, (), (2,), "drained broker 2"),
        ({"partition": 4}, (), (), "record says partition 4"),
        ({"adding_replicas": (2,), "removing_replicas": (2,)}, (), (), "both adding and removing"),
        ({"leader_recovery_state": LeaderRecoveryState.RECOVERING}, (), (), "RECOVERING"),
        ({"leader_epoch": -1}, (), (), "negative epoch"),
    ],
)
def test_each_rule_is_checked(changes, fenced, drained, fragment) -> None:
    found = violations(_image(dataclasses.replace(GOOD, **changes), fenced=fenced, drained=drained))
    assert any(fragment in v for v in found), found
