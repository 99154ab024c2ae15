"""The Grafana dashboard: valid JSON, and every metric its queries use is documented in METRICS.md."""

from __future__ import annotations

import json
import re

from k8s_helpers import CHART_DIR

REPO = CHART_DIR.parents[1]
DASHBOARD = CHART_DIR / "dashboards" / "tinystream.json"
METRICS_MD = REPO / "operator" / "dashboard" / "METRICS.md"
METRIC = re.compile(r"\btinystream_[a-z0-9_]+")
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def _panels(panels):
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def queries(dashboard) -> list[str]:
    exprs = [t["expr"] for p in _panels(dashboard["panels"]) for t in p.get("targets", []) if t.get("expr")]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and query:
            exprs.append(query)
    return exprs


def documented() -> set[str]:
    return set(METRIC.findall(METRICS_MD.read_text()))


def _base(name: str) -> str:
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in documented():
            return name[: -len(suffix)]
    return name


def test_dashboard_parses_and_has_unique_panel_ids():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    ids = [p["id"] for p in _panels(dashboard["panels"])]
    assert len(ids) == len(set(ids))
    for panel in _panels(dashboard["panels"]):
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_every_metric_in_a_query_is_documented():
    dashboard = json.loads(DASHBOARD.read_text())
    used = {_base(m) for expr in queries(dashboard) for m in METRIC.findall(expr)}
    assert used, "no tinystream metric in any query"
    missing = sorted(used - documented())
    assert missing == [], f"not in METRICS.md: {missing}"


def test_dashboard_covers_what_operators_ask_for():
    text = " ".join(queries(json.loads(DASHBOARD.read_text())))
    for metric in ("tinystream_bytes_in_total", "tinystream_messages_in_total", "tinystream_requests_total",
                   "tinystream_request_latency_seconds_bucket", "tinystream_controller_under_replicated_partitions",
                   "tinystream_controller_offline_partitions", "tinystream_isr_shrinks_total",
                   "tinystream_isr_expands_total", "tinystream_consumer_group_lag",
                   "tinystream_controller_metadata_version", 'tinystream_controller_brokers{state="fenced"'):
        assert metric in text, metric
    assert "histogram_quantile(0.99" in text


def test_the_check_catches_an_undocumented_metric():
    dashboard = {"panels": [{"id": 1, "type": "timeseries", "targets": [{"expr": "rate(tinystream_nope_total[5m])"}]}],
                 "templating": {"list": []}}
    used = {_base(m) for expr in queries(dashboard) for m in METRIC.findall(expr)}
    assert used - documented() == {"tinystream_nope_total"}
