"""Registry-backed validation, the pure part: configs, prefixes, subjects, the decision; and the lookup's cache."""

from __future__ import annotations

import pytest

from tinystream.broker.storage.batch import Record
from tinystream.broker.topics import registry_validation as rv
from tinystream.broker.topics.schema_ids import RegistryUnavailable, SchemaIdLookup, _subjects
from tinystream.config import topic_configs as tc

VALUE_ON = {tc.VALUE_SCHEMA_VALIDATION: "true"}


def framed(schema_id: int, payload: bytes = b"\x02") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def test_configs_are_booleans_and_topic_name_strategy_only():
    assert tc.parse(tc.VALUE_SCHEMA_VALIDATION, "TRUE") is True
    assert tc.defaults()[tc.KEY_SCHEMA_VALIDATION] is False
    assert tc.defaults()[tc.VALUE_SUBJECT_STRATEGY] == tc.TOPIC_NAME_STRATEGY
    assert tc.parse(tc.KEY_SUBJECT_STRATEGY, "TopicNameStrategy") == tc.TOPIC_NAME_STRATEGY
    with pytest.raises(tc.InvalidConfig, match="not a boolean"):
        tc.parse(tc.VALUE_SCHEMA_VALIDATION, "yes")
    for name in ("io.confluent.kafka.serializers.subject.RecordNameStrategy", "TopicRecordNameStrategy"):
        with pytest.raises(tc.InvalidConfig, match="not supported.*TopicNameStrategy only"):
            tc.parse(tc.VALUE_SUBJECT_STRATEGY, name)
    with pytest.raises(tc.InvalidConfig, match="not a subject name strategy"):
        tc.parse(tc.VALUE_SUBJECT_STRATEGY, "Whatever")


def test_policy_names_subjects_after_the_topic():
    assert rv.policy("orders", {}) is None
    assert rv.policy("orders", {tc.VALUE_SCHEMA_VALIDATION: "false"}) is None
    assert rv.policy("orders", VALUE_ON) == rv.Policy(None, "orders-value")
    both = {**VALUE_ON, tc.KEY_SCHEMA_VALIDATION: "true"}
    assert rv.policy("orders", both) == rv.Policy("orders-key", "orders-value")


@pytest.mark.parametrize("data, expected", [
    (framed(7), 7),
    (framed(2**31 - 1, b""), 2**31 - 1),
    (b"\x00\x00\x00", "has 3 bytes, fewer than the 5-byte schema id prefix"),
    (b"{\"id\": 1}", "starts with byte 123, not the schema id prefix's magic byte 0"),
    (b"", "has 0 bytes, fewer than the 5-byte schema id prefix"),
])
def test_schema_id_prefix(data, expected):
    assert rv.schema_id(data) == expected


def test_scan_stops_at_the_first_record_without_a_prefix_and_skips_nulls():
    rule = rv.Policy("t-key", "t-value")
    records = [Record(key=framed(1), value=framed(2)), Record(key=None, value=None), Record(key=b"k", value=framed(2)),
               Record(value=b"never read")]
    found = rv.scan(records, rule)
    assert found == [rv.Check(0, "key", "t-key", 1), rv.Check(0, "value", "t-value", 2),
                     rv.Refusal(2, "key", "t-key", "has 1 bytes, fewer than the 5-byte schema id prefix")]
    assert rv.schema_ids(found) == {1: {"t-key"}, 2: {"t-value"}}
    assert rv.scan([Record(key=b"free", value=framed(3))], rv.Policy(None, "t-value")) == [rv.Check(0, "value", "t-value", 3)]


def test_verdict_names_the_first_failing_record_in_batch_order():
    subjects = {1: frozenset({"t-value"}), 2: frozenset({"other-value"}), 3: frozenset()}
    found = rv.scan([Record(value=framed(1)), Record(value=framed(2)), Record(value=b"raw")], rv.Policy(None, "t-value"))
    refusal = rv.verdict(found, subjects.__getitem__)
    assert refusal == rv.Refusal(1, "value", "t-value", "schema id 2 is not registered under the subject")
    assert refusal.describe() == "record 1: value schema id 2 is not registered under the subject (subject 't-value')"
    unknown = rv.verdict(rv.scan([Record(value=framed(3))], rv.Policy(None, "t-value")), subjects.__getitem__)
    assert unknown is not None and "not registered in the schema registry" in unknown.reason
    assert rv.verdict(rv.scan([Record(value=framed(1))] * 3, rv.Policy(None, "t-value")), subjects.__getitem__) is None


def test_registry_answers_are_parsed_strictly():
    assert _subjects(200, b'[{"subject": "a-value", "version": 1}, {"subject": "b", "version": 2}]', "u") == {
        "a-value", "b"}
    assert _subjects(404, b'{"error_code": 40403, "message": "Schema not found"}', "u") == frozenset()
    for status, body in ((404, b"<html>not here</html>"), (500, b"{}"), (401, b'{"error_code": 401}'),
                         (200, b'{"subject": "x"}')):
        with pytest.raises(RegistryUnavailable, match=f"HTTP {status}"):
            _subjects(status, body, "u")


def test_cache_is_bounded_and_expires_negative_answers_sooner():
    now = [0.0]
    lookup = SchemaIdLookup("http://registry.invalid", max_entries=3, positive_ttl=100, negative_ttl=2,
                            clock=lambda: now[0])
    for i in range(5):
        lookup._remember(i, frozenset({f"s{i}"}))
    assert [lookup.cached(i) for i in range(5)] == [None, None, {"s2"}, {"s3"}, {"s4"}]  # oldest two evicted
    lookup._remember(9, frozenset())
    assert lookup.cached(9) == frozenset() and lookup.cached(2) is None  # 2 was least recently used
    now[0] = 2.5
    assert lookup.cached(9) is None and lookup.cached(4) == {"s4"}
    now[0] = 101
    assert lookup.cached(4) is None


def test_an_answer_without_the_wanted_subject_is_trusted_only_for_what_was_asked():
    """The same schema registered under a second subject keeps its id: a cached answer can be stale that way."""
    now = [0.0]
    lookup = SchemaIdLookup("http://registry.invalid", positive_ttl=100, negative_ttl=2, clock=lambda: now[0])
    lookup._remember(1, frozenset({"a-value"}), frozenset({"a-value"}))
    assert lookup.cached(1, frozenset({"a-value"})) == {"a-value"}
    assert lookup.cached(1, frozenset({"b-value"})) is None  # never asked about b: ask (it may be new)
    lookup._remember(1, frozenset({"a-value"}), frozenset({"b-value"}))
    now[0] = 1.0
    assert lookup.cached(1, frozenset({"b-value"})) == {"a-value"}  # asked 1 s ago: a repeated refusal stays cheap
    now[0] = 3.0
    assert lookup.cached(1, frozenset({"b-value"})) is None  # ask the registry again
    assert lookup.cached(1, frozenset({"a-value"})) == {"a-value"}


async def test_an_unreachable_registry_raises_and_caches_nothing():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lookup = SchemaIdLookup(f"http://127.0.0.1:{port}", timeout=2)
    try:
        with pytest.raises(RegistryUnavailable, match=str(port)):
            await lookup.subjects(5)
        assert lookup.cached(5) is None and lookup.calls == 1 and not lookup._pending
    finally:
        await lookup.close()
