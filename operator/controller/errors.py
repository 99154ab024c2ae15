"""Errors of the controller core: Kafka error codes as data, two exceptions.

An event the controller refuses is not an exception: `apply` returns a
`Decision` whose `error` is a `ControllerError` (a Kafka error code with its
Kafka name) and whose state is the input state, untouched. Drivers put the
code straight into their HTTP/JSON reply, the way a KRaft controller answers
BrokerHeartbeat or AlterPartition.

Exceptions are kept for the two places where there is no Decision to carry
the error:

    Exception
    ├── StateFormatError (ValueError)   a dict that is not a valid state,
    │                                   image, event or action (bad schema
    │                                   version, wrong type, broken invariant)
    └── PlacementError                  `plan_reassignment` (a pure helper,
                                        not an event) cannot place replicas;
                                        carries the ControllerError
"""

from __future__ import annotations

import enum


class ControllerError(enum.Enum):
    """Kafka error codes the controller returns, by their Kafka names.

    Values are Kafka's numeric codes (Errors.java); `tests/operator` checks
    them against the protocol library's table.
    """

    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    # KRaft answers AlterPartition with NOT_CONTROLLER when the leader knows a
    # newer leader/partition epoch than this controller: the caller is likely
    # talking to a stale controller and should look for the active one.
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    NO_REASSIGNMENT_IN_PROGRESS = 85
    RESOURCE_NOT_FOUND = 91
    INVALID_UPDATE_VERSION = 95
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107

    @property
    def code(self) -> int:
        return self.value

    @classmethod
    def from_code(cls, code: int) -> ControllerError:
        """The error for a Kafka code; ValueError names an unknown one."""
        try:
            return cls(code)
        except ValueError:
            raise ValueError(f"no controller error has Kafka code {code}") from None

    @classmethod
    def from_name(cls, name: str) -> ControllerError:
        try:
            return cls[name]
        except KeyError:
            raise ValueError(f"no controller error is named {name!r}") from None


class StateFormatError(ValueError):
    """A plain dict does not describe a valid state, image, event or action."""


class PlacementError(Exception):
    """Replicas cannot be placed as asked; `error` says why in Kafka's terms."""

    def __init__(self, error: ControllerError, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error
        self.message = message
