"""Kafka's promise under faults: RF 3, min.insync.replicas 2, acks=all, idempotent producers.

One scenario, one workload running throughout (2 producers, 1 consumer
group), faults one after another, each followed by "every partition back to
a full ISR" before the next:

1. SIGKILL the leader of a partition, measure the failover (kill -> first
   acknowledged write sent after the kill, on that partition), bring the
   broker back on its data; three times, partitions chosen by the seed;
2. SIGSTOP a broker for longer than the session timeout, then SIGCONT;
3. restart the controller (SIGKILL, start on its state file);
4. restart a broker cleanly (SIGTERM, start on its data);
5. SIGKILL a broker, delete its data, start it empty.

Then the producers flush, the group catches up, and the whole log is read
back: every acknowledged record exactly once at its acknowledged offset,
per-partition order, no duplicates, committed offsets never lost, full ISRs.
A second test checks min.insync.replicas: with one broker left, acks=all is
refused (NOT_ENOUGH_REPLICAS), never acknowledged.
"""

from __future__ import annotations

import random
import time

import pytest
from chaos_config import BROKERS, SEED, SESSION_TIMEOUT_MS
from cluster_state import (
    OFFSETS_TOPIC,
    leader_epochs,
    leader_of,
    metadata,
    partitions,
    replicas_not_at,
    try_metadata,
    wait_converged,
    wait_for,
)
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from ledger import Ledger
from workload import GroupReader, ProducerWorker, fetch_committed, read_whole_log

from tinystream.dev.cluster import LocalCluster

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(420)]

TOPIC = "chaos"
PARTITIONS = 6
GROUP = "chaos-group"
RECORDS_PER_S = 100  # per producer
CONVERGE_TIMEOUT_S = 60.0
FAILOVER_AIM_S = SESSION_TIMEOUT_MS / 1000 + 1.0
FAILOVER_LIMIT_S = 3 * FAILOVER_AIM_S  # fail beyond this; print the aim
LEADER_KILLS = 3


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                                            config={"min.insync.replicas": "2"})], request_timeout=20)
    try:
        futures[TOPIC].result(30)
    except Exception as exc:  # noqa: BLE001 - the probe's answer
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if error is not None and error.code() in (KafkaError.INVALID_REPLICATION_FACTOR,
                                                  KafkaError.TOPIC_ALREADY_EXISTS):
            if error.code() == KafkaError.INVALID_REPLICATION_FACTOR:
                pytest.skip(f"replication not in place: a topic with RF 3 cannot be created ({error})")
            return
        raise


class Scenario:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.rng = random.Random(SEED)
        self.ledger = Ledger()
        self.failovers: list[tuple[str, float]] = []
        self.steps: list[str] = []
        self.producers = [ProducerWorker(f"producer-{i}", bootstrap=cluster.bootstrap, topic=TOPIC,
                                         partitions=PARTITIONS, ledger=self.ledger, records_per_s=RECORDS_PER_S)
                          for i in range(2)]
        self.reader = GroupReader(bootstrap=cluster.bootstrap, topic=TOPIC, partitions=PARTITIONS, group=GROUP,
                                  ledger=self.ledger)

    @property
    def url(self) -> str:
        return self.cluster.controller_url

    @property
    def token(self) -> str:
        return self.cluster.admin_token

    def converge(self, what: str) -> None:
        took = wait_converged(self.url, token=self.token, topics=[TOPIC, OFFSETS_TOPIC], brokers=BROKERS,
                              timeout_s=CONVERGE_TIMEOUT_S)
        self.steps.append(f"{what}: full ISRs again after {took:.1f} s")
        print(f"chaos: {self.steps[-1]}", flush=True)

    def progressing(self, what: str) -> None:
        """Writes sent now are acknowledged on every partition (the cluster is not just converged, it works)."""
        t0 = time.monotonic()
        for p in range(PARTITIONS):
            self.ledger.wait_ack_sent_after(t0, partitions={p}, timeout_s=30)
        self.check_workers(what)

    def check_workers(self, what: str) -> None:
        for worker in (*self.producers, self.reader):
            assert worker.is_alive() and worker.error is None, f"{what}: {worker.name} died: {worker.error!r}"

    # -- faults ----------------------------------------------------------------------

    def kill_leader(self, partition: int) -> None:
        image = metadata(self.url, token=self.token)
        leader = leader_of(image, TOPIC, partition)
        epoch = leader_epochs(image, TOPIC)[partition]
        victim = self.cluster.broker(leader)
        victim.kill()
        t0 = time.monotonic()
        acked = self.ledger.wait_ack_sent_after(t0, partitions={partition}, timeout_s=45)
        failover = acked - t0
        self.failovers.append((f"p{partition} (leader {leader} killed)", failover))
        image = metadata(self.url, token=self.token)
        state = partitions(image, TOPIC)[partition]
        assert state["leader"] != leader and state["leader_epoch"] > epoch, state
        print(f"chaos: killed broker {leader} leading {TOPIC}-{partition}: new leader {state['leader']}, "
              f"first acknowledged write after {failover:.2f} s", flush=True)
        victim.start()
        self.converge(f"broker {leader} back on its data")

    def pause_broker(self, broker_id: int) -> None:
        child = self.cluster.broker(broker_id)
        led = [p for p, s in partitions(metadata(self.url, token=self.token), TOPIC).items() if s["leader"] == broker_id]
        child.pause()
        t0 = time.monotonic()
        time.sleep(SESSION_TIMEOUT_MS / 1000 + 2.0)
        fenced = [b for b in metadata(self.url, token=self.token)["brokers"] if b["broker_id"] == broker_id][0]["fenced"]
        if led:
            acked = self.ledger.wait_ack_sent_after(t0, partitions=set(led), timeout_s=30)
            print(f"chaos: broker {broker_id} (leading {led}) frozen; writes acknowledged again after "
                  f"{acked - t0:.2f} s", flush=True)
        child.resume()
        assert fenced, f"broker {broker_id} frozen for {SESSION_TIMEOUT_MS / 1000 + 2:.0f} s but not fenced"
        self.converge(f"broker {broker_id} resumed after SIGSTOP")

    def restart_controller(self) -> None:
        version = metadata(self.url, token=self.token)["version"]
        self.cluster.controller.kill()
        t0 = time.monotonic()
        # Brokers keep serving without their controller: writes go on being acknowledged.
        self.ledger.wait_ack_sent_after(t0, timeout_s=10)
        time.sleep(1.0)
        self.cluster.controller.start()
        image = metadata(self.url, token=self.token)
        assert image["version"] >= version, f"controller restarted with metadata version {image['version']} < {version}"
        assert partitions(image, TOPIC), "controller lost the topic across a restart"
        self.converge("controller restarted (SIGKILL) on its state file")

    def restart_broker(self, broker_id: int) -> None:
        self.cluster.broker(broker_id).restart()
        self.converge(f"broker {broker_id} restarted cleanly on its data")

    def wipe_broker(self, broker_id: int) -> None:
        child = self.cluster.broker(broker_id)
        child.kill()
        child.wipe()
        child.start()
        self.converge(f"broker {broker_id} killed and back with an empty disk")


@pytest.mark.chaos
@pytest.mark.slow
def test_no_acknowledged_record_is_lost_under_faults(chaos_cluster: LocalCluster) -> None:
    started = time.monotonic()
    cluster = chaos_cluster
    _create_topic(cluster.bootstrap)
    run = Scenario(cluster)
    run.converge("topic created")
    epochs_before = sum(leader_epochs(metadata(run.url, token=run.token), TOPIC).values())
    for worker in (*run.producers, run.reader):
        worker.start()
    run.progressing("warm-up")
    wait_for(lambda: [] if run.ledger.committed else ["no commit yet"], timeout_s=30, what="first group commit")

    for partition in run.rng.sample(range(PARTITIONS), LEADER_KILLS):
        run.kill_leader(partition)
        run.progressing(f"after killing the leader of p{partition}")
    run.pause_broker(run.rng.randrange(BROKERS))
    run.progressing("after SIGSTOP/SIGCONT")
    run.restart_controller()
    run.progressing("after the controller restart")
    run.restart_broker(run.rng.randrange(BROKERS))
    run.progressing("after a clean broker restart")
    run.wipe_broker(run.rng.randrange(BROKERS))
    run.progressing("after a broker came back empty")

    # Quiesce: producers flush everything, the group reads up to the end and commits.
    for producer in run.producers:
        producer.halt.set()
    for producer in run.producers:
        producer.join(150)
        assert not producer.is_alive() and producer.error is None, f"{producer.name}: {producer.error!r}"
    log = read_whole_log(cluster.bootstrap, topic=TOPIC, partitions=PARTITIONS)
    ends = {p: (entries[-1][0] + 1 if entries else 0) for p, entries in log.items()}
    wait_for(lambda: [f"p{p} at {run.reader.positions.get(p, 0)} of {end}" for p, end in ends.items()
                      if run.reader.positions.get(p, 0) < end], timeout_s=60, what="group caught up")
    wait_for(lambda: [f"p{p} committed {run.ledger.committed.get(p)} of {end}" for p, end in ends.items()
                      if run.ledger.committed.get(p, 0) < end], timeout_s=30, what="group committed the end")
    run.reader.halt.set()
    run.reader.join(30)
    committed = fetch_committed(cluster.bootstrap, group=GROUP, topic=TOPIC, partitions=PARTITIONS)
    run.ledger.check_committed(committed, when="at the end")
    run.converge("end of run")
    admin_urls = [b.admin_url for b in cluster.brokers]
    wait_for(lambda: replicas_not_at(admin_urls, TOPIC, ends), timeout_s=20, what="every replica holds the whole log")

    verdict = run.ledger.verify(log)
    epochs_after = sum(leader_epochs(metadata(run.url, token=run.token), TOPIC).values())
    worst = max((t for _, t in run.failovers), default=0.0)
    print(f"\n=== chaos figures (seed {SEED}) ===")
    print(f"records acknowledged      {verdict.acknowledged}")
    print(f"records not acknowledged  {verdict.unacknowledged} (unflushed {sum(p.unflushed for p in run.producers)})")
    print(f"records in the log        {verdict.in_log}")
    print(f"lost                      {len(verdict.lost)} (must be 0)")
    print(f"duplicated                {len(verdict.duplicated)} (must be 0)")
    print(f"misplaced / out of order  {len(verdict.misplaced)} / {len(verdict.out_of_order)}")
    print(f"failovers measured        {len(run.failovers)}; leader changes on {TOPIC}: "
          f"{epochs_after - epochs_before}")
    for what, took in run.failovers:
        print(f"  failover {what}: {took:.2f} s (aim < {FAILOVER_AIM_S:.1f} s)")
    print(f"group: committed {dict(sorted(committed.items()))}, regressions {len(run.ledger.commit_regressions)}, "
          f"divergent reads {len(run.ledger.read_divergences)}")
    print(f"fatal producer errors     {len(run.ledger.fatal_errors)} {run.ledger.fatal_errors[:3]}")
    print(f"wall time                 {time.monotonic() - started:.1f} s")

    assert not verdict.lost, f"acknowledged records lost: {verdict.lost[:20]}"
    assert not verdict.duplicated, f"records duplicated: {verdict.duplicated[:20]}"
    assert not verdict.misplaced, f"records not at their acknowledged offset: {verdict.misplaced[:20]}"
    assert not verdict.out_of_order, f"per-partition order broken: {verdict.out_of_order[:20]}"
    assert not run.ledger.commit_regressions, f"committed offsets lost: {run.ledger.commit_regressions[:20]}"
    assert not run.ledger.read_divergences, f"the group read data that later changed: {run.ledger.read_divergences[:20]}"
    assert committed == {p: end for p, end in ends.items()}, f"committed {committed}, log ends {ends}"
    assert not run.ledger.fatal_errors, f"idempotent producers hit fatal errors: {run.ledger.fatal_errors[:5]}"
    assert worst < FAILOVER_LIMIT_S, f"failover took {worst:.2f} s (limit {FAILOVER_LIMIT_S:.1f} s)"
    assert verdict.acknowledged > 1000, "too few writes acknowledged to mean anything"


@pytest.mark.chaos
@pytest.mark.slow
def test_acks_all_is_refused_below_min_insync_replicas(chaos_cluster: LocalCluster) -> None:
    cluster = chaos_cluster
    _create_topic(cluster.bootstrap)
    wait_converged(cluster.controller_url, token=cluster.admin_token, topics=[TOPIC], brokers=BROKERS,
                   timeout_s=CONVERGE_TIMEOUT_S)
    survivor = leader_of(metadata(cluster.controller_url, token=cluster.admin_token), TOPIC, 0)
    others = [b for b in range(BROKERS) if b != survivor]
    for b in others:
        cluster.broker(b).kill()
    try:
        # The survivor leads partition 0 alone once the controller has fenced the others.
        wait_for(lambda: [] if (image := try_metadata(cluster.controller_url, token=cluster.admin_token)) and
                 partitions(image, TOPIC)[0]["isr"] == [survivor] else ["ISR not shrunk"],
                 timeout_s=30, what=f"ISR of {TOPIC}-0 down to [{survivor}]")
        results: list[KafkaError | None] = []
        # No retries, so the broker's own answer comes back (librdkafka retries NOT_ENOUGH_REPLICAS).
        producer = Producer({"bootstrap.servers": cluster.broker(survivor).bootstrap, "acks": "all",
                             "enable.idempotence": False, "retries": 0, "message.timeout.ms": 10000,
                             "log_level": 3})
        producer.produce(TOPIC, value=b"must-not-be-acked", partition=0,
                         on_delivery=lambda err, msg: results.append(err))
        producer.flush(20)
        assert results and results[0] is not None, "acks=all acknowledged with 1 in-sync replica (min 2)"
        print(f"chaos: acks=all with ISR [{survivor}] answered {results[0]}")
        assert results[0].code() in (KafkaError.NOT_ENOUGH_REPLICAS,
                                     KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND), results[0]
    finally:
        for b in others:
            cluster.broker(b).start()
    wait_converged(cluster.controller_url, token=cluster.admin_token, topics=[TOPIC], brokers=BROKERS,
                   timeout_s=CONVERGE_TIMEOUT_S)
