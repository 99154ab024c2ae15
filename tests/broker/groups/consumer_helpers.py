"""What the KIP-848 consumer group tests share: a topic image kept in a dict and the heartbeats members send.

Imported as `consumer_helpers` (pyproject's pytest `pythonpath` lists this folder).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from tinystream.broker.groups.consumer_group import HeartbeatRequest


class Topics:
    """A TopicImage kept in a dict (name -> partition count); a topic's id is derived from its name."""

    def __init__(self, **counts: int) -> None:
        self.counts = dict(counts)

    def partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic)

    def topic_names(self) -> Iterable[str]:
        return list(self.counts)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return uuid.uuid5(uuid.NAMESPACE_URL, topic) if topic in self.counts else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((t for t in self.counts if uuid.uuid5(uuid.NAMESPACE_URL, t) == topic_id), None)


def join_request(member: str, subscribed: tuple[str, ...] = ("t",), *, rebalance_timeout_ms: int = 60_000,
                 instance_id: str | None = None, assignor: str | None = None,
                 regex: str | None = None) -> HeartbeatRequest:
    """A member's first heartbeat (epoch 0): its subscription, owning nothing yet."""
    return HeartbeatRequest(
        member_id=member, member_epoch=0, rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=subscribed,
        subscribed_topic_regex=regex, owned={}, instance_id=instance_id, server_assignor=assignor,
    )


def beat_request(member: str, epoch: int, owned: Mapping[str, frozenset[int]] | None = None, *,
                 instance_id: str | None = None) -> HeartbeatRequest:
    """A heartbeat at `epoch` (-1: leave) with what the member owns (None: unchanged)."""
    return HeartbeatRequest(member_id=member, member_epoch=epoch, owned=owned, instance_id=instance_id)
