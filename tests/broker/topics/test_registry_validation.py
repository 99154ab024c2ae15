"""Registry-backed validation, the pure part: configs, prefixes, subjects, the decision; and the lookup's cache."""

from __future__ import annotations

import pytest

from tinystream.broker.storage.base import CorruptRecordError
from tinystream.broker.storage.batch import Compression, Record, decode_records, encode_records
from tinystream.broker.topics import registry_validation as rv
from tinystream.broker.topics.schema_ids import RegistryUnavailable, SchemaIdLookup, _subjects
from tinystream.config import topic_configs as tc
from tinystream.testing.broker import now_batch

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


def pairs(*records: Record) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for r in records]


def test_scan_stops_at_the_first_record_without_a_prefix_and_skips_nulls():
    rule = rv.Policy("t-key", "t-value")
    found = rv.scan(pairs(Record(key=framed(1), value=framed(2)), Record(key=None, value=None),
                          Record(key=framed(1), value=framed(2)), Record(key=b"k", value=framed(2)),
                          Record(value=b"never read")), rule)
    assert found.first_use == {(1, "key", "t-key"): 0, (2, "value", "t-value"): 0}
    assert found.refusal == rv.Refusal(3, "key", "t-key", "has 1 bytes, fewer than the 5-byte schema id prefix")
    assert found.schema_ids() == {1: {"t-key"}, 2: {"t-value"}}
    free_keys = rv.scan(pairs(Record(key=b"free", value=framed(3))), rv.Policy(None, "t-value"))
    assert free_keys == rv.Scan({(3, "value", "t-value"): 0})


def test_verdict_names_the_first_failing_record_in_batch_order():
    subjects = {1: frozenset({"t-value"}), 2: frozenset({"other-value"}), 3: frozenset()}
    value_rule = rv.Policy(None, "t-value")
    found = rv.scan(pairs(Record(value=framed(1)), Record(value=framed(2)), Record(value=b"raw")), value_rule)
    refusal = rv.verdict(found, subjects.__getitem__)
    assert refusal == rv.Refusal(1, "value", "t-value", "schema id 2 is not registered under the subject")
    assert refusal.describe() == "record 1: value schema id 2 is not registered under the subject (subject 't-value')"
    # a record without a prefix before the first unregistered id is the one named
    early = rv.scan(pairs(Record(value=framed(1)), Record(value=b"raw"), Record(value=framed(2))), value_rule)
    assert rv.verdict(early, subjects.__getitem__).index == 1
    unknown = rv.verdict(rv.scan(pairs(Record(value=framed(3))), value_rule), subjects.__getitem__)
    assert unknown is not None and "not registered in the schema registry" in unknown.reason
    assert rv.verdict(rv.scan(pairs(*[Record(value=framed(1))] * 3), value_rule), subjects.__getitem__) is None
    both = rv.scan(pairs(Record(key=framed(2), value=framed(2))), rv.Policy("t-key", "t-value"))
    assert rv.verdict(both, {2: frozenset()}.__getitem__).part == "key"  # a record's key before its value


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_batch_heads_read_what_decode_records_reads(compression):
    records = [Record(key=None, value=framed(7, b"x" * 300)), Record(key=b"ab", value=None),
               Record(key=framed(1), value=b"", headers=(("h", b"v" * 200), ("n", None))),
               Record(key=b"k" * 200, value=b"\x00\x00")]
    batch = now_batch(records, compression=compression)
    expected = [(None if r.key is None else r.key[:5], None if r.value is None else r.value[:5])
                for r in decode_records(batch)]
    assert rv.batch_heads(batch) == expected


def test_batch_heads_refuse_a_section_that_lies():
    section = encode_records([Record(value=framed(1)), Record(value=framed(2))])
    assert list(rv.heads(section, 2)) == [(None, framed(1)[:5]), (None, framed(2)[:5])]
    for data, count, message in ((section, 3, "cannot fit|cut short|does not fit"), (section, 1, "bytes left"),
                                 (section[:-3], 2, "cut short|does not fit"), (b"\xff" * 20, 1, "varint|does not fit")):
        with pytest.raises(CorruptRecordError, match=message):
            list(rv.heads(data, count))


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


async def test_concurrent_lookups_share_one_call_and_are_bounded():
    """A real HTTP server that counts calls and the most it saw at once."""
    import asyncio

    from aiohttp import web

    state = {"calls": 0, "now": 0, "most": 0}

    async def versions(request):
        state["calls"] += 1
        state["now"] += 1
        state["most"] = max(state["most"], state["now"])
        await asyncio.sleep(0.05)
        state["now"] -= 1
        sid = int(request.match_info["id"])
        if sid == 404:
            return web.json_response({"error_code": 40403, "message": "Schema not found"}, status=404)
        return web.json_response([{"subject": f"s{sid}-value", "version": 1}])

    app = web.Application()
    app.router.add_get("/schemas/ids/{id}/versions", versions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    lookup = SchemaIdLookup(f"http://127.0.0.1:{port}/", max_concurrent=2)
    try:
        same = await asyncio.gather(*(lookup.subjects(7) for _ in range(10)))
        assert same == [frozenset({"s7-value"})] * 10 and state["calls"] == 1
        many = await asyncio.gather(*(lookup.subjects(i) for i in range(10, 16)))
        assert many[0] == {"s10-value"} and state["calls"] == 7 and state["most"] == 2
        assert await lookup.subjects(404) == frozenset() and lookup.cached(404) == frozenset()
        assert await lookup.subjects(7) == {"s7-value"} and state["calls"] == 8  # from the cache
    finally:
        await lookup.close()
        await runner.cleanup()


def test_the_registry_url_setting_takes_http_urls_only():
    from pydantic import ValidationError

    from tinystream.config.settings import BrokerSettings

    assert BrokerSettings(**{"confluent.schema.registry.url": "https://registry:8081/api"}).confluent_schema_registry_url
    for bad in ("registry:8081", "ftp://registry", "http://"):
        with pytest.raises(ValidationError):
            BrokerSettings(**{"confluent.schema.registry.url": bad})
