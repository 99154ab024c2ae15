"""GET /metrics on a real controller: image gauges, state saves, HTTP series, and how they move."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from service_helpers import Controller

from tinystream.operator.controller import MetadataImage
from tinystream.operator.controller.image import PartitionRecord, TopicRecord
from tinystream.operator.service import MemoryStateStore
from tinystream.operator.service.metrics import image_counts


async def scrape(controller: Controller) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics, keyed by (name, labels)."""
    assert controller.http is not None
    async with controller.http.get(controller.url + "/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_image_gauges_follow_brokers_and_topics(controller: Controller) -> None:
    before = await scrape(controller)
    assert value(before, "tinystream_controller_brokers", state="registered") == 0
    assert value(before, "tinystream_controller_topics") == 0
    start_version = value(before, "tinystream_controller_metadata_version")
    saves_before = value(before, "tinystream_controller_state_saves_total")

    await controller.start_broker(1)
    await controller.start_broker(2)
    await controller.register(3)  # registered, not caught up: stays fenced
    status, _ = await controller.request("POST", "/v1/topics",
                                         {"name": "orders", "partitions": 3, "replication_factor": 2})
    assert status == 201

    after = await scrape(controller)
    image = await controller.image()
    assert value(after, "tinystream_controller_metadata_version") == image["version"] > start_version
    assert value(after, "tinystream_controller_brokers", state="registered") == 3
    assert value(after, "tinystream_controller_brokers", state="fenced") == 1
    assert value(after, "tinystream_controller_brokers", state="drained") == 0
    assert value(after, "tinystream_controller_topics") == 1
    assert value(after, "tinystream_controller_partitions") == 3
    assert value(after, "tinystream_controller_offline_partitions") == 0
    assert value(after, "tinystream_controller_under_replicated_partitions") == 0
    # Registrations, unfencing and the topic were saved before they were answered.
    assert value(after, "tinystream_controller_state_saves_total") >= saves_before + 4
    assert value(after, "tinystream_controller_state_save_failures_total") == 0

    # Draining broker 1 moves its leaderships away and shows as drained.
    status, _ = await controller.request("POST", "/v1/brokers/1/drain")
    assert status == 200
    drained = await scrape(controller)
    assert value(drained, "tinystream_controller_brokers", state="drained") == 1
    assert value(drained, "tinystream_controller_metadata_version") > value(after, "tinystream_controller_metadata_version")


async def test_http_series_count_by_route_template_and_status(controller: Controller) -> None:
    await controller.start_broker(1)
    assert (await controller.request("GET", "/v1/topics/nope"))[0] == 404
    assert (await controller.request("GET", "/v1/no-such-endpoint"))[0] == 404
    samples = await scrape(controller)
    register = dict(route="/v1/brokers/register", method="POST", status="200")
    assert value(samples, "tinystream_controller_http_requests_total", **register) == 1
    assert value(samples, "tinystream_controller_http_request_duration_seconds_count", **register) == 1
    heartbeat = dict(route="/v1/brokers/{broker_id}/heartbeat", method="POST", status="200")
    assert value(samples, "tinystream_controller_http_requests_total", **heartbeat) == 1
    missing_topic = dict(route="/v1/topics/{name}", method="GET", status="404")
    assert value(samples, "tinystream_controller_http_requests_total", **missing_topic) == 1
    # An unknown path is one "unmatched" series, never the raw path.
    assert value(samples, "tinystream_controller_http_requests_total",
                 route="unmatched", method="GET", status="404") == 1
    assert not any("no-such-endpoint" in str(labels) for _, labels in samples)


class FailingStore(MemoryStateStore):
    fail = False

    async def save(self, state) -> None:
        if self.fail:
            raise OSError("disk full")
        await super().save(state)


async def test_a_failed_save_is_counted_and_answered_503(tmp_path: Path) -> None:
    store = FailingStore()
    ctl = Controller(tmp_path / "state.json", store=store)
    await ctl.start()
    try:
        store.fail = True
        status, body = await ctl.request("POST", "/v1/brokers/register",
                                         {"broker_id": 1, "incarnation_id": "a", "host": "h", "port": 1})
        assert (status, body["error"]) == (503, "KAFKA_STORAGE_ERROR")
        samples = await scrape(ctl)
        assert value(samples, "tinystream_controller_state_save_failures_total") == 1
        assert value(samples, "tinystream_controller_brokers", state="registered") == 0
        assert value(samples, "tinystream_controller_http_requests_total",
                     route="/v1/brokers/register", method="POST", status="503") == 1
    finally:
        await ctl.stop()


def test_image_counts_offline_and_under_replicated() -> None:
    image = MetadataImage.empty(cluster_id="c")
    assert image_counts(image)["partitions"] == 0
    partitions = (
        PartitionRecord(partition=0, replicas=(1, 2), isr=(1, 2), leader=1),
        PartitionRecord(partition=1, replicas=(1, 2), isr=(1,), leader=1),  # under-replicated
        PartitionRecord(partition=2, replicas=(1, 2), isr=(2,), leader=-1),  # offline only
    )
    image = dataclasses.replace(image, topics={"t": TopicRecord(name="t", topic_id="id", partitions=partitions)})
    counts = image_counts(image)
    assert (counts["partitions"], counts["under_replicated"], counts["offline"]) == (3, 1, 1)
