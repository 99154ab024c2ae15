"""Prometheus metrics of one broker, in a registry of its own.

A per-broker CollectorRegistry (not prometheus_client's global one) lets
several brokers run in one process (tests, `tinystream dev`) without their
series colliding. Counters are updated on the request path through cached
label children (one dict lookup per update); partition gauges (log size, log
end offset, high watermark) are computed when scraped, so appends pay
nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tinystream.broker.groups.stats import GroupStats
from tinystream.broker.replication.partition import Partition
from tinystream.broker.storage.topic_partition import TopicPartition

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _PartitionCollector(Collector):
    def __init__(self, partitions: Callable[[], Iterable[Partition]]) -> None:
        self._partitions = partitions

    def collect(self):
        size = GaugeMetricFamily("tinystream_log_size_bytes", "Bytes held by a partition's log", labels=["topic", "partition"])
        end = GaugeMetricFamily("tinystream_log_end_offset", "Log end offset", labels=["topic", "partition"])
        start = GaugeMetricFamily("tinystream_log_start_offset", "Log start offset", labels=["topic", "partition"])
        hw = GaugeMetricFamily("tinystream_high_watermark", "High watermark", labels=["topic", "partition"])
        segments = GaugeMetricFamily("tinystream_log_segments", "Segments in a partition's log", labels=["topic", "partition"])
        appended = CounterMetricFamily("tinystream_log_records_appended", "Records appended by produce, as leader",
                                       labels=["topic", "partition"])
        read = CounterMetricFamily("tinystream_log_records_read", "Records returned to consumers (not followers)",
                                   labels=["topic", "partition"])
        expired = CounterMetricFamily("tinystream_log_records_expired",
                                      "Offsets removed from the log's start by retention", labels=["topic", "partition"])
        lso = GaugeMetricFamily("tinystream_last_stable_offset",
                                "Last stable offset: read_committed consumers read up to here (KIP-98)",
                                labels=["topic", "partition"])
        open_txns = GaugeMetricFamily("tinystream_open_transactions",
                                      "Producers with a transaction open in the partition", labels=["topic", "partition"])
        count = 0
        leaders = 0
        for p in self._partitions():
            labels = [p.tp.topic, str(p.tp.partition)]
            count += 1
            leaders += p.is_leader
            try:
                size.add_metric(labels, p.log.size_bytes())
                segments.add_metric(labels, p.log.segment_count())
            except Exception:  # a closed or failing log: skip it rather than fail the scrape
                continue
            end.add_metric(labels, p.log_end_offset)
            start.add_metric(labels, p.log_start_offset)
            hw.add_metric(labels, p.high_watermark)
            lso.add_metric(labels, p.last_stable_offset)
            open_txns.add_metric(labels, len(p.producers.ongoing))
            appended.add_metric(labels, p.records_appended)
            read.add_metric(labels, p.records_read)
            expired.add_metric(labels, p.records_expired)
        yield GaugeMetricFamily("tinystream_partitions", "Partitions hosted by this broker", value=count)
        yield GaugeMetricFamily("tinystream_leader_partitions", "Partitions this broker leads", value=leaders)
        yield from (size, end, start, hw, lso, open_txns, segments, appended, read, expired)


class _BrokerStateCollector(Collector):
    """Scrape-time views of the broker's state (registered by the admin HTTP, which has the context).

    Purgatory size, under-replicated and offline partitions, consumer-group lag
    of the groups coordinated here; and ISR shrinks / expands and leader
    elections counted by comparing each partition's ISR and leader epoch with
    what the previous scrape saw (Kafka counts them where they happen; here two
    changes that cancel out between scrapes go uncounted, see METRICS.md).
    """
    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._seen: dict[Any, tuple[int, frozenset[int], bool]] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leader_elections = 0

    def observe(self) -> tuple[int, int]:
        """Update the change counters; returns (under-replicated, offline) among partitions led or hosted here."""
        under = offline = 0
        seen: dict[Any, tuple[int, frozenset[int], bool]] = {}
        for p in self._ctx.replicas.partitions():
            state = p.state
            isr = frozenset(state.isr)
            leading = bool(p.is_leader)
            previous = self._seen.get(p.tp)
            if previous is not None:
                epoch, old_isr, was_leading = previous
                if leading and p.leader_epoch > epoch:
                    self.leader_elections += 1
                if leading and was_leading:
                    self.isr_shrinks += bool(old_isr - isr)
                    self.isr_expands += bool(isr - old_isr)
            seen[p.tp] = (p.leader_epoch, isr, leading)
            if state.leader is None or state.leader < 0:
                offline += 1
            elif leading and len(isr) < len(state.replicas):
                under += 1
        self._seen = seen
        return under, offline

    def collect(self):
        yield from self._replication_families()
        parked = ("purgatory", "follower_purgatory", "acks_waiters")
        purgatories = (getattr(self._ctx.replicas, name, None) for name in parked)
        yield GaugeMetricFamily("tinystream_purgatory_size",
                                "Requests parked in the purgatory (long-poll fetches and acks=all produces)",
                                value=sum(p.waiting for p in purgatories if p is not None))
        yield from self._fetch_session_families()
        yield from _throttle_families(self._ctx.replicas)
        yield from self._group_families()
        yield self._transaction_family()

    def _replication_families(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Partitions under-replicated or offline now, and the ISR and leader changes seen between scrapes."""
        under, offline = self.observe()
        yield GaugeMetricFamily("tinystream_under_replicated_partitions",
                                "Partitions led here whose ISR is smaller than their replica set", value=under)
        yield GaugeMetricFamily("tinystream_offline_partitions",
                                "Partitions hosted here that have no leader", value=offline)
        yield CounterMetricFamily("tinystream_isr_shrinks", "ISR shrinks seen on partitions led here",
                                  value=self.isr_shrinks)
        yield CounterMetricFamily("tinystream_isr_expands", "ISR expands seen on partitions led here",
                                  value=self.isr_expands)
        yield CounterMetricFamily("tinystream_leader_elections",
                                  "Leader epochs this broker took over as leader", value=self.leader_elections)
        yield CounterMetricFamily("tinystream_follower_fetch_requests",
                                  "Consumer fetches that read a partition this broker follows (KIP-392)",
                                  value=getattr(self._ctx.replicas, "follower_fetches", 0))

    def _fetch_session_families(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """KIP-227's cache, as Kafka's NumIncrementalFetchSessions and friends; nothing without sessions."""
        sessions = getattr(self._ctx, "fetch_sessions", None)
        if sessions is None:
            return
        yield GaugeMetricFamily("tinystream_fetch_sessions", "Incremental fetch sessions cached",
                                value=len(sessions.cache))
        yield GaugeMetricFamily("tinystream_fetch_session_partitions",
                                "Partitions held across all fetch sessions", value=sessions.cache.partitions)
        yield CounterMetricFamily("tinystream_fetch_session_evictions",
                                  "Fetch sessions evicted to make room for new ones", value=sessions.cache.evictions)
        kinds = CounterMetricFamily("tinystream_fetch_session_requests",
                                    "Fetch requests by session context (full, incremental, sessionless, error)",
                                    labels=["kind"])
        for kind, n in sorted(sessions.requests.items(), key=lambda kv: kv[0].value):
            kinds.add_metric([kind.value], n)
        yield kinds
        yield CounterMetricFamily("tinystream_fetch_requests_by_topic_id",
                                  "Fetch requests naming topics by id (v13+, KIP-516)", value=sessions.by_topic_id)

    def _group_families(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Lag and committed offsets of the groups coordinated here, KIP-848 groups' epochs and members,
        and what happened to the groups; the families are there (empty) without a coordinator."""
        lag = GaugeMetricFamily("tinystream_consumer_group_lag",
                                "High watermark minus committed offset, for groups coordinated here",
                                labels=["group", "topic", "partition"])
        committed_g = GaugeMetricFamily("tinystream_consumer_group_committed_offset",
                                        "Committed offset, for groups coordinated here",
                                        labels=["group", "topic", "partition"])
        # KIP-848 groups: how far their epoch went, and their members by reconciliation state.
        group_epoch = GaugeMetricFamily("tinystream_consumer_group_epoch",
                                        "Group epoch of the consumer-protocol (KIP-848) groups coordinated here",
                                        labels=["group"])
        group_members = GaugeMetricFamily("tinystream_consumer_group_members",
                                          "Members of the consumer-protocol (KIP-848) groups coordinated here, "
                                          "by reconciliation state", labels=["group", "state"])
        groups = getattr(self._ctx, "groups", None)
        activity = _GroupActivity()
        if groups is not None:
            coordinator = groups.coordinator
            for listing in coordinator.list_groups():
                consumer_group = coordinator.consumer_group(listing.group_id)
                if consumer_group is not None:
                    _add_consumer_group(group_epoch, group_members, listing.group_id, consumer_group)
                stats = coordinator.stats(listing.group_id)
                if stats is not None:
                    activity.add(listing.group_id, stats)
                for (topic, index), offset in coordinator.committed(listing.group_id).items():
                    labels = [listing.group_id, topic, str(index)]
                    committed_g.add_metric(labels, offset)
                    p = self._ctx.replicas.get(TopicPartition(topic, index))
                    if p is not None and offset >= 0:
                        lag.add_metric(labels, max(p.high_watermark - offset, 0))
        yield lag
        yield committed_g
        yield group_epoch
        yield group_members
        yield from activity.families()

    def _transaction_family(self) -> GaugeMetricFamily:
        """Transactional ids coordinated here, by state (empty without a transaction coordinator)."""
        states = GaugeMetricFamily("tinystream_transactional_ids",
                                   "Transactional ids coordinated here, by transaction state", labels=["state"])
        transactions = getattr(self._ctx, "transactions", None)
        if transactions is not None:
            by_state: dict[str, int] = {}
            for d in transactions.coordinator.list_transactions():
                by_state[d.state.kafka_name] = by_state.get(d.state.kafka_name, 0) + 1
            for state, n in sorted(by_state.items()):
                states.add_metric([state], n)
        return states


def _throttle_families(replicas: Any) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The replication throttles (KIP-73), per side: Kafka's LeaderReplication / FollowerReplication byte
    rates, with the bytes behind them and the partition fetches held back over the limit."""
    throttles = getattr(replicas, "throttles", None)
    if throttles is None:
        return
    now = replicas.clock()
    counted = CounterMetricFamily("tinystream_replication_throttled_bytes",
                                  "Bytes replicated for partitions a replication throttle lists, by side",
                                  labels=["side"])
    held = CounterMetricFamily("tinystream_replication_throttled_fetches",
                               "Partition fetches given no records because the side's throttled rate was over",
                               labels=["side"])
    rate = GaugeMetricFamily("tinystream_replication_throttled_rate_bytes",
                             "Bytes/s replicated for throttled partitions, as the throttle measures it",
                             labels=["side"])
    for name, quota in (("leader", throttles.leader), ("follower", throttles.follower)):
        counted.add_metric([name], quota.recorded_bytes)
        held.add_metric([name], quota.held_back)
        rate.add_metric([name], quota.rate(now))
    yield from (counted, held, rate)


def _add_consumer_group(group_epoch: GaugeMetricFamily, group_members: GaugeMetricFamily, group_id: str,
                        consumer_group: Any) -> None:
    """One KIP-848 group's epoch, and its members counted by reconciliation state."""
    group_epoch.add_metric([group_id], consumer_group.group_epoch)
    by_state: dict[str, int] = {}
    for member in consumer_group.members.values():
        by_state[member.state.value] = by_state.get(member.state.value, 0) + 1
    for state, n in sorted(by_state.items()):
        group_members.add_metric([group_id, state], n)


class _GroupActivity:
    """Counter families of what happened to the groups coordinated here (broker/groups/stats.py)."""

    def __init__(self) -> None:
        labels = ["group"]
        self.joins = CounterMetricFamily("tinystream_consumer_group_joins", "Members added to the group", labels=labels)
        self.leaves = CounterMetricFamily("tinystream_consumer_group_leaves", "Members removed by LeaveGroup",
                                          labels=labels)
        self.expirations = CounterMetricFamily("tinystream_consumer_group_expirations",
                                               "Members removed by a session or sync timeout", labels=labels)
        self.rebalances = CounterMetricFamily("tinystream_consumer_group_rebalances", "Rebalances started, by cause",
                                              labels=["group", "cause"])
        self.commits = CounterMetricFamily("tinystream_consumer_group_commits", "OffsetCommits stored", labels=labels)
        self.records = CounterMetricFamily("tinystream_consumer_group_records_committed",
                                           "Sum of committed-offset advances (records the group consumed)", labels=labels)

    def add(self, group_id: str, stats: GroupStats) -> None:
        self.joins.add_metric([group_id], stats.joins)
        self.leaves.add_metric([group_id], stats.leaves)
        self.expirations.add_metric([group_id], stats.expirations)
        for cause, count in stats.rebalances.items():
            self.rebalances.add_metric([group_id, cause.value], count)
        self.commits.add_metric([group_id], stats.commits)
        self.records.add_metric([group_id], stats.records_committed)

    def families(self) -> tuple[CounterMetricFamily, ...]:
        return self.joins, self.leaves, self.expirations, self.rebalances, self.commits, self.records


class BrokerMetrics:
    def __init__(self, broker_id: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.broker_id = broker_id
        self.requests = Counter(
            "tinystream_requests", "Requests served, by API", ["api"], registry=self.registry
        )
        self.latency = Histogram(
            "tinystream_request_latency_seconds", "Time from decode to response, by API", ["api"],
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        # Whole frames, every API (Kafka's RequestBytes / response size): what a fetch session saves shows here.
        self.request_bytes = Counter("tinystream_request_bytes", "Request frame bytes received, by API", ["api"],
                                     registry=self.registry)
        self.response_bytes = Counter("tinystream_response_bytes", "Response frame bytes sent, by API", ["api"],
                                      registry=self.registry)
        self.throttled = Counter("tinystream_quota_throttled", "Requests a client quota throttled, by quota type",
                                 ["quota"], registry=self.registry)
        self.throttle_seconds = Counter("tinystream_quota_throttle_seconds",
                                        "Throttle time handed to clients over their quotas, by quota type", ["quota"],
                                        registry=self.registry)
        self.bytes_in = Counter("tinystream_bytes_in", "Record batch bytes appended, by topic", ["topic"], registry=self.registry)
        self.bytes_out = Counter("tinystream_bytes_out", "Record batch bytes fetched, by topic", ["topic"],
                                 registry=self.registry)
        self.messages_in = Counter("tinystream_messages_in", "Records appended, by topic", ["topic"], registry=self.registry)
        self.produce_errors = Counter(
            "tinystream_produce_errors", "Partition-level produce errors, by error", ["error"], registry=self.registry
        )
        # KIP-392: partitions a leader answered with another replica to read from (the follower counts the
        # fetches it then serves, tinystream_follower_fetch_requests).
        self.preferred_replicas = Counter(
            "tinystream_preferred_read_replica_answers",
            "Fetch partitions answered with a preferred read replica (the consumer is sent to a follower)",
            registry=self.registry)
        self.protocol_errors = Counter(
            "tinystream_protocol_errors", "Connections closed for bad input", registry=self.registry
        )
        self.connections = Gauge("tinystream_connections", "Open client connections", registry=self.registry)
        # KIP-368 (Kafka: successful-reauthentication-total, failed-reauthentication-total,
        # expired-connections-killed-count).
        self.sasl_reauthentications = Counter(
            "tinystream_sasl_reauthentications", "SASL re-authentications on open connections, by result",
            ["result"], registry=self.registry)
        self.expired_connections_killed = Counter(
            "tinystream_expired_connections_killed",
            "Connections closed because their SASL session ended without a re-authentication",
            registry=self.registry)
        self._api_children: dict[str, tuple] = {}
        self._topic_children: dict[str, tuple] = {}

    def watch_partitions(self, partitions: Callable[[], Iterable[Partition]]) -> None:
        self.registry.register(_PartitionCollector(partitions))

    def watch_broker(self, ctx: Any) -> None:
        """Scrape-time broker state (purgatory, URP, offline, ISR changes, group lag); once per registry."""
        if getattr(self, "_state_collector", None) is None:
            self._state_collector = _BrokerStateCollector(ctx)
            self.registry.register(self._state_collector)

    def observe_request(self, api: str, seconds: float, request_bytes: int = 0, response_bytes: int = 0) -> None:
        children = self._api_children.get(api)
        if children is None:
            children = self._api_children[api] = (self.requests.labels(api), self.latency.labels(api),
                                                  self.request_bytes.labels(api), self.response_bytes.labels(api))
        children[0].inc()
        children[1].observe(seconds)
        children[2].inc(request_bytes)
        children[3].inc(response_bytes)

    def _topic(self, topic: str) -> tuple:
        children = self._topic_children.get(topic)
        if children is None:
            children = self._topic_children[topic] = (
                self.bytes_in.labels(topic), self.bytes_out.labels(topic), self.messages_in.labels(topic)
            )
        return children

    def record_in(self, topic: str, size: int, records: int) -> None:
        children = self._topic(topic)
        children[0].inc(size)
        children[2].inc(records)

    def observe_throttle(self, quota: str, throttle_ms: int) -> None:
        """A request over a client quota: produce, fetch, request (request_percentage) or controller_mutation
        (Kafka's per-client throttle-time metric, summed)."""
        self.throttled.labels(quota).inc()
        self.throttle_seconds.labels(quota).inc(throttle_ms / 1000)

    def record_preferred_replicas(self, partitions: int) -> None:
        self.preferred_replicas.inc(partitions)

    def record_out(self, topic: str, size: int) -> None:
        self._topic(topic)[1].inc(size)

    def forget_topic(self, topic: str) -> None:
        if self._topic_children.pop(topic, None) is not None:
            for metric in (self.bytes_in, self.bytes_out, self.messages_in):
                try:
                    metric.remove(topic)
                except KeyError:
                    pass

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
