"""Confluent's error codes: an HTTP status and an `error_code` that clients switch on.

Every failure the core can name is a `RegistryError`; the REST layer turns it
into `{"error_code": ..., "message": ...}` with the status below (Confluent's
`Errors.java`: the first three digits of error_code are the HTTP status).
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    UNAUTHORIZED = 40101
    FORBIDDEN = 40301
    SUBJECT_NOT_FOUND = 40401
    VERSION_NOT_FOUND = 40402
    SCHEMA_NOT_FOUND = 40403
    SUBJECT_SOFT_DELETED = 40404
    SUBJECT_NOT_SOFT_DELETED = 40405
    SCHEMA_VERSION_SOFT_DELETED = 40406
    SCHEMA_VERSION_NOT_SOFT_DELETED = 40407
    SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED = 40408
    SUBJECT_LEVEL_MODE_NOT_CONFIGURED = 40409
    NOT_FOUND = 404
    INCOMPATIBLE_SCHEMA = 409
    REFERENCE_EXISTS = 40901
    TOO_LARGE = 413
    INVALID_SCHEMA = 42201
    INVALID_VERSION = 42202
    INVALID_COMPATIBILITY_LEVEL = 42203
    INVALID_MODE = 42204
    OPERATION_NOT_PERMITTED = 42205
    UNPROCESSABLE = 422
    LIMIT_REACHED = 42291  # TinyStream's own: a subject or version cap (Confluent has none)
    STORE_ERROR = 50001
    STORE_TIMEOUT = 50002
    FORWARDING_FAILED = 50003  # a follower could not reach the leader
    UNKNOWN_LEADER = 50004  # no instance leads (an election under way, or none may lead)

    @property
    def http_status(self) -> int:
        code = int(self)
        return code if code < 1000 else code // 100


class RegistryError(Exception):
    """A refusal with Confluent's code; `message` is what the client reads."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": int(self.code), "message": self.message}
