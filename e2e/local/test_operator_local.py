"""The operator as the controller, end to end without Kubernetes: KMock for the API, broker processes for pods.

The kopf operator runs in-process against KMock with its real controller
port; `PodStandIn` turns the StatefulSet it applies into `tinystream broker`
processes (config from the ConfigMap, env from the template, Ready from the
template's readinessProbe). Real Kafka clients produce with acks=all through
the brokers; the test then breaks things the way a cluster does and checks,
through the resources' status only (as kubectl would), that the operator
drives the controller core: heartbeats, fencing, election, ISR, rolls, scaling.
Every acknowledged record must be read back.

The kind suite (e2e/kind) runs the same sequences on a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from k8s_requirements import require

require("yaml", "kopf", "kmock")

import kmock
from kmock_helpers import Api, declare, ready_condition, running_operator
from pod_standin import PodStandIn

from tinystream.controller_auth import broker_principal, token_for
from tinystream.operator.k8s.controller_host import OperatorController
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.controller_secret import broker_admin_token, derive_cluster_secret, derived_secrets
from tinystream.operator.service.controller_service import DriverTiming
from tinystream.testing.waiting import wait_until_async

pytestmark = [pytest.mark.timeout(240)]
MASTER = "e2e-master"

TS = "tinystream.io/v1alpha1"
NS = "streaming"
TOPIC = "orders"
PARTITIONS = 3


@dataclass
class World:
    api: Api
    pods: PodStandIn
    controller: OperatorController
    operator: contextlib.AbstractAsyncContextManager[Any]  # the running kopf operator
    start_operator: Callable[[OperatorController], contextlib.AbstractAsyncContextManager[Any]]

    async def restart_operator(self) -> None:
        """Stop the operator and start a new one with a fresh controller on the same port (the
        Service's address): everything it knows must come back from the resources' status."""
        await self.operator.__aexit__(None, None, None)
        self.controller = new_controller(port=self.controller.port)
        self.operator = self.start_operator(self.controller)
        await self.operator.__aenter__()

    async def admin_headers(self) -> dict[str, str]:
        """What the brokers' admin HTTP asks for: the cluster's admin token, as the operator derives it."""
        body = await self.api.get(TS, "tinystreamclusters", "demo")
        secret = derive_cluster_secret(MASTER, ClusterKey(self.api.ns, "demo"), body["metadata"]["uid"])
        return {"Authorization": f"Bearer {broker_admin_token(secret)}"}

    async def controller_image(self) -> dict[str, Any]:
        """The controller's image as saved in the cluster's status (what a restart resumes from)."""
        obj = await self.api.get(TS, "tinystreamclusters", "demo")
        saved = ((obj or {}).get("status") or {}).get("controller") or {}
        return json.loads(saved["data"])["image"] if saved.get("data") else {}

    async def wait(self, plural: str, name: str, predicate: Callable[[dict], bool], what: str,
                   timeout: float = 90.0) -> dict:
        last: Any = None

        async def matches() -> bool:
            nonlocal last
            last = await self.api.get(TS, plural, name)
            return last is not None and predicate(last)

        await wait_until_async(matches, timeout=timeout, interval=0.25,
                               what=lambda: f"{what}; last status: {(last or {}).get('status')}")
        return last


def new_controller(port: int = 0, session_timeout_ms: int | None = None) -> OperatorController:
    overrides = {} if session_timeout_ms is None else {"broker_session_timeout_ms": session_timeout_ms}
    return OperatorController(host="127.0.0.1", port=port, timing=DriverTiming(tick_interval_s=0.25),
                              config_overrides=overrides, secret_source=derived_secrets(MASTER))

def topic_partitions(obj: dict) -> list[dict]:
    return (obj.get("status") or {}).get("partitions") or []


def isrs_full(obj: dict) -> bool:
    parts = topic_partitions(obj)
    return len(parts) == PARTITIONS and all(sorted(p["isr"]) == sorted(p["replicas"]) for p in parts)


def cluster_ready(obj: dict, brokers: int) -> bool:
    status = obj.get("status") or {}
    return (ready_condition(obj).get("status") == "True" and status.get("readyBrokers") == brokers
            and status.get("phase") == "Running")


@contextlib.asynccontextmanager
async def world(tmp_path: Path, *, brokers: int = 3, health_interval_s: float = 1.0,
                session_timeout_ms: int | None = None) -> AsyncIterator[World]:
    """KMock, the operator (controller port on 127.0.0.1), the pod stand-in; a ready cluster and topic."""
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        declare(emulator)
        api = Api(str(emulator.url), NS)

        def start_operator(controller: OperatorController) -> contextlib.AbstractAsyncContextManager[Any]:
            return running_operator(str(emulator.url), controller=controller, health_interval_s=health_interval_s)

        controller = new_controller(session_timeout_ms=session_timeout_ms)
        operator = start_operator(controller)
        await operator.__aenter__()
        w: World | None = None
        try:
            async def mint(ordinal: int) -> str:  # what the kubelet's projected token proves: this pod
                body = await api.get(TS, "tinystreamclusters", "demo")
                secret = derive_cluster_secret(MASTER, ClusterKey(api.ns, "demo"), body["metadata"]["uid"])
                return token_for(secret, broker_principal(ordinal))

            async with PodStandIn(api, "demo-broker", tmp_path, controller.url, mint_token=mint) as pods:
                w = World(api, pods, controller, operator, start_operator)
                await api.create(TS, "tinystreamclusters", {
                    "apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo", "generation": 1},
                    # Clients without TLS or logins (every pod is 127.0.0.1 here, so no certificate
                    # names it); brokers still replicate on their own SCRAM listener.
                    "spec": {"brokers": brokers, "listeners": {"tls": False, "authentication": {"type": "none"}},
                             "authorization": {"type": "none"},
                             "config": {"min.insync.replicas": 2, "broker.heartbeat.interval.ms": 500}}})
                await w.wait("tinystreamclusters", "demo", lambda o: cluster_ready(o, brokers),
                             f"{brokers} ready brokers")
                await api.create(TS, "topics", {
                    "apiVersion": TS, "kind": "Topic", "metadata": {"name": TOPIC, "generation": 1},
                    "spec": {"cluster": "demo", "partitions": PARTITIONS, "replicationFactor": 3,
                             "config": {"min.insync.replicas": 2}}})
                await w.wait("topics", TOPIC, lambda o: ready_condition(o).get("status") == "True"
                             and isrs_full(o), "the topic placed with full ISRs")
                yield w
        finally:
            await (w.operator if w is not None else operator).__aexit__(None, None, None)
            await api.close()

# --- clients (kafka-python, in threads) -----------------------------------------------------------

def produce(bootstrap: str, values: list[str]) -> dict[str, tuple[int, int]]:
    """acks=all; value -> (partition, offset) for every acknowledged record (a failed send is not acked)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=250,
                             request_timeout_ms=15_000, max_block_ms=30_000)
    acked: dict[str, tuple[int, int]] = {}
    try:
        futures = [(v, producer.send(TOPIC, value=v.encode(), partition=i % PARTITIONS)) for i, v in enumerate(values)]
        producer.flush(timeout=60)
        for value, future in futures:
            with contextlib.suppress(Exception):
                meta = future.get(timeout=1)
                acked[value] = (meta.partition, meta.offset)
    finally:
        producer.close(timeout=5)
    return acked


def consume_all(bootstrap: str, expected: int) -> dict[int, list[str]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    seen: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while sum(map(len, seen.values())) < expected and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            seen[tp.partition] += [r.value.decode() for r in records]
    consumer.close()
    return seen


def assert_none_lost(acked: dict[str, tuple[int, int]], seen: dict[int, list[str]]) -> None:
    by_partition = {p: set(values) for p, values in seen.items()}
    lost = [v for v, (p, _) in acked.items() if v not in by_partition[p]]
    assert not lost, f"{len(lost)} acknowledged record(s) lost, e.g. {lost[:5]}"
    for p, values in seen.items():  # per-partition order: offsets as acknowledged
        offsets = [acked[v][1] for v in values if v in acked]
        assert offsets == sorted(offsets), f"partition {p} out of order"


async def all_partitions_retention(w: World, retention_ms: int) -> bool:
    import aiohttp

    async with aiohttp.ClientSession(headers=await w.admin_headers()) as http:
        for run in list(w.pods.pods.values()):  # a scale-up may add pods between awaits
            async with http.get(f"http://127.0.0.1:{run.admin_port}/api/partitions") as r:
                rows = [p for p in (await r.json())["partitions"] if p["topic"] == TOPIC]
            if len(rows) != PARTITIONS or any(p["retention_ms"] != retention_ms for p in rows):
                return False
    return True


# --- the sequences -----------------------------------------------------------------------------------

async def test_lost_broker_moves_leadership_and_loses_nothing(tmp_path: Path) -> None:
    # A 10-minute session timeout: only the Pod event (container not running) can fence the broker in time.
    async with world(tmp_path, session_timeout_ms=600_000) as w:
        acked = await asyncio.to_thread(produce, w.pods.bootstrap, [f"a-{i}" for i in range(300)])
        assert len(acked) == 300

        topic = await w.api.get(TS, "topics", TOPIC)
        victim = topic_partitions(topic)[0]["leader"]
        epoch = topic_partitions(topic)[0]["leaderEpoch"]
        await w.pods.crash(victim, hold=True)  # SIGKILL, no controlled shutdown; the kubelet says CrashLoopBackOff

        # Fencing and election come from the operator's controller core, and show in status.
        moved = await w.wait("topics", TOPIC, lambda o: topic_partitions(o)[0]["leader"] not in (victim, -1)
                             and all(victim not in p["isr"] for p in topic_partitions(o)), "leadership to move")
        assert topic_partitions(moved)[0]["leaderEpoch"] > epoch
        assert ready_condition(moved)["reason"] == "UnderReplicated"
        cluster = await w.wait("tinystreamclusters", "demo", lambda o: any(
            b["id"] == victim and b["fenced"] and not b["ready"] for b in o["status"]["brokers"]), "the broker fenced")
        assert cluster["status"]["underReplicatedPartitions"] == PARTITIONS
        assert ready_condition(cluster)["status"] == "False"  # 2/3 brokers ready, and it says which is missing
        assert f"demo-broker-{victim}" in ready_condition(cluster)["message"]

        # min.insync.replicas 2 of 3: writes go on with one broker down.
        more = await asyncio.to_thread(produce, w.pods.bootstrap, [f"b-{i}" for i in range(150)])
        assert len(more) == 150
        acked.update(more)

        w.pods.release(victim)  # the kubelet restarts it; it catches up and rejoins every ISR
        await w.wait("topics", TOPIC, isrs_full, "the ISRs full again")
        await w.wait("tinystreamclusters", "demo", lambda o: cluster_ready(o, 3), "3 ready brokers again")
        assert_none_lost(acked, await asyncio.to_thread(consume_all, w.pods.bootstrap, len(acked)))

        # A Topic config change is applied live: every broker's partitions take it, no pod restarts.
        await w.api.patch(TS, "topics", TOPIC, {"metadata": {"generation": 2},
                                                "spec": {"config": {"min.insync.replicas": 2, "retention.ms": 3_600_000}}})
        await wait_until_async(lambda: all_partitions_retention(w, 3_600_000), timeout=30, interval=0.25,
                               what="retention.ms on every replica")
        assert all(run.restarts == 0 for i, run in w.pods.pods.items() if i != victim)


@pytest.mark.slow
async def test_config_change_rolls_one_broker_at_a_time_without_loss(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        first_revision = {run.revision for run in w.pods.pods.values()}
        assert len(first_revision) == 1
        # A writer keeps producing through the roll (acks=all, min ISR 2).
        stop = asyncio.Event()
        acked: dict[str, tuple[int, int]] = {}

        async def writer() -> None:
            batch = 0
            while not stop.is_set():
                acked.update(await asyncio.to_thread(produce, w.pods.bootstrap,
                                                     [f"r{batch}-{i}" for i in range(50)]))
                batch += 1

        writing = asyncio.create_task(writer())
        await w.api.patch(TS, "tinystreamclusters", "demo", {
            "metadata": {"generation": 2},
            "spec": {"config": {"min.insync.replicas": 2, "broker.heartbeat.interval.ms": 500,
                                "log.retention.ms": 3_600_000}}})
        seen_phases: set[str] = set()
        not_ready_at_once: list[int] = []

        def rolled(o: dict) -> bool:
            seen_phases.add((o.get("status") or {}).get("phase", ""))
            not_ready_at_once.append(sum(1 for r in w.pods.pods.values() if not r.ready))
            revisions = {run.revision for run in w.pods.pods.values()}
            return revisions.isdisjoint(first_revision) and cluster_ready(o, 3)

        await w.wait("tinystreamclusters", "demo", rolled, "the roll to finish", timeout=180)
        stop.set()
        await writing
        assert "Rolling" in seen_phases
        assert max(not_ready_at_once) <= 1, "two brokers were down at once"
        assert all(run.restarts == 0 for run in w.pods.pods.values())  # deleted and replaced, not crashed
        etc = tmp_path / "demo-broker-0" / "etc" / "broker.toml"
        assert '"log.retention.ms" = 3600000' in etc.read_text()  # the new ConfigMap reached the brokers
        topic = await w.wait("topics", TOPIC, isrs_full, "full ISRs after the roll")
        assert ready_condition(topic)["status"] == "True"
        assert len(acked) > 0
        assert_none_lost(acked, await asyncio.to_thread(consume_all, w.pods.bootstrap, len(acked)))


@pytest.mark.slow
async def test_scale_up_rebalances_and_scale_down_drains_first(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        acked = await asyncio.to_thread(produce, w.pods.bootstrap, [f"s-{i}" for i in range(200)])
        await w.api.patch(TS, "tinystreamclusters", "demo", {"metadata": {"generation": 2}, "spec": {"brokers": 4}})
        await w.wait("tinystreamclusters", "demo", lambda o: cluster_ready(o, 4), "4 ready brokers")
        # The new broker gets a fair share of replicas (reassignment by replication), then ISRs are full.
        grown = await w.wait("topics", TOPIC, lambda o: isrs_full(o) and any(
            3 in p["replicas"] for p in topic_partitions(o)), "replicas on broker 3")
        assert all(len(p["replicas"]) == 3 for p in topic_partitions(grown))

        await w.api.patch(TS, "tinystreamclusters", "demo", {"metadata": {"generation": 3}, "spec": {"brokers": 3}})
        # Replicas leave broker 3 before the StatefulSet shrinks; nothing is under-replicated at the end.
        await w.wait("topics", TOPIC, lambda o: isrs_full(o) and all(
            3 not in p["replicas"] for p in topic_partitions(o)), "replicas off broker 3")
        await w.wait("tinystreamclusters", "demo", lambda o: cluster_ready(o, 3)
                     and o["status"]["replicas"] == 3, "3 brokers again")
        sts = await w.api.get("apps/v1", "statefulsets", "demo-broker")
        assert sts["spec"]["replicas"] == 3 and not w.pods.run_of(3).running
        assert_none_lost(acked, await asyncio.to_thread(consume_all, w.pods.bootstrap, len(acked)))


@pytest.mark.slow
async def test_operator_restart_mid_roll_resumes_from_status(tmp_path: Path) -> None:
    # A slow health timer widens the gap between "leadership moved" and "pod deleted" to catch it.
    async with world(tmp_path, health_interval_s=3.0) as w:
        first_revision = {run.revision for run in w.pods.pods.values()}
        await w.api.patch(TS, "tinystreamclusters", "demo", {
            "metadata": {"generation": 2},
            "spec": {"config": {"min.insync.replicas": 2, "broker.heartbeat.interval.ms": 500,
                                "log.retention.ms": 7_200_000}}})

        async def drained_for_roll() -> list[int]:
            image = await w.controller_image()
            return [b["broker_id"] for b in image.get("brokers", ()) if b.get("drained_until_restart")]

        deadline = time.monotonic() + 90
        while not (drained := await drained_for_roll()):
            assert time.monotonic() < deadline, "no broker was drained for the roll"
            await asyncio.sleep(0.1)
        victim = w.pods.run_of(drained[0])
        assert victim.revision in first_revision and victim.running  # drained, its pod not yet deleted
        old_pid = victim.child.pid if victim.child else None
        await w.restart_operator()  # mid-roll: the new operator must finish from what status says

        await w.wait("tinystreamclusters", "demo", lambda o: cluster_ready(o, 3) and {
            run.revision for run in w.pods.pods.values()}.isdisjoint(first_revision), "the roll to finish",
            timeout=180)
        image = await w.controller_image()
        assert not any(b["drained"] for b in image["brokers"]), f"broker(s) left drained: {image['brokers']}"
        assert victim.restarts == 0 and victim.child is not None and victim.child.pid != old_pid  # replaced
        await w.wait("topics", TOPIC, isrs_full, "full ISRs after the roll")
