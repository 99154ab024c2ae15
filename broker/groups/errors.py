"""Errors of the group coordinator package, and how append failures become Kafka codes.

Hierarchy::

    GroupCoordinatorError(Exception)
    ├── IllegalTransition       a group state machine bug: state + event named
    ├── RecordDecodeError       a __consumer_offsets key/value we cannot read (also ValueError)
    └── OffsetsTopicError       raised by an OffsetsTopic implementation; carries an ErrorCode

Requests never see these exceptions: the coordinator answers with Kafka error
codes (`tinystream.broker.errors.ErrorCode`). `OffsetsTopicError` is the boundary type
for the storage side: an `OffsetsTopic.append` that fails raises it with the
partition-level code it got (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, ...),
and `offset_commit_error` / `group_store_error` translate that code into what a
client should see, following Kafka's GroupMetadataManager.
"""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode

__all__ = [
    "GroupCoordinatorError",
    "IllegalTransition",
    "OffsetsTopicError",
    "RecordDecodeError",
    "append_failure_code",
    "group_store_error",
    "offset_commit_error",
]


class GroupCoordinatorError(Exception):
    """Base of every exception raised by tinystream.broker.groups."""


class IllegalTransition(GroupCoordinatorError):
    """A state machine was asked for a transition its table does not allow."""

    def __init__(self, group_id: str, state: str, event: str) -> None:
        super().__init__(f"group {group_id!r}: event {event!r} is not allowed in state {state!r}")
        self.group_id = group_id
        self.state = state
        self.event = event


class RecordDecodeError(GroupCoordinatorError, ValueError):
    """Bytes that are not a valid __consumer_offsets key or value."""


class OffsetsTopicError(GroupCoordinatorError):
    """An append to (or read of) a __consumer_offsets partition failed with `error`."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or f"__consumer_offsets append failed: {error.name}")
        self.error = error


# Kafka: GroupMetadataManager.storeOffsets / storeGroup map the append's
# partition error to what the client can act on (retry after rediscovery or
# give up).
_RETRY_SAME_COORDINATOR = {
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out,
}
_FIND_NEW_COORDINATOR = {ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error}
_TOO_LARGE = {ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size}


def append_failure_code(exc: BaseException) -> ErrorCode:
    """The partition-level code behind an append exception.

    OffsetsTopicError carries its own; an OSError is a storage failure
    (KAFKA_STORAGE_ERROR, so the client looks for a new coordinator); anything
    else is a bug we still answer with UNKNOWN_SERVER_ERROR instead of crashing.
    """
    if isinstance(exc, OffsetsTopicError):
        return exc.error
    if isinstance(exc, OSError):
        return ErrorCode.kafka_storage_error
    return ErrorCode.unknown_server_error


def offset_commit_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of an append error for OffsetCommit responses."""
    if error in _RETRY_SAME_COORDINATOR:
        return ErrorCode.coordinator_not_available
    if error in _FIND_NEW_COORDINATOR:
        return ErrorCode.not_coordinator
    if error in _TOO_LARGE:
        return ErrorCode.invalid_commit_offset_size
    return error


def group_store_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of an append error for group metadata (SyncGroup, static join)."""
    if error in _RETRY_SAME_COORDINATOR:
        return ErrorCode.coordinator_not_available
    if error in _FIND_NEW_COORDINATOR:
        return ErrorCode.not_coordinator
    if error in _TOO_LARGE:
        return ErrorCode.unknown_server_error
    return error
