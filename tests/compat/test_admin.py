"""Topic administration through each client's admin API and Kafka's tools.

Create (with configs), list, describe partitions and configs, alter a config
incrementally, grow partitions, delete; and the errors a user meets:
creating a topic twice, deleting an unknown one, shrinking partitions.
"""

from __future__ import annotations

import functools

import compat_helpers as ch
import pytest
from admin_clients import AdminError, close_admin, kcat_metadata, open_admin
from compat_helpers import client_params, require_client

from tinystream.testing.waiting import wait_until

pytestmark = pytest.mark.compat

ADMIN_CLIENTS = ("confluent", "kafka-python", "aiokafka", "java")


# A cluster's admin answers settle: a client's AdminError or a failed check means "not yet", for up to 15 s.
eventually = functools.partial(wait_until, timeout=15.0, interval=0.2, retry_on=(AssertionError, AdminError))


@pytest.fixture
def admin(request, bootstrap):
    client = request.param
    require_client(client)
    a = open_admin(client, bootstrap)
    yield a
    close_admin(a)


@pytest.mark.parametrize("admin", client_params(ADMIN_CLIENTS), indirect=True)
def test_topic_lifecycle(admin, bootstrap):
    name = ch.unique_name(f"admin-{admin.name}")
    admin.create(name, 2, {"retention.ms": "3600000", "cleanup.policy": "delete"})
    ch.wait_for_topic(bootstrap, name, 2)

    assert name in eventually(admin.list)
    assert admin.partitions(name) == 2
    config = admin.config(name)
    assert config["retention.ms"] == "3600000", config
    assert config["cleanup.policy"] == "delete", config
    assert config.get("max.message.bytes") == "1048588", "defaults are described too"

    admin.set_config(name, "retention.ms", "7200000")
    config = eventually(lambda: (c := admin.config(name))["retention.ms"] == "7200000" and c)
    assert config["cleanup.policy"] == "delete", "an incremental alter keeps the other keys"

    admin.grow(name, 4)
    ch.wait_for_topic(bootstrap, name, 4)
    assert admin.partitions(name) == 4
    ch.produce("confluent", bootstrap, name, [ch.Rec(value=b"in-new-partition", partition=3)])
    assert [(g.partition, g.value) for g in ch.read_all(bootstrap, name, min_count=1)] == [(3, b"in-new-partition")]

    admin.delete(name)
    eventually(lambda: name not in admin.list())


@pytest.mark.parametrize("admin", client_params(ADMIN_CLIENTS), indirect=True)
def test_admin_errors(admin, bootstrap, new_topic):
    name = new_topic(partitions=2)
    with pytest.raises(AdminError) as info:
        admin.create(name, 1, {})
    assert info.value.name == "TOPIC_ALREADY_EXISTS", info.value

    with pytest.raises(AdminError) as info:
        admin.grow(name, 1)
    assert info.value.name == "INVALID_PARTITIONS", info.value

    with pytest.raises(AdminError) as info:
        admin.delete(ch.unique_name("never-created"))
    assert info.value.name == "UNKNOWN_TOPIC_OR_PARTITION", info.value


def test_create_with_bad_config_is_refused(bootstrap):
    admin = open_admin("confluent", bootstrap)
    with pytest.raises(AdminError) as info:
        admin.create(ch.unique_name("bad-config"), 1, {"cleanup.policy": "shred"})
    assert info.value.name == "INVALID_CONFIG", info.value
    with pytest.raises(AdminError) as info:
        admin.create(ch.unique_name("bad-config"), 1, {"no.such.config": "1"})
    assert info.value.name == "INVALID_CONFIG", info.value


def test_kcat_metadata(bootstrap, new_topic):
    require_client("kcat")
    name = new_topic(partitions=3)
    meta = kcat_metadata(bootstrap, name)
    assert meta["brokers"], meta
    (topic,) = [t for t in meta["topics"] if t["topic"] == name]
    assert len(topic["partitions"]) == 3
    assert all(p["leader"] >= 0 and p["replicas"] for p in topic["partitions"]), topic
