"""Errors of the transaction coordinator package.

Hierarchy::

    TransactionError(Exception)
    ├── IllegalTransition    a state-machine bug: the transactional id, state and event are named
    ├── RecordDecodeError    a __transaction_state key or value we cannot read (also ValueError)
    └── TxnLogError          an append to / read of __transaction_state failed; carries the ErrorCode

Clients never see these: the coordinator answers with Kafka error codes.
"""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode

__all__ = ["IllegalTransition", "RecordDecodeError", "TransactionError", "TxnLogError", "append_error_for_client"]


class TransactionError(Exception):
    """Base of every exception raised by tinystream.broker.transactions."""


class IllegalTransition(TransactionError):
    """The state table does not allow `event` in `state`."""

    def __init__(self, transactional_id: str, state: str, event: str) -> None:
        super().__init__(f"transaction {transactional_id!r}: event {event!r} is not allowed in state {state!r}")
        self.transactional_id = transactional_id
        self.state = state
        self.event = event


class RecordDecodeError(TransactionError, ValueError):
    """Bytes that are not a valid __transaction_state key or value."""


class TxnLogError(TransactionError):
    """A __transaction_state append or read failed with `error` (the partition-level code)."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or f"__transaction_state append failed: {error.name}")
        self.error = error


_RETRY_SAME = {
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out,
}
_NEW_COORDINATOR = {ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error}


def append_error_for_client(error: ErrorCode) -> ErrorCode:
    """Kafka's TransactionStateManager mapping of a failed state append to what the client acts on."""
    if error in _RETRY_SAME:
        return ErrorCode.coordinator_not_available
    if error in _NEW_COORDINATOR:
        return ErrorCode.not_coordinator
    return ErrorCode.unknown_server_error
