"""The cluster as the controller sees it: leaders, ISRs, fenced brokers (GET /v1/metadata).

The chaos suite asks the controller, not a broker, who leads what: it is
the one source every broker follows, and it answers while brokers die.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

from tinystream.testing.waiting import wait_until

OFFSETS_TOPIC = "__consumer_offsets"


def metadata(controller_url: str, *, token: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """The image, read with a controller API token (LocalCluster.admin_token)."""
    request = urllib.request.Request(f"{controller_url}/v1/metadata", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
        return json.loads(response.read())


def try_metadata(controller_url: str, *, token: str) -> dict[str, Any] | None:
    try:
        return metadata(controller_url, token=token)
    except (OSError, ValueError):
        return None  # the controller is restarting


def partitions(image: dict[str, Any], topic: str) -> dict[int, dict[str, Any]]:
    for t in image.get("topics", []):
        if t["name"] == topic:
            return {p["partition"]: p for p in t["partitions"]}
    return {}


def leader_of(image: dict[str, Any], topic: str, partition: int) -> int:
    return partitions(image, topic)[partition]["leader"]


def leader_epochs(image: dict[str, Any], topic: str) -> dict[int, int]:
    return {p: s["leader_epoch"] for p, s in partitions(image, topic).items()}


def live_brokers(image: dict[str, Any]) -> set[int]:
    return {b["broker_id"] for b in image.get("brokers", []) if not b.get("fenced")}


def not_converged(image: dict[str, Any] | None, *, topics: Iterable[str], brokers: int) -> list[str]:
    """Why the cluster is not at full strength yet ([] when it is).

    `__consumer_offsets` is created by the first group, so it is checked only once it exists.
    """
    if image is None:
        return ["controller not answering"]
    problems = []
    if len(live_brokers(image)) < brokers:
        problems.append(f"live brokers {sorted(live_brokers(image))}")
    for topic in topics:
        states = partitions(image, topic)
        if not states and topic != OFFSETS_TOPIC:
            problems.append(f"{topic}: unknown")
        for p, s in sorted(states.items()):
            if s["leader"] < 0 or sorted(s["isr"]) != sorted(s["replicas"]):
                problems.append(f"{topic}-{p}: leader {s['leader']} replicas {s['replicas']} isr {s['isr']}")
    return problems


def wait_for(check: Callable[[], list[str]], *, timeout_s: float, what: str) -> float:
    """Poll `check` (problems, [] when done) until it passes; returns the seconds it took."""
    started = time.monotonic()
    problems: list[str] = ["not checked"]

    def passed() -> bool:
        nonlocal problems
        problems = check()
        return not problems

    wait_until(passed, timeout=timeout_s, what=lambda: f"{what}: {'; '.join(problems[:8])}")
    return time.monotonic() - started


def wait_converged(controller_url: str, *, token: str, topics: Iterable[str], brokers: int, timeout_s: float) -> float:
    topics = list(topics)
    return wait_for(lambda: not_converged(try_metadata(controller_url, token=token), topics=topics, brokers=brokers),
                    timeout_s=timeout_s, what="full ISRs on every partition")


def replica_ends(admin_url: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (log end offset, high watermark) of this broker's replica (its /api/topics)."""
    with urllib.request.urlopen(f"{admin_url}/api/topics", timeout=2) as response:  # noqa: S310
        topics = json.loads(response.read())["topics"]
    for t in topics:
        if t["name"] == topic:
            return {p["partition"]: (p["log_end_offset"], p["high_watermark"]) for p in t["partitions"]}
    return {}


def replicas_not_at(admin_urls: Iterable[str], topic: str, ends: dict[int, int]) -> list[str]:
    """Replicas whose log end offset or high watermark is not `ends` (every replica holds the whole log)."""
    problems = []
    for url in admin_urls:
        try:
            have = replica_ends(url, topic)
        except (OSError, ValueError) as exc:
            problems.append(f"{url}: {exc}")
            continue
        for p, end in ends.items():
            if have.get(p) != (end, end):
                problems.append(f"{url} {topic}-{p}: (LEO, HW) {have.get(p)}, log end {end}")
    return problems
