"""Fetch (key 1, v4-14): stored batches, byte for byte, with long polling.

On a client connection (`ClientInfo.file_ranges`) the record sets are file
ranges (storage/file_range.py), never copied into the response: it is encoded
in parts and the connection writes them from the files (sendfile on
plaintext, as Kafka's zero-copy fetch; on TLS read a piece at a time into the
SSL transport). Nothing here transforms stored records (no down-conversion
below v4; aborted transactions are listed, the client drops them), so every
record set may take that path.

Flow: who fetches (once), the fetch session's partitions, the gates per
partition (`fetch_gates`: trust, ACL, topic id, replica, divergence), one
read of the rest through the purgatory, the session's answer, the response.

- Sessions (KIP-227, `fetch_session` and `fetch_sessions`): a full fetch
  (epoch 0) opens a session when the cache has room; an incremental one
  (epoch > 0) names only changed partitions, the session supplies the rest,
  and the answer carries only partitions with news. Everything below reads
  the context's partitions (the whole session), so long polls wait on all
  of them; session errors are answered at the top level with session_id 0.
- isolation_level (KIP-98): read_committed (1) reads up to each partition's
  last stable offset and gets the aborted transactions that overlap the
  range returned (producer id, first offset), from the partition's aborted
  index; the client drops those records and skips control batches.
  read_uncommitted reads to the high watermark and gets no list (null).
  Both see `last_stable_offset`.
- replica_id >= 0 marks a follower broker's fetch (it reads past the high
  watermark and moves it). Only a peer broker of this cluster may send one
  (CVE-2018-1288), and only on the inter-broker listener, logged in as a
  broker principal (BrokerContext.from_broker: never on a listener that
  authenticates no one);
  anyone else gets TOPIC_AUTHORIZATION_FAILED on every partition, as Kafka
  answers a fetcher without ClusterAction. With an authorizer the follower
  also needs CLUSTER_ACTION on the cluster (the inter-broker user is a super
  user), and a consumer READ on each topic.
- v13+ names topics by id (KIP-516): ids are resolved to names when the
  request is read; an id we do not know, or a topic deleted and created
  again under the same name since the session cached its id, is answered
  UNKNOWN_TOPIC_ID on its partitions. Sessions opened by id serve only
  requests by id (FETCH_SESSION_TOPIC_ID_ERROR otherwise).
- waits are bounded (MAX_WAIT_MS), so a parked Fetch holds nothing for days.
- v12 `last_fetched_epoch` (KIP-595): when the fetcher's last epoch ends
  before its fetch offset here, the answer carries `diverging_epoch` and no
  records, so the fetcher truncates first.
- v11+ from a consumer (KIP-392, `read_replica`): a leader whose
  replica.selector.class picks another replica answers that partition with
  `preferred_read_replica` and no records; a follower serves such fetches up
  to its high watermark. Older versions read from the leader only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import PartitionRequest
from tinystream.broker.fetch_sessions.context import ContextKind, FetchContext
from tinystream.broker.handlers import fetch_gates, fetch_idle, fetch_session, read_replica
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis, to_millis
from tinystream.broker.replication.replica_manager import FetchedPartition, FetchPartition, close_ranges
from tinystream.broker.storage.topic_partition import TopicPartition

READ_COMMITTED = 1
#: The longest a Fetch waits for data, whatever it asks (max_wait is an int32 of ms: 24 days). A wait past
#: the clients' own request.timeout.ms default (30 s) outlives the asker; an answer then is empty, and clients
#: fetch again.
MAX_WAIT_MS = 30_000


async def handle_fetch(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    fetcher = _fetcher(ctx, call)
    session = fetch_session.open_context(ctx, call, privileged=fetcher.peer)
    if session.error != ErrorCode.none:
        return _top_level_error(call, session.error)
    peer = fetcher.peer
    read_committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    from_followers = read_replica.may_read_followers(call.version, peer)
    partitions, idle = _split(ctx, fetcher, session, read_committed,
                              redirects=from_followers and read_replica.redirects_reads(ctx))
    requests, answered, diverging = _gate(ctx, fetcher, partitions)
    preferred = read_replica.redirect(ctx, call, requests, answered) if from_followers else {}
    live = [r for r in requests if r.tp not in answered]
    fetched = await ctx.replicas.fetch(
        live,
        replica_id=fetcher.replica_id if peer else -1,
        min_bytes=body.min_bytes,
        max_bytes=min(getattr(body, "max_bytes", 2**31 - 1), ctx.settings.fetch_max_bytes),  # Kafka's broker cap
        # An error or a divergence already decided answers at once (Kafka's fetchMessages).
        max_wait_ms=0 if answered else min(to_millis(body.max_wait), MAX_WAIT_MS),
        read_committed=read_committed and not peer,
        # Record sets stay in the segment files; the connection's writer sends them (response_writer.py).
        as_ranges=call.client.file_ranges,
        leader_only=not from_followers,
        # A long poll woken with nothing else read also reads the idle partitions (read after `live`).
        later=(lambda: _idle_requests(ctx, fetcher, session, idle)) if idle else None,
        later_keys=idle,
    )
    answered.update((f.tp, f) for f in fetched[:len(live)])
    results = [answered[r.tp] for r in requests] + fetched[len(live):]
    if preferred:
        ctx.metrics.record_preferred_replicas(len(preferred))
    carried = fetch_session.answer(ctx, session, results,
                                   must_include=diverging.keys() | preferred.keys())  # Kafka's FetchSession too
    if carried.error != ErrorCode.none:
        close_ranges(fetched)  # answered without records: their files now, not when collected
        return _top_level_error(call, carried.error)
    return _response(ctx, call, carried.results, diverging, read_committed, call.version, carried.session_id,
                     fetch_session.topic_ids(session, carried.results), preferred)


def _split(ctx: BrokerContext, fetcher: fetch_gates.Fetcher, session: FetchContext, read_committed: bool, *,
           redirects: bool) -> tuple[Iterable[tuple[TopicPartition, PartitionRequest]], list[TopicPartition]]:
    """(partitions to read, idle ones left out): an incremental fetch reads only partitions that may have
    news (`fetch_idle`); any other fetch reads all of its context's partitions. A follower's position on
    its idle partitions is recorded here, as the read records it on the others."""
    cached = session.session
    if session.kind is not ContextKind.INCREMENTAL or cached is None or not fetch_idle.eligible(
            fetcher, redirects=redirects):
        return session.partitions, []
    busy, idle = fetch_idle.split(fetcher, cached.partitions, ctx.replicas.get, read_committed=read_committed)
    if fetcher.peer and idle:
        partitions = cached.partitions
        ctx.replicas.record_follower(fetcher.replica_id, (
            (tp, (r := partitions[tp].request).fetch_offset, r.log_start_offset) for tp in idle))
    return busy, idle


def _idle_requests(ctx: BrokerContext, fetcher: fetch_gates.Fetcher, session: FetchContext,
                   idle: list[TopicPartition]) -> list[FetchPartition]:
    """The read requests of a session's idle partitions, once a long poll wakes."""
    assert session.session is not None
    cap = ctx.settings.fetch_max_bytes
    cached = session.session.partitions
    return [_read_request(tp, c.request, cap, fetcher.peer) for tp in idle if (c := cached.get(tp)) is not None]


def _read_request(tp: TopicPartition, p: PartitionRequest, cap: int, peer: bool) -> FetchPartition:
    """What the replica manager reads for one partition of the request (a follower's log start included)."""
    return FetchPartition(tp, p.fetch_offset, min(p.partition_max_bytes, cap), p.current_leader_epoch,
                          p.log_start_offset if peer else -1)


def _fetcher(ctx: BrokerContext, call: Call) -> fetch_gates.Fetcher:
    """Who fetches. A follower's Fetch moves the high watermark: believe replica_id only from a broker on
    the inter-broker listener, with CLUSTER_ACTION when an authorizer is on."""
    replica_id = getattr(call.body, "replica_id", -1)
    peer = (replica_id >= 0 and ctx.from_broker(call.client) and ctx.cluster.is_peer(replica_id)
            and authz.allowed_cluster(ctx, call, AclOperation.CLUSTER_ACTION))
    return fetch_gates.Fetcher.of(replica_id=replica_id, peer=peer,
                                  may_read=authz.topic_filter(ctx, call, AclOperation.READ), topic=ctx.topics.store.get)


def _gate(
    ctx: BrokerContext, fetcher: fetch_gates.Fetcher, partitions: Iterable[tuple[TopicPartition, PartitionRequest]]
) -> tuple[list[FetchPartition], dict[TopicPartition, FetchedPartition], dict[TopicPartition, tuple[int, int]]]:
    """(what to read, answers decided before reading, divergences): every partition through the gates;
    a refused one is answered with its error, a diverged one with its epoch and no records."""
    requests: list[FetchPartition] = []
    answered: dict[TopicPartition, FetchedPartition] = {}
    diverging: dict[TopicPartition, tuple[int, int]] = {}
    cap = ctx.settings.fetch_max_bytes
    replicas = ctx.replicas
    for tp, p in partitions:
        requests.append(_read_request(tp, p, cap, fetcher.peer))
        partition = replicas.get(tp)
        error = fetch_gates.refusal(fetcher, tp, p, partition)
        if error is not None:
            answered[tp] = FetchedPartition(tp, error)
        elif partition is not None and (found := fetch_gates.diverging_epoch(p, partition)) is not None:
            diverging[tp] = found
            hw = partition.high_watermark
            answered[tp] = FetchedPartition(tp, ErrorCode.none, hw, hw, partition.log_start_offset, b"")
    return requests, answered, diverging


def _aborted(call: Call, r: FetchedPartition, read_committed: bool) -> tuple[Any, ...] | None:
    if not read_committed:
        return None
    return tuple(
        call.make("AbortedTransaction", producer_id=a.producer_id, first_offset=a.first_offset) for a in r.aborted or ()
    )


def _top_level_error(call: Call, error: ErrorCode) -> Any:
    return call.respond(throttle_time=millis(0), error_code=error, session_id=0, responses=())


def _response(
    ctx: BrokerContext,
    call: Call,
    results: list[FetchedPartition],
    diverging: dict[TopicPartition, tuple[int, int]],
    read_committed: bool,
    version: int,
    session_id: int,
    topic_ids: dict[str, UUID | None],
    preferred: dict[TopicPartition, int],
) -> Any:
    by_topic: dict[str, list[Any]] = {}
    metrics = ctx.metrics
    for r in results:
        fields: dict[str, Any] = {
            "partition_index": r.tp.partition,
            "error_code": r.error,
            "high_watermark": r.high_watermark,
            "last_stable_offset": r.last_stable_offset,
            "log_start_offset": r.log_start_offset,
            "aborted_transactions": _aborted(call, r, read_committed),
            "preferred_read_replica": preferred.get(r.tp, -1),
            "records": r.records if r.records is not None else b"",
        }
        if version >= 12:
            if r.tp in diverging:
                epoch, end = diverging[r.tp]
                fields["diverging_epoch"] = call.make("EpochEndOffset", epoch=epoch, end_offset=end)
            if r.error in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
                partition = ctx.replicas.get(r.tp)
                if partition is not None:
                    fields["current_leader"] = call.make(
                        "LeaderIdAndEpoch", leader_id=partition.state.leader, leader_epoch=partition.leader_epoch
                    )
        if r.size:
            metrics.record_out(r.tp.topic, r.size)
        by_topic.setdefault(r.tp.topic, []).append(call.make("PartitionData", **fields))
    responses = tuple(call.make("FetchableTopicResponse", topic=t, topic_id=topic_ids.get(t), partitions=tuple(ps))
                      for t, ps in by_topic.items())
    throttle_ms = 0 if ctx.from_broker(call.client) else _throttle(ctx, call, sum(r.size for r in results))
    return call.respond(throttle_time=millis(throttle_ms), error_code=ErrorCode.none, session_id=session_id,
                        responses=responses)


def _throttle(ctx: BrokerContext, call: Call, size: int) -> int:
    """The consumer_byte_rate gate (Kafka's QuotaManagers.fetch): the answer's record bytes count against the
    client's quota. Kafka answers a throttled Fetch empty; this broker sends what it read (the fetch session
    already holds those positions) and mutes the connection for the throttle time, so the rate still
    averages to the quota. Followers are not client-quota'd (Kafka has a separate replication quota)."""
    throttle_ms = ctx.quotas.record_fetch(call.client.auth.principal, call.header.client_id, size)
    if throttle_ms:
        call.client.throttle.throttle(throttle_ms)
        ctx.metrics.observe_throttle("fetch", throttle_ms)
    return throttle_ms
