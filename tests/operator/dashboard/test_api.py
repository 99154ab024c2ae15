"""The dashboard's JSON twins against a real cluster: numbers equal what was produced and committed."""

from __future__ import annotations

import functools
from typing import Any

import jsonschema
import pytest

from tinystream.testing.waiting import wait_until

from .conftest import COMMITTED, FIRST_COMMIT, GROUP, TOPIC, Cluster, N, get

# A view's check (assertions, then the view) runs until it passes: its last AssertionError after 20 s.
_eventually = functools.partial(wait_until, timeout=20.0, interval=0.3, retry_on=(AssertionError,))


def _only(rows: list[dict], **match: Any) -> dict:
    """The one row matching; an AssertionError (so `_eventually` retries) when a busy controller's
    image was missing from this round's snapshot."""
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, f"expected one row with {match}, found {len(found)}"
    return found[0]


def _topic(live: Cluster) -> dict:
    return _only(get(f"{live.dashboard}/api/topics")["topics"], name=TOPIC)


def test_topics_show_end_offsets(live: Cluster) -> None:
    def check() -> dict:
        topic = _topic(live)
        p0, p1 = topic["partitions"]
        assert (p0["log_end_offset"], p0["high_watermark"], p1["log_end_offset"]) == (N, N, 0)
        assert sorted(p0["isr"]) == sorted(p0["replicas"]) == [0, 1, 2]
        return topic

    topic = _eventually(check)
    assert topic["messages"] == N and topic["size_bytes"] > 0
    assert topic["partitions"][0]["segments"] == 1 and topic["partitions"][0]["retention_ms"] == 7 * 86_400_000


def test_groups_show_lag(live: Cluster) -> None:
    def check() -> dict:
        group = _only(get(f"{live.dashboard}/api/groups")["groups"], group_id=GROUP)
        row = _only(group["offsets"], topic=TOPIC, partition=0)
        assert (row["committed"], row["end_offset"], row["lag"]) == (COMMITTED, N, N - COMMITTED)
        return group

    group = _eventually(check)
    assert group["state"] == "Empty" and group["total_lag"] == N - COMMITTED
    activity = group["activity"]
    assert (activity["joins"], activity["leaves"], activity["commits"]) == (1, 1, 2)
    assert activity["records_committed"] == COMMITTED - FIRST_COMMIT
    assert activity["rebalances"]["leave"] == 1 and activity["rebalances"]["session_timeout"] == 0
    history = activity["rebalance_history"]
    assert [r["cause"] for r in history][-1] == "leave" and sum(activity["rebalances"].values()) == len(history)
    assert all(a["at_ms"] <= b["at_ms"] for a, b in zip(history, history[1:], strict=False))


def test_overview_and_brokers(live: Cluster) -> None:
    def check() -> dict:
        overview = get(f"{live.dashboard}/api/overview")
        assert overview["controller"]["up"] and overview["brokers"] == {"total": 3, "registered": 3, "up": 3,
                                                                         "fenced": 0, "down": []}
        assert overview["offline_partitions"] == 0 and overview["topics"] >= 1
        brokers = get(f"{live.dashboard}/api/brokers")["brokers"]
        assert sum(b["records_in"] for b in brokers) >= N  # leaders count appends (the offsets topic too)
        assert {b["address"] for b in brokers} == set(live.cluster.bootstrap.split(","))
        return overview

    _eventually(check)


def test_broker_admin_partitions_and_groups(live: Cluster) -> None:
    leader = _eventually(lambda: _topic(live))["partitions"][0]["leader"]
    admin = live.cluster.broker(leader).admin_url
    rows = get(f"{admin}/api/partitions")["partitions"]
    p0 = next(r for r in rows if (r["topic"], r["partition"]) == (TOPIC, 0))
    assert p0["is_leader"] and p0["log_end_offset"] == N
    coordinators = [g for b in live.cluster.brokers for g in get(f"{b.admin_url}/api/groups")["groups"]
                    if g["group_id"] == GROUP]
    assert len(coordinators) == 1


def test_broker_metrics_named_by_convention(live: Cluster) -> None:
    import urllib.request

    def scrape() -> str:
        text = ""
        for b in live.cluster.brokers:
            with urllib.request.urlopen(f"{b.admin_url}/metrics", timeout=5) as r:  # noqa: S310
                text += r.read().decode()
        # The coordinator's own replica gives the lag: a follower's HW catches up on its next fetch.
        assert f'tinystream_consumer_group_lag{{group="{GROUP}",partition="0",topic="{TOPIC}"}} {float(N - COMMITTED)}' in text
        return text

    text = _eventually(scrape)
    for name in ("tinystream_bytes_in_total", "tinystream_messages_in_total", "tinystream_bytes_out_total",
                 "tinystream_requests_total", "tinystream_request_latency_seconds_bucket",
                 "tinystream_under_replicated_partitions", "tinystream_offline_partitions",
                 "tinystream_isr_shrinks_total", "tinystream_isr_expands_total", "tinystream_leader_elections_total",
                 "tinystream_purgatory_size", "tinystream_log_size_bytes", "tinystream_log_segments"):
        assert name in text, name


def test_openapi_is_valid_and_describes_every_view(live: Cluster) -> None:
    document = get(f"{live.dashboard}/api/openapi.json")
    validator = pytest.importorskip("openapi_spec_validator", reason="openapi-spec-validator not installed")
    validator.validate(document)
    components = document["components"]["schemas"]
    for path, item in document["paths"].items():
        schema = item["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        body = get(f"{live.dashboard}{path}")
        jsonschema.validate(body, {**schema, "components": {"schemas": components}})


def test_page_and_script_are_served_without_cdn(live: Cluster) -> None:
    import urllib.request

    with urllib.request.urlopen(live.dashboard, timeout=5) as r:  # noqa: S310
        page = r.read().decode()
    assert '<script src="dashboard.js">' in page and "http" not in page.split("<script")[1]
    with urllib.request.urlopen(f"{live.dashboard}/dashboard.js", timeout=5) as r:  # noqa: S310
        assert "const REFRESH_MS = 2000;" in r.read().decode()


def test_throughput_samples(live: Cluster) -> None:
    def check() -> dict:
        t = get(f"{live.dashboard}/api/throughput")
        assert len(t["points"]) >= 2 and t["totals"]["records_in"] >= N
        return t

    _eventually(check)
