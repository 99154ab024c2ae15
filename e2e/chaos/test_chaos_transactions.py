"""Exactly-once under faults: a transactional consume-transform-produce pipeline, RF 3, min ISR 2, acks=all.

An idempotent feeder writes numbered records to `txn-in` throughout; a worker
process (txn_worker.py) reads them read_committed and writes each one,
upper-cased, to the same partition of `txn-out` in a transaction together
with its consumed offsets. A worker that hits an error exits and is started
again with the same transactional.id (fencing the old one, aborting its open
transaction), as a supervisor would. Faults, each followed by "full ISRs":

1. SIGKILL the leader of an output partition, bring it back;
2. SIGKILL the transaction coordinator (the leader of the worker's
   __transaction_state partition), bring it back;
3. SIGKILL the group coordinator (the leader of the group's
   __consumer_offsets partition), bring it back;
4. SIGKILL the worker itself (its open transaction is aborted by the next one);
5. SIGSTOP a broker past the session timeout, then SIGCONT;
6. SIGSTOP the transaction coordinator's broker past the session timeout
   (its __transaction_state partition moves to another broker, which must
   load the state and finish or abort what was in flight), then SIGCONT:
   the frozen broker wakes up believing it still coordinates, and must not
   answer as coordinator any more.

Then the feeder stops, the worker catches up and exits, and `txn-out` read
read_committed must equal `txn-in` upper-cased, partition by partition: 0
lost, 0 duplicated, order kept; the group's committed offsets are the ends
of `txn-in`; no transaction is left open in any partition (DescribeProducers)
and every coordinator shows the id complete (ListTransactions).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from chaos_config import BROKERS
from cluster_state import OFFSETS_TOPIC, leader_of, metadata, wait_converged
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.coordinator import partition_for_group
from tinystream.broker.protocol.client import KafkaClient
from tinystream.dev.cluster import LocalCluster
from tinystream.testing.broker import request

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(600)]

SRC, DST = "txn-in", "txn-out"
PARTITIONS = 6
GROUP = "txn-pipeline"
TXN_ID = "txn-pipeline-worker"
TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 6  # chaos_config: transaction.state.log.num.partitions
CONVERGE_TIMEOUT_S = 90.0
FEED_PER_S = 60
WORKER = Path(__file__).parent / "txn_worker.py"


class Feeder(threading.Thread):
    """Idempotent, acks=all producer of numbered records into SRC until halted."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="feeder", daemon=True)
        self.bootstrap = bootstrap
        self.halt = threading.Event()
        self.acked = 0
        self.errors: list[str] = []

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 120000, "log_level": 3})

        def delivered(err, _msg):
            if err is None:
                self.acked += 1
            else:
                self.errors.append(str(err))

        i = 0
        while not self.halt.is_set():
            producer.produce(SRC, key=f"k{i}".encode(), value=f"rec-{i:06d}".encode(), partition=i % PARTITIONS,
                             on_delivery=delivered)
            producer.poll(0)
            i += 1
            time.sleep(1 / FEED_PER_S)
        producer.flush(120)


class Supervisor(threading.Thread):
    """Keeps one worker process running; counts restarts; stops once the stop file made a worker exit 0."""

    def __init__(self, bootstrap: str, stop_file: Path, log_dir: Path) -> None:
        super().__init__(name="supervisor", daemon=True)
        self.bootstrap, self.stop_file, self.log_dir = bootstrap, stop_file, log_dir
        self.runs: list[tuple[int | None, str]] = []
        self.finished = threading.Event()
        self.current: subprocess.Popen[bytes] | None = None

    def kill_worker(self) -> None:
        """SIGKILL the running worker (mid-transaction, most likely); the loop starts the next one."""
        if self.current is not None:
            self.current.kill()

    def abandon(self) -> None:
        """The test ends (failed): no worker may outlive it."""
        self.finished.set()
        self.kill_worker()

    def run(self) -> None:
        while True:
            log = self.log_dir / f"worker-{len(self.runs)}.log"
            with open(log, "w") as out:
                self.current = subprocess.Popen([sys.executable, str(WORKER), self.bootstrap, SRC, DST, GROUP, TXN_ID,
                                                 str(self.stop_file)], stdout=out, stderr=subprocess.STDOUT)
                self.current.wait(900)
                worker = self.current
            tail = log.read_text(errors="replace").splitlines()[-1:] or [""]
            self.runs.append((worker.returncode, tail[0]))
            print(f"chaos-txn: worker run {len(self.runs)} exited {worker.returncode}: {tail[0]}", flush=True)
            if worker.returncode == 0 or self.finished.is_set():
                self.finished.set()
                return
            time.sleep(0.5)


def _create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=3,
                                            config={"min.insync.replicas": "2"}) for t in (SRC, DST)],
                                  request_timeout=20)
    for future in futures.values():
        future.result(30)


def _read(bootstrap: str, topic: str, *, committed: bool) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                         "isolation.level": "read_committed" if committed else "read_uncommitted",
                         "enable.auto.commit": False, "log_level": 3})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        done: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.time() + 90
        while len(done) < PARTITIONS and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                # read_committed skips aborted records and markers: at the end when the position reached the end
                for tp in consumer.position([TopicPartition(topic, p) for p in range(PARTITIONS)]):
                    if tp.offset >= ends[tp.partition]:
                        done.add(tp.partition)
                continue
            if msg.error():
                continue
            out[msg.partition()].append(msg.value())
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        assert len(done) == PARTITIONS, f"{topic}: read to the end of {sorted(done)} only"
        return out
    finally:
        consumer.close()


async def _describe_error(bootstrap: str) -> ErrorCode:
    """DescribeTransactions for the worker's id, asked of one broker directly (not via FindCoordinator)."""
    host, port = bootstrap.rsplit(":", 1)
    client = await KafkaClient.connect(host, int(port))
    try:
        response = await client.request(request(65, 0, transactional_ids=(TXN_ID,)))
    finally:
        await client.close()
    return response.transaction_states[0].error_code


def _open_transactions(cluster: LocalCluster) -> list[str]:
    """Partitions of DST with an open transaction (DescribeProducers on each broker), and ids not complete."""
    from click.testing import CliRunner

    from tinystream.cli import cli

    problems = []
    hanging = CliRunner().invoke(cli, ["transactions", "hanging", "--max-transaction-timeout", "0", "--json",
                                       "-b", cluster.bootstrap])
    if hanging.exit_code != 0 or hanging.output.strip() not in ("[]", ""):
        problems.append(f"open transactions in partitions: {hanging.output.strip()[:300]}")
    listed = CliRunner().invoke(cli, ["transactions", "list", "--json", "-b", cluster.bootstrap])
    if '"Ongoing"' in listed.output or '"Prepare' in listed.output:
        problems.append(f"coordinators: {listed.output.strip()[:300]}")
    return problems


@pytest.mark.chaos
@pytest.mark.slow
def test_transactional_pipeline_is_exactly_once_under_faults(chaos_cluster: LocalCluster, tmp_path: Path) -> None:
    cluster = chaos_cluster
    url = cluster.controller_url
    _create_topics(cluster.bootstrap)

    def converge(what: str) -> None:
        topics = [SRC, DST, OFFSETS_TOPIC] + ([TXN_STATE] if _exists(TXN_STATE) else [])
        took = wait_converged(url, token=cluster.admin_token, topics=topics, brokers=BROKERS,
                              timeout_s=CONVERGE_TIMEOUT_S)
        print(f"chaos-txn: {what}: full ISRs again after {took:.1f} s", flush=True)

    def _exists(topic: str) -> bool:
        return any(t["name"] == topic for t in metadata(url, token=cluster.admin_token).get("topics", []))

    converge("topics created")
    feeder = Feeder(cluster.bootstrap)
    stop_file = tmp_path / "stop"
    supervisor = Supervisor(cluster.bootstrap, stop_file, cluster.log_dir)  # kept after the run
    feeder.start()
    supervisor.start()
    try:
        _run_faults_and_check(cluster, url, feeder, supervisor, stop_file, converge, _exists)
    finally:
        feeder.halt.set()
        supervisor.abandon()


def _run_faults_and_check(cluster, url, feeder, supervisor, stop_file, converge, _exists) -> None:
    def kill_and_return(broker_id: int, what: str) -> None:
        victim = cluster.broker(broker_id)
        victim.kill()
        time.sleep(6)  # past the session timeout: leadership moves, the pipeline works through it
        victim.start()
        converge(f"{what} (broker {broker_id}) killed and back")

    time.sleep(8)
    assert _exists(TXN_STATE), "the worker's transactional producer did not reach its coordinator"
    converge("pipeline running")

    def image():
        return metadata(url, token=cluster.admin_token)

    kill_and_return(leader_of(image(), DST, 2), "leader of txn-out-2")
    kill_and_return(leader_of(image(), TXN_STATE, partition_for_group(TXN_ID, TXN_STATE_PARTITIONS)),
                    "transaction coordinator")
    kill_and_return(leader_of(image(), OFFSETS_TOPIC, partition_for_group(GROUP, 6)), "group coordinator")
    supervisor.kill_worker()
    time.sleep(12)  # the next worker fences the killed one, aborts its transaction, rejoins the group
    print(f"chaos-txn: worker SIGKILLed; runs so far {supervisor.runs}", flush=True)
    paused = cluster.broker(leader_of(image(), DST, 4))
    paused.pause()
    time.sleep(6)
    paused.resume()
    converge("a broker frozen past the session timeout and resumed")
    coordinator = leader_of(image(), TXN_STATE, partition_for_group(TXN_ID, TXN_STATE_PARTITIONS))
    frozen = cluster.broker(coordinator)
    frozen.pause()
    time.sleep(6)  # 2x the session timeout: fenced, its coordinator partition led elsewhere
    moved = leader_of(image(), TXN_STATE, partition_for_group(TXN_ID, TXN_STATE_PARTITIONS))
    frozen.resume()
    assert moved != coordinator, f"the transaction coordinator stayed on frozen broker {coordinator}"
    converge(f"the transaction coordinator (broker {coordinator}) frozen past the session timeout and resumed")
    assert frozen.bootstrap is not None
    assert asyncio.run(_describe_error(frozen.bootstrap)) == ErrorCode.not_coordinator, \
        f"broker {coordinator} still answers as the transaction coordinator after it was fenced"

    feeder.halt.set()
    feeder.join(150)
    assert not feeder.errors, f"the feeder's records failed: {feeder.errors[:3]}"
    ends = {p: len(values) for p, values in _read(cluster.bootstrap, SRC, committed=False).items()}
    stop_file.write_text(json.dumps(ends))
    if not supervisor.finished.wait(240):
        tail = (cluster.log_dir / f"worker-{len(supervisor.runs)}.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"the worker did not finish: runs {supervisor.runs}; its log ends:\n{tail}")

    source = _read(cluster.bootstrap, SRC, committed=False)
    output = _read(cluster.bootstrap, DST, committed=True)
    everything = _read(cluster.bootstrap, DST, committed=False)
    lost = sum(len(set(source[p]) - {v.lower() for v in output[p]}) for p in range(PARTITIONS))
    duplicated = sum(len(output[p]) - len(set(output[p])) for p in range(PARTITIONS))
    reordered = [p for p in range(PARTITIONS) if [v.lower() for v in output[p]] != source[p] and not lost]
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
    try:
        committed = {tp.partition: tp.offset for tp in
                     consumer.committed([TopicPartition(SRC, p) for p in range(PARTITIONS)], timeout=10)}
    finally:
        consumer.close()
    restarts = len(supervisor.runs) - 1
    print("\n=== transactional chaos figures ===")
    print(f"input records             {sum(len(v) for v in source.values())} (acknowledged {feeder.acked})")
    print(f"output records committed  {sum(len(v) for v in output.values())}; in the log with aborted ones "
          f"{sum(len(v) for v in everything.values())}")
    print(f"lost {lost}, duplicated {duplicated}, partitions out of order {reordered} (all must be 0 / empty)")
    print(f"worker restarts           {restarts} {[r for r in supervisor.runs if r[0] != 0][:5]}")
    print(f"committed offsets         {dict(sorted(committed.items()))}")

    assert lost == 0 and duplicated == 0 and not reordered
    assert {p: [v.lower() for v in output[p]] for p in range(PARTITIONS)} == source
    assert committed == {p: len(source[p]) for p in range(PARTITIONS)}
    assert feeder.acked == sum(len(v) for v in source.values())
    assert restarts >= 1, "the worker was SIGKILLed once: a second run must have finished the work"
    problems = _open_transactions(cluster)
    assert not problems, problems
