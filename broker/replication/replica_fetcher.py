"""Followers copy their leaders: one fetcher task per leader broker (Kafka's ReplicaFetcherThread).

    fetchers = ReplicaFetcherManager(broker_id=2, replicas=rm, cluster=view, max_bytes=1 << 20)
    fetchers.follow(tp, leader=1, leader_epoch=4)    # from each applied metadata image
    fetchers.unfollow(tp)                           # became leader, offline, or deleted
    await fetchers.stop()

Each task owns one connection to its leader (the broker's own protocol
client, `protocol.client.KafkaClient`) and loops:

1. Partitions that follow a new leader epoch truncate first (KIP-101 /
   KIP-279): OffsetForLeaderEpoch names our latest epoch; the leader answers
   the largest epoch it has at or below it and where that epoch ends; we cut
   our log at min(that end, our own end of that epoch). A leader without an
   answer (-1) makes us fall back to our HW.
2. A Fetch with `replica_id` = our id and `current_leader_epoch` (KIP-320)
   for every partition ready, long-polling `max_wait_ms`; records are
   appended with `append_replicated` (offsets and epochs as the leader wrote
   them) and the leader's HW becomes ours (capped at our log end). The fetch
   offset tells the leader our log end offset, which moves its HW and ISR.
   The fetch runs in an incremental fetch session (KIP-227,
   `fetch_sessions.client`): after the first full request, only partitions
   whose fetch offset, epoch or log start moved are sent, partitions no
   longer followed are forgotten, and the leader answers only partitions
   with records or a new HW / log start / error. A session error or a lost
   connection makes the next request full again.
3. Replication throttle (KIP-73, `throttle`): while the follower side's
   rate is over follower.replication.throttled.rate, a partition the topic
   lists in follower.replication.throttled.replicas for this broker, and
   whose log end has not reached the leader's HW (Kafka's
   shouldFollowerThrottle), is left out of the Fetch (and so forgotten by
   the session until it is asked again); the bytes appended for listed
   partitions count against the rate. A Fetch with every partition held back
   is not sent: the fetcher backs off instead.
4. FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER: our metadata is behind;
   the partition waits for the next image (which calls `follow` again).
   Connection errors back off and reconnect; nothing here raises out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import PartitionRequest
from tinystream.broker.fetch_sessions.client import FetchSessionHandler
from tinystream.broker.metadata.cluster import ClusterView
from tinystream.broker.protocol.client import KafkaClient, SaslLogin
from tinystream.broker.protocol.codec import build, millis, schemas
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.security.listener import InterBrokerCredentials
from tinystream.broker.storage.base import LogError
from tinystream.broker.storage.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION = 11  # current_leader_epoch (KIP-320) without KIP-595's diverging-epoch flow
EPOCH_VERSION = 4   # OffsetForLeaderEpoch with replica_id
#: Kafka's replica.fetch.wait.max.ms and replica.fetch.backoff.ms defaults, shortened for quick failover.
FETCH_WAIT_MS = 500
BACKOFF_S = 0.2
REFUSED_RETRY_S = 2.0  # a leader that did not take us for a broker is asked again after this
#: Answers that only mean "start the session again" (the handler already did).
SESSION_ERRORS = frozenset({ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch,
                            ErrorCode.fetch_session_topic_id_error})


def _request(api_key: int, version: int, **fields):
    return build(schemas(api_key, version).request_type, fields)


def _entity(api_key: int, version: int, name: str, **fields):
    return build(schemas(api_key, version).request_class(name), fields)


@dataclass(slots=True)
class FollowState:
    leader_epoch: int
    truncated: bool = False  # OffsetForLeaderEpoch done for this epoch
    paused: bool = False  # the leader said our metadata is stale: wait for a new image
    refused: bool = False  # the leader refused to take us for a broker (said once)
    lag: int | None = None  # leader's HW minus our log end at the last answer (None: none yet)

    @property
    def in_sync(self) -> bool:
        """Caught up with the leader's HW at the last answer (Kafka's PartitionFetchState.isReplicaInSync)."""
        return self.lag is not None and self.lag <= 0


class LeaderFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, FollowState] = {}
        self.wakeup = asyncio.Event()
        self.session = FetchSessionHandler()  # our fetch session on this leader
        self.task = asyncio.ensure_future(self._run())
        self._client: KafkaClient | None = None

    async def stop(self) -> None:
        # Cancel until the task is done: Python 3.11's wait_for (KafkaClient.request) loses a cancel that
        # lands as its answer arrives (gh-86296), and the loop then fetched on, so a broker's stop hung.
        while not self.task.done():
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=1.0)
        if not self.task.cancelled():
            self.task.exception()  # retrieved: a failure of the loop was already logged by it
        await self._close()

    async def _close(self) -> None:
        self.session.handle_error()  # whatever the leader's session holds now, the next fetch is full
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None

    async def _connect(self) -> KafkaClient:
        if self._client is None or self._client.closed.is_set():
            endpoint = self.manager.cluster.peer_endpoint(self.leader_id)
            if endpoint is None:
                raise ConnectionError(f"leader {self.leader_id} is not in the cluster view")
            creds = self.manager.credentials
            login = None
            if creds is not None and creds.mechanism and creds.username and creds.password is not None:
                login = SaslLogin(creds.mechanism, creds.username, creds.password)
            self._client = await KafkaClient.connect(
                endpoint.host, endpoint.port, client_id=f"replica-fetcher-{self.manager.broker_id}",
                ssl_context=creds.ssl_context if creds else None, sasl=login,
            )
        return self._client

    async def _run(self) -> None:
        while True:
            try:
                active = {tp: s for tp, s in self.partitions.items() if not s.paused}
                if not active:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                client = await self._connect()
                pending = {tp: s for tp, s in active.items() if not s.truncated}
                if pending:
                    await self._truncate(client, pending)
                ready = {tp: s for tp, s in self.partitions.items() if s.truncated and not s.paused}
                if ready:
                    await self._fetch(client, ready)
            except asyncio.CancelledError:
                raise
            except (TimeoutError, OSError, ConnectionError) as exc:
                log.debug("fetcher for leader %d: %s; reconnecting", self.leader_id, exc)
                await self._close()
                await asyncio.sleep(BACKOFF_S)
            except Exception:
                log.exception("fetcher for leader %d failed; retrying", self.leader_id)
                await self._close()
                await asyncio.sleep(BACKOFF_S)

    async def _truncate(self, client: KafkaClient, pending: dict[TopicPartition, FollowState]) -> None:
        replicas = self.manager.replicas
        by_topic: dict[str, list] = {}
        for tp, state in pending.items():
            partition = replicas.get(tp)
            if partition is None:
                continue
            entries = partition.log.epoch_entries()
            if not entries and partition.log_end_offset == partition.log_start_offset:
                state.truncated = True  # nothing to cut
                continue
            latest = entries[-1].epoch if entries else -1
            by_topic.setdefault(tp.topic, []).append(
                _entity(23, EPOCH_VERSION, "OffsetForLeaderPartition", partition=tp.partition,
                        current_leader_epoch=state.leader_epoch, leader_epoch=latest)
            )
        if not by_topic:
            return
        response = await client.request(_request(
            23, EPOCH_VERSION, replica_id=self.manager.broker_id,
            topics=tuple(_entity(23, EPOCH_VERSION, "OffsetForLeaderTopic", topic=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
        ))
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                state = pending.get(tp)
                partition = replicas.get(tp)
                if state is None or partition is None or self.partitions.get(tp) is not state:
                    continue
                if p.error_code != ErrorCode.none:
                    self._on_error(tp, state, p.error_code)
                    continue
                if p.leader_epoch < 0 or p.end_offset < 0:
                    offset = partition.high_watermark  # no epoch answer: Kafka's pre-KIP-101 rule
                else:
                    _, own_end = partition.log.end_offset_for_epoch(p.leader_epoch)
                    offset = min(p.end_offset, own_end if own_end >= 0 else p.end_offset)
                try:
                    replicas.truncate(tp, offset)
                except (LogError, ValueError, OSError):
                    log.exception("%s: truncation to %d failed", tp, offset)
                    continue
                state.truncated = True

    async def _fetch(self, client: KafkaClient, ready: dict[TopicPartition, FollowState]) -> None:
        replicas = self.manager.replicas
        quota = replicas.throttles.follower if replicas.throttles is not None else None
        now = replicas.clock()
        wanted: dict[TopicPartition, PartitionRequest] = {}
        offsets: dict[TopicPartition, int] = {}
        held = 0
        for tp, state in ready.items():
            partition = replicas.get(tp)
            if partition is None:
                continue
            if quota is not None and quota.should_throttle(tp, in_sync=state.in_sync, now_ms=now):
                held += 1
                continue
            offsets[tp] = partition.log_end_offset
            wanted[tp] = PartitionRequest(fetch_offset=offsets[tp], partition_max_bytes=self.manager.max_bytes,
                                          current_leader_epoch=state.leader_epoch,
                                          log_start_offset=partition.log_start_offset)
        if not wanted:
            if held:  # everything is throttled: Kafka's fetcher waits replica.fetch.backoff.ms
                await asyncio.sleep(BACKOFF_S)
            return
        plan = self.session.build(wanted)
        by_topic: dict[str, list] = {}
        for tp, r in plan.to_send.items():
            by_topic.setdefault(tp.topic, []).append(
                _entity(1, FETCH_VERSION, "FetchPartition", partition=tp.partition, fetch_offset=r.fetch_offset,
                        partition_max_bytes=r.partition_max_bytes, log_start_offset=r.log_start_offset,
                        current_leader_epoch=r.current_leader_epoch)
            )
        forgotten: dict[str, list[int]] = {}
        for tp in plan.forgotten:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        response = await client.request(_request(
            1, FETCH_VERSION, replica_id=self.manager.broker_id, max_wait=millis(self.manager.max_wait_ms),
            min_bytes=1, max_bytes=self.manager.max_bytes * 8, isolation_level=0,
            session_id=plan.session_id, session_epoch=plan.epoch,
            topics=tuple(_entity(1, FETCH_VERSION, "FetchTopic", topic=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
            forgotten_topics_data=tuple(_entity(1, FETCH_VERSION, "ForgottenTopic", topic=t, partitions=tuple(ps))
                                        for t, ps in forgotten.items()),
            rack_id="",
        ), timeout=self.manager.max_wait_ms / 1000 + 30)
        if not self.session.handle_response(response.error_code, response.session_id):
            if response.error_code in SESSION_ERRORS:
                log.info("fetch session on leader %d: %s; the next fetch is full", self.leader_id,
                         response.error_code.name)
                return
            raise ConnectionError(f"fetch answered {response.error_code!r}")
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                state = ready.get(tp)
                partition = replicas.get(tp)
                # The image may have moved the partition while the fetch was out.
                if state is None or partition is None or self.partitions.get(tp) is not state or partition.is_leader:
                    continue
                if p.error_code != ErrorCode.none:
                    self._on_error(tp, state, p.error_code)
                    continue
                if partition.log_end_offset != offsets[tp]:
                    continue  # truncated meanwhile; the next fetch starts from the new end
                records = p.records or b""
                try:
                    end = replicas.append_replicated(tp, records, p.high_watermark)
                except (LogError, OSError):
                    log.exception("%s: appending the leader's batches failed; truncating to the HW", tp)
                    state.truncated = False
                    continue
                state.lag = max(0, p.high_watermark - end)
                if quota is not None and records and quota.throttled(tp):
                    quota.record(len(records), replicas.clock())

    def _resume(self, tp: TopicPartition, state: FollowState) -> None:
        if self.partitions.get(tp) is state and state.paused:
            state.paused = False
            self.wakeup.set()

    def _on_error(self, tp: TopicPartition, state: FollowState, error: ErrorCode) -> None:
        if error in (ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower,
                     ErrorCode.unknown_topic_or_partition):
            state.paused = True  # wait for the image that tells us who leads now
            log.info("%s: leader %d answered %s; waiting for new metadata", tp, self.leader_id, error.name)
        elif error == ErrorCode.offset_out_of_range:
            state.truncated = False  # find the divergence point again
        elif error in (ErrorCode.topic_authorization_failed, ErrorCode.cluster_authorization_failed):
            # The leader does not take us for a broker: its inter-broker listener must authenticate us
            # (SASL or mTLS, as a broker principal). Asking again at once would only spin: ask again after
            # REFUSED_RETRY_S (or at the next image). Said once, at warning level: nothing replicates until
            # the listener is fixed.
            state.paused = True
            asyncio.get_running_loop().call_later(REFUSED_RETRY_S, self._resume, tp, state)
            if not state.refused:
                state.refused = True
                log.warning("%s: leader %d refused our follower fetch (%s): the inter-broker listener must "
                            "authenticate brokers (SASL or mTLS) and name them super users", tp, self.leader_id,
                            error.name)
        else:
            log.debug("%s: leader %d answered %s", tp, self.leader_id, error.name)


class ReplicaFetcherManager:
    def __init__(
        self,
        *,
        broker_id: int,
        replicas: ReplicaManager,
        cluster: ClusterView,
        max_bytes: int,
        max_wait_ms: int = FETCH_WAIT_MS,
        credentials: InterBrokerCredentials | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.credentials = credentials  # TLS and SASL login towards the leaders' listener
        self.replicas = replicas
        self.cluster = cluster
        self.max_bytes = max_bytes
        self.max_wait_ms = max_wait_ms
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}

    def follow(self, tp: TopicPartition, *, leader: int, leader_epoch: int) -> None:
        """Fetch `tp` from `leader` at `leader_epoch`; a new epoch (or leader) truncates first."""
        current = self._leader_of.get(tp)
        if current is not None and current != leader:
            self.unfollow(tp)
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = self._fetchers[leader] = LeaderFetcher(self, leader)
        state = fetcher.partitions.get(tp)
        if state is None or state.leader_epoch != leader_epoch:
            fetcher.partitions[tp] = FollowState(leader_epoch)
        else:
            state.paused = False
        self._leader_of[tp] = leader
        fetcher.wakeup.set()

    def unfollow(self, tp: TopicPartition) -> None:
        leader = self._leader_of.pop(tp, None)
        if leader is None:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is not None:
            fetcher.partitions.pop(tp, None)

    def following(self) -> dict[TopicPartition, int]:
        return dict(self._leader_of)

    def fetch_sessions(self) -> dict[int, FetchSessionHandler]:
        """Our fetch session on each leader we fetch from (KIP-227), for metrics and tests."""
        return {leader: f.session for leader, f in self._fetchers.items()}

    async def stop(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        self._leader_of.clear()
        await asyncio.gather(*(f.stop() for f in fetchers), return_exceptions=True)
