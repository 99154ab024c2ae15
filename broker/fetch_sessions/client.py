"""The fetcher's side of a session (Kafka's Java FetchSessionHandler), for the replica fetcher.

    handler = FetchSessionHandler()
    plan = handler.build({tp: PartitionRequest(...), ...})   # what we want to fetch now
    send Fetch(session_id=plan.session_id, session_epoch=plan.epoch,
               topics=plan.to_send, forgotten_topics_data=plan.forgotten)
    handler.handle_response(response.error_code, response.session_id)   # or handle_error() on a lost connection

The first request is full (epoch 0). Once the leader answers with a session
id, each request carries only the partitions that are new or whose
parameters changed since the last request, and names those no longer wanted
as forgotten; the leader fills in the rest from the session. Any session
error, a closed session (id 0 in an answer) or a lost connection sends the
next request full again: FETCH_SESSION_ID_NOT_FOUND starts afresh (id 0),
anything else closes the old session with epoch 0 on its id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import INITIAL_EPOCH, INVALID_SESSION_ID, PartitionRequest, next_epoch
from tinystream.broker.storage.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class FetchPlan:
    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionRequest]
    forgotten: tuple[TopicPartition, ...]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH  # the epoch of the next request
        self._sent: dict[TopicPartition, PartitionRequest] = {}  # what the leader's session holds
        self._in_flight_full = True

    def build(self, wanted: Mapping[TopicPartition, PartitionRequest]) -> FetchPlan:
        """The next request for `wanted`: all of it (full) or the difference from the session."""
        if self.epoch == INITIAL_EPOCH:
            self._sent = dict(wanted)
            self._in_flight_full = True
            return FetchPlan(self.session_id, INITIAL_EPOCH, dict(wanted), ())
        changed = {tp: r for tp, r in wanted.items() if self._sent.get(tp) != r}
        forgotten = tuple(tp for tp in self._sent if tp not in wanted)
        self._sent = dict(wanted)
        self._in_flight_full = False
        return FetchPlan(self.session_id, self.epoch, changed, forgotten)

    def handle_response(self, error: ErrorCode, session_id: int) -> bool:
        """Advance after an answer; False when the answer's partitions cannot be trusted to be complete."""
        if error != ErrorCode.none:
            if error == ErrorCode.fetch_session_id_not_found:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH  # no session (or it closed)
        elif self._in_flight_full:
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The request got no answer: the session's state is unknown, so the next request is full."""
        self.epoch = INITIAL_EPOCH
