"""Between a Fetch request's kio fields and the broker's fetch sessions (`fetch_sessions`, KIP-227).

`open_context` turns the request's partitions, forgotten topics and
(session_id, session_epoch) into a `FetchContext` whose `partitions` are what
the handler reads: the request's own for a full fetch, the whole session for
an incremental one. `answer` then picks the partitions the response carries
and the session id it names. Sessions are the fetcher's principal's: nobody
else may continue or close them (see `fetch_sessions.context`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from tinystream.broker.fetch_sessions.cache import PartitionRequest
from tinystream.broker.fetch_sessions.context import FetchAnswer, FetchContext, Outcome
from tinystream.broker.handlers.context import BrokerContext, Call
from tinystream.broker.storage.topic_partition import TopicPartition


def open_context(ctx: BrokerContext, call: Call, *, privileged: bool) -> FetchContext:
    body = call.body
    partitions = [
        (TopicPartition(topic.topic, p.partition), PartitionRequest(
            fetch_offset=p.fetch_offset,
            partition_max_bytes=p.partition_max_bytes,
            current_leader_epoch=getattr(p, "current_leader_epoch", -1),
            last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
            log_start_offset=getattr(p, "log_start_offset", -1),
        ))
        for topic in body.topics
        for p in topic.partitions
    ]
    forgotten = [TopicPartition(t.topic, p) for t in getattr(body, "forgotten_topics_data", ()) for p in t.partitions]
    return ctx.fetch_sessions.new_context(
        session_id=getattr(body, "session_id", 0),
        epoch=getattr(body, "session_epoch", -1),  # v4-6 know no sessions: a sessionless full fetch
        partitions=partitions,
        forgotten=forgotten,
        privileged=privileged,
        owner=call.client.auth.principal,
        now_ms=ctx.replicas.clock(),
    )


def answer(
    ctx: BrokerContext,
    context: FetchContext,
    results: Sequence[Outcome],
    *,
    must_include: Collection[TopicPartition] = (),
) -> FetchAnswer[Outcome]:
    return ctx.fetch_sessions.answer(context, results, must_include=must_include, now_ms=ctx.replicas.clock())
