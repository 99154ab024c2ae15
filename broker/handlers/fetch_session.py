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
from typing import Any
from uuid import UUID

from tinystream.broker.fetch_sessions.cache import PartitionRequest
from tinystream.broker.fetch_sessions.context import FetchAnswer, FetchContext, Outcome
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.storage.topic_partition import TopicPartition

#: Fetch v13+ names topics by id (KIP-516); v12 and below by name.
TOPIC_IDS_FROM = 13


def open_context(ctx: BrokerContext, call: Call, *, privileged: bool) -> FetchContext:
    body = call.body
    by_id = call.version >= TOPIC_IDS_FROM
    partitions = [
        (TopicPartition(_name(ctx, topic, by_id), p.partition), PartitionRequest(
            fetch_offset=p.fetch_offset,
            partition_max_bytes=p.partition_max_bytes,
            current_leader_epoch=getattr(p, "current_leader_epoch", -1),
            last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
            log_start_offset=getattr(p, "log_start_offset", -1),
            topic_id=topic.topic_id if by_id else None,
        ))
        for topic in body.topics
        for p in topic.partitions
    ]
    forgotten = [TopicPartition(_name(ctx, t, by_id), p)
                 for t in getattr(body, "forgotten_topics_data", ()) for p in t.partitions]
    return ctx.fetch_sessions.new_context(
        session_id=getattr(body, "session_id", 0),
        epoch=getattr(body, "session_epoch", -1),  # v4-6 know no sessions: a sessionless full fetch
        partitions=partitions,
        forgotten=forgotten,
        privileged=privileged,
        uses_topic_ids=by_id,
        owner=call.client.auth.principal,
        now_ms=ctx.replicas.clock(),
    )


def _name(ctx: BrokerContext, topic: Any, by_id: bool) -> str:
    """The topic's name; by id (v13+), an id we do not know gets a name no topic can have (NUL + id)."""
    if not by_id:
        return str(topic.topic)
    spec = ctx.topics.store.by_id(topic.topic_id)
    return spec.name if spec is not None else f"\0{topic.topic_id}"


def topic_ids(context: FetchContext, results: Sequence[Outcome]) -> dict[str, UUID | None]:
    """Each answered topic's id as the request (or its session) named it, for the response's topic_id
    fields. An incremental answer looks up only its own partitions, not the whole session's."""
    if context.session is None:
        return {tp.topic: p.topic_id for tp, p in context.partitions}
    cached = context.session.partitions
    return {r.tp.topic: c.request.topic_id for r in results if (c := cached.get(r.tp)) is not None}


def answer(
    ctx: BrokerContext,
    context: FetchContext,
    results: Sequence[Outcome],
    *,
    must_include: Collection[TopicPartition] = (),
) -> FetchAnswer[Outcome]:
    return ctx.fetch_sessions.answer(context, results, must_include=must_include, now_ms=ctx.replicas.clock())
