"""Several registry instances in one consumer group: one leader writes, followers serve reads and forward writes.

In-process registries (each on its own event loop and thread) against an in-process broker; the group's
JoinGroup/SyncGroup go through the broker's coordinator. confluent-kafka's SchemaRegistryClient is the client.
"""

from __future__ import annotations

import json
import uuid

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from tinystream.scram_users import UserStore  # noqa: E402
from tinystream.testing.waiting import wait_until  # noqa: E402

USERS = {"writer": "w-secret", "reader": "r-secret"}
RULES = {"rules": [{"principal": "User:writer", "subject": "*", "operations": ["WRITE"]},
                   {"principal": "User:reader", "subject": "*", "operations": ["READ"]}]}


def _avro(name: str) -> Schema:
    return Schema(json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]}), "AVRO")


@pytest.fixture
def group(start_registry):
    """group(n, **options) -> n instances in one fresh group, once they agree on a leader."""
    def start(count: int, **options):
        options.setdefault("group_id", "schema-registry-" + uuid.uuid4().hex[:8])
        options.setdefault("session_timeout_ms", 6000)
        first = start_registry(**options)
        members = [first] + [start_registry(topic=first.options.topic, **options) for _ in range(count - 1)]
        wait_until(lambda: _agreed_leader(members), what="the instances to agree on a leader")
        return members
    return start


def _agreed_leader(members):
    seen = {m.server.leadership.leader_url for m in members}
    return len(seen) == 1 and None not in seen and next(iter(seen))


def _split(members):
    leader_url = _agreed_leader(members)
    leader = next(m for m in members if m.url == leader_url)
    return leader, [m for m in members if m is not leader]


def test_writes_to_followers_land_once_with_one_id_sequence_and_every_instance_serves_them(group):
    members = group(3)
    leader, followers = _split(members)
    ids = []
    for i in range(6):  # round-robin over every instance, followers included
        client = SchemaRegistryClient({"url": members[i % 3].url})
        ids.append(client.register_schema(f"s{i}", _avro(f"R{i}")))
    assert ids == list(range(1, 7))  # one sequence: only the leader allocates
    again = SchemaRegistryClient({"url": followers[0].url}).register_schema("s0", _avro("R0"))
    assert again == 1  # the same schema through a follower: the same id, no new version
    for member in members:  # read-your-writes: a follower answers once it has applied the leader's record
        client = SchemaRegistryClient({"url": member.url})
        assert json.loads(client.get_schema(ids[-1]).schema_str)["name"] == "R5"
        assert client.get_versions("s0") == [1]
    topic_records = leader.server.store.applied + 1
    assert topic_records == 6  # nothing written twice (one record per registration)


def test_config_and_deletes_through_a_follower_reach_every_instance(group):
    members = group(2)
    _, (follower,) = _split(members)
    client = SchemaRegistryClient({"url": follower.url})
    client.register_schema("d", _avro("D"))
    client.set_compatibility("d", "NONE")
    assert client.delete_subject("d") == [1]
    for member in members:
        wait_until(lambda m=member: "d" not in m.server.state.subject_names() and m.server.state.configs.get("d"),
                   what="the delete and the config on every instance")


def test_when_the_leader_stops_another_leads_and_no_id_is_used_again(group):
    members = group(3)
    leader, followers = _split(members)
    client = SchemaRegistryClient({"url": followers[0].url})
    before = [client.register_schema(f"k{i}", _avro(f"K{i}")) for i in range(3)]
    leader.stop()
    wait_until(lambda: _agreed_leader(followers) and _agreed_leader(followers) != leader.url,
               what="a new leader among the two left")
    after = [SchemaRegistryClient({"url": f.url}).register_schema(f"n{i}", _avro(f"N{i}"))
             for i, f in enumerate(followers * 2)]
    assert before == [1, 2, 3] and after == [4, 5, 6, 7]
    for member in followers:  # the last write reaches the other instance through the topic, a moment later
        wait_until(lambda m=member: sorted(m.server.state.schemas) == list(range(1, 8)),
                   what="ids 1..7 on every instance left")


def test_an_instance_that_may_not_lead_never_does(group, start_registry):
    members = group(1)
    passive = start_registry(topic=members[0].options.topic, group_id=members[0].options.group_id,
                             leader_eligible=False, session_timeout_ms=6000, leader_wait_s=0.2)
    wait_until(lambda: _agreed_leader([members[0], passive]), what="both to know the leader")
    assert passive.server.leadership.leader_url == members[0].url
    members[0].stop()
    wait_until(lambda: passive.server.leadership.leader_url is None, what="the passive one to see no leader")
    with pytest.raises(SchemaRegistryError) as refused:
        SchemaRegistryClient({"url": passive.url}).register_schema("p", _avro("P"))
    assert (refused.value.http_status_code, refused.value.error_code) == (500, 50004)
    assert SchemaRegistryClient({"url": passive.url}).get_subjects() == []  # reads still served


def test_a_follower_refuses_callers_without_credentials_or_rights_before_forwarding(group, tmp_path):
    store = UserStore()
    for name, password in USERS.items():
        store.set_password(name, password)
    store.save(tmp_path / "users.json")
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    members = group(2, users_file=tmp_path / "users.json", rules_file=tmp_path / "rules.json", failed_login_delay=0)
    leader, (follower,) = _split(members)

    def client(user: str | None) -> SchemaRegistryClient:
        config = {"url": follower.url}
        if user is not None:
            config["basic.auth.user.info"] = f"{user}:{USERS.get(user, 'wrong')}"
        return SchemaRegistryClient(config)

    for user, status, code in [(None, 401, 40101), ("intruder", 401, 40101), ("reader", 403, 40301)]:
        with pytest.raises(SchemaRegistryError) as refused:
            client(user).register_schema("orders-value", _avro("Order"))
        assert (refused.value.http_status_code, refused.value.error_code) == (status, code), user
    assert leader.server.state.subject_names() == []  # nothing reached the leader
    assert client("writer").register_schema("orders-value", _avro("Order")) == 1
    versions = leader.server.state.versions("orders-value")
    assert [v.owner for v in versions] == ["writer"]  # the leader wrote it as the caller, not as the follower
    assert client("reader").get_schema(1).schema_type == "AVRO"


def test_a_leader_that_cannot_be_reached_is_50003_and_nothing_is_written(start_registry):
    group_id = "schema-registry-" + uuid.uuid4().hex[:8]
    unreachable = start_registry(group_id=group_id, advertised_url="http://127.0.0.1:1", session_timeout_ms=6000)
    wait_until(lambda: unreachable.server.leadership.leader_url == "http://127.0.0.1:1", what="it to lead")
    follower = start_registry(topic=unreachable.options.topic, group_id=group_id, session_timeout_ms=6000)
    wait_until(lambda: follower.server.leadership.leader_url == "http://127.0.0.1:1", what="the follower to know it")
    with pytest.raises(SchemaRegistryError) as refused:
        SchemaRegistryClient({"url": follower.url, "max.retries": 0}).register_schema("u", _avro("U"))
    assert (refused.value.http_status_code, refused.value.error_code) == (500, 50003)
    assert "http://127.0.0.1:1" in str(refused.value)
    assert follower.server.state.subject_names() == [] and unreachable.server.state.subject_names() == []
