"""Errors of the controller service: one exception, Kafka names on the wire.

Every refusal leaves the service as `ApiError` and reaches the client as one
JSON body, `{"error": KAFKA_ERROR_NAME, "code": <Kafka code>, "message": ...}`,
with an HTTP status chosen from the error (table below). The core's refusals
(`ControllerError`) keep their Kafka names; the service adds the few Kafka
errors only a driver can meet (a body that is not JSON, a disk that refuses
the state file, a bug).

    Exception
    ├── ApiError          error name, Kafka code, HTTP status, message
    └── StateFileError    the state file cannot be used (corrupt, locked);
                          raised at start-up, never answered to a client

HTTP status per error, so a client can act on the status alone:

    400  the request itself is wrong (INVALID_* errors, INVALID_REQUEST)
    403  TOPIC_DELETION_DISABLED (policy, not a bad request)
    404  UNKNOWN_TOPIC_OR_PARTITION, BROKER_ID_NOT_REGISTERED, RESOURCE_NOT_FOUND (a SCRAM credential)
    409  the request names a state that is gone: TOPIC_ALREADY_EXISTS,
         STALE_BROKER_EPOCH, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
         INELIGIBLE_REPLICA, NO_REASSIGNMENT_IN_PROGRESS
    503  retry later: NOT_CONTROLLER (KRaft's answer when the caller knows
         newer epochs than this controller), KAFKA_STORAGE_ERROR
    500  UNKNOWN_SERVER_ERROR (a bug; logged with its traceback)
"""

from __future__ import annotations

from tinystream.operator.controller import ControllerError

# Kafka codes of the errors only the service raises (Errors.java).
UNKNOWN_SERVER_ERROR = ("UNKNOWN_SERVER_ERROR", -1)
INVALID_REQUEST = ("INVALID_REQUEST", ControllerError.INVALID_REQUEST.code)
KAFKA_STORAGE_ERROR = ("KAFKA_STORAGE_ERROR", 56)

HTTP_STATUS: dict[ControllerError, int] = {
    ControllerError.UNKNOWN_TOPIC_OR_PARTITION: 404,
    ControllerError.INVALID_TOPIC_EXCEPTION: 400,
    ControllerError.TOPIC_ALREADY_EXISTS: 409,
    ControllerError.INVALID_PARTITIONS: 400,
    ControllerError.INVALID_REPLICATION_FACTOR: 400,
    ControllerError.INVALID_REPLICA_ASSIGNMENT: 400,
    ControllerError.INVALID_CONFIG: 400,
    ControllerError.NOT_CONTROLLER: 503,
    ControllerError.INVALID_REQUEST: 400,
    ControllerError.POLICY_VIOLATION: 403,
    ControllerError.TOPIC_DELETION_DISABLED: 403,
    ControllerError.FENCED_LEADER_EPOCH: 409,
    ControllerError.STALE_BROKER_EPOCH: 409,
    ControllerError.NO_REASSIGNMENT_IN_PROGRESS: 409,
    ControllerError.RESOURCE_NOT_FOUND: 404,
    ControllerError.INVALID_UPDATE_VERSION: 409,
    ControllerError.BROKER_ID_NOT_REGISTERED: 404,
    ControllerError.INELIGIBLE_REPLICA: 409,
}


class ApiError(Exception):
    """A refusal answered to the client: Kafka error name and code, HTTP status."""

    def __init__(self, error: str, code: int, status: int, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.code = code
        self.status = status
        self.message = message

    @classmethod
    def from_controller(cls, error: ControllerError, message: str) -> ApiError:
        return cls(error.name, error.code, HTTP_STATUS[error], message)

    @classmethod
    def bad_request(cls, message: str, *, status: int = 400) -> ApiError:
        return cls(*INVALID_REQUEST, status, message)

    @classmethod
    def storage(cls, message: str) -> ApiError:
        return cls(*KAFKA_STORAGE_ERROR, 503, message)

    @classmethod
    def internal(cls, message: str) -> ApiError:
        return cls(*UNKNOWN_SERVER_ERROR, 500, message)

    def body(self) -> dict[str, object]:
        return {"error": self.error, "code": self.code, "message": self.message}


class StateFileError(Exception):
    """The state file cannot be used: unreadable, corrupt, or held by another controller."""
