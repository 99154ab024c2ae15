"""Replication throttles (KIP-73): Kafka's ReplicationQuotaManager, one per side, pure (time passed in).

A replica is throttled on a side when its topic's `<side>.replication.throttled.replicas`
lists it for this broker ("partition:brokerId,..." with brokerId = this broker, or "*"):
the leader side names the leaders' brokers (the ones serving), the follower side the
followers' (the ones fetching); `kafka-reassign-partitions.sh --throttle` writes the
current replicas into the leader list and the moving ones into the follower list.

    should_throttle = listed(tp) and not in_sync and rate > <side>.replication.throttled.rate

- Leader (ReplicaManager.fetch, Kafka's ReplicaManager.shouldLeaderThrottle): a follower
  outside the ISR gets no records for a listed partition while over the rate; the
  bytes served for listed partitions, in the ISR or not, are recorded (KafkaApis
  records `sizeOfThrottledPartitions` after each follower fetch).
- Follower (replica_fetcher, Kafka's ReplicaFetcherThread.shouldFollowerThrottle): a
  listed partition whose fetch offset has not reached the leader's high watermark is
  left out of the next Fetch while over the rate; the bytes appended for listed
  partitions are recorded.

The rate is Kafka's SimpleRate over replication.quota.window.num windows of
replication.quota.window.size.seconds: unlike a client quota's Rate it averages a
fresh burst over the time elapsed (at least one window), not over the full span, so a
move is throttled from its first seconds. Being over is `rate > limit` (Kafka's
Quota.acceptable). In-ISR replicas are never held back, so a throttle cannot take a
healthy follower out of the ISR.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from tinystream.broker.quotas.rate import SampledRate
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.config.settings import BrokerSettings
from tinystream.config.topic_configs import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    InvalidConfig,
    throttled_replicas,
)

UNLIMITED = 2**63 - 1  # the rates' default (Kafka's Long.MAX_VALUE): nothing is held back

#: A topic's config overrides by name (None: no such topic).
TopicConfigs = Callable[[str], Mapping[str, str] | None]


class Side(enum.Enum):
    LEADER = LEADER_THROTTLED_REPLICAS
    FOLLOWER = FOLLOWER_THROTTLED_REPLICAS


class SimpleRate(SampledRate):
    """Kafka's SimpleRate: the window is the time since the oldest sample, but at least one window."""

    __slots__ = ()

    def window_size_ms(self, now_ms: int) -> int:
        super().window_size_ms(now_ms)  # drops the samples out of the window
        oldest = self._samples[0].start_ms if self._samples else now_ms
        return max(now_ms - oldest, self.window_ms)


def listed_partitions(text: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a throttled-replicas value lists for `broker_id` (None: all, "*"). A value that
    does not parse (validated on the way in, so only a hand-edited store) lists nothing."""
    try:
        pairs = throttled_replicas(text)
    except InvalidConfig:
        return frozenset()
    if pairs is None:
        return None
    return frozenset(partition for partition, broker in pairs if broker == broker_id)


class ReplicationQuota:
    """One side's throttle on one broker: which partitions it covers, the limit, and the rate seen."""

    def __init__(self, side: Side, *, broker_id: int, topic_configs: TopicConfigs, samples: int = 11,
                 window_ms: int = 1000) -> None:
        self.side = side
        self.broker_id = broker_id
        self.limit = UNLIMITED  # bytes/s, the effective <side>.replication.throttled.rate
        self._topic_configs = topic_configs
        self._rate = SimpleRate(samples, window_ms)
        self._parsed: dict[str, frozenset[int] | None] = {}  # config text -> partitions listed here
        self.recorded_bytes = 0  # bytes of listed partitions replicated (Kafka's <side>Replication byte rate)
        self.held_back = 0  # partition fetches left without records because the rate was over the limit

    def throttled(self, tp: TopicPartition) -> bool:
        """Whether `tp`'s topic lists this broker's replica of it on this side (Kafka's isThrottled)."""
        configs = self._topic_configs(tp.topic)
        text = configs.get(self.side.value) if configs else None
        if not text:
            return False
        listed = self._parsed.get(text)
        if text not in self._parsed:
            if len(self._parsed) > 1024:  # values seen once each: a bound, not a cache policy
                self._parsed.clear()
            listed = self._parsed[text] = listed_partitions(text, self.broker_id)
        return listed is None or tp.partition in listed

    def exceeded(self, now_ms: int) -> bool:
        """Over the limit now (Kafka's isQuotaExceeded)."""
        return self.limit < UNLIMITED and self._rate.rate(now_ms) > self.limit

    def should_throttle(self, tp: TopicPartition, *, in_sync: bool, now_ms: int) -> bool:
        """Hold `tp` back now: listed, out of the ISR, and over the limit (counted when true)."""
        if in_sync or not self.throttled(tp) or not self.exceeded(now_ms):
            return False
        self.held_back += 1
        return True

    def record(self, nbytes: int, now_ms: int) -> None:
        """Bytes replicated for listed partitions: they count against the limit."""
        if nbytes > 0:
            self._rate.record(nbytes, now_ms)
            self.recorded_bytes += nbytes

    def rate(self, now_ms: int) -> float:
        """Bytes/s replicated for listed partitions, as the limit sees it."""
        return self._rate.rate(now_ms)


class ReplicationThrottles:
    """Both sides on one broker; `use_settings` takes the effective rates (a dynamic config changed)."""

    def __init__(self, *, broker_id: int, topic_configs: TopicConfigs, samples: int = 11,
                 window_ms: int = 1000) -> None:
        self.leader = ReplicationQuota(Side.LEADER, broker_id=broker_id, topic_configs=topic_configs,
                                       samples=samples, window_ms=window_ms)
        self.follower = ReplicationQuota(Side.FOLLOWER, broker_id=broker_id, topic_configs=topic_configs,
                                         samples=samples, window_ms=window_ms)

    @classmethod
    def for_broker(cls, settings: BrokerSettings, topic_configs: TopicConfigs) -> ReplicationThrottles:
        throttles = cls(broker_id=settings.broker_id, topic_configs=topic_configs,
                        samples=settings.replication_quota_window_num,
                        window_ms=settings.replication_quota_window_size_seconds * 1000)
        throttles.use_settings(settings)
        return throttles

    def use_settings(self, settings: BrokerSettings) -> None:
        """The effective (static + dynamic) rates, at start and whenever a dynamic broker config changes."""
        self.leader.limit = settings.leader_replication_throttled_rate
        self.follower.limit = settings.follower_replication_throttled_rate
