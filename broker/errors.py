"""The broker's errors, and Kafka error codes as data.

Two kinds of failure reach a client, and the hierarchy keeps them apart:

    BrokerError
    ├── ProtocolError          the bytes cannot be served: log once, close the connection
    │   ├── FrameTooLarge      size prefix over socket.request.max.bytes (CVE-2022-34917)
    │   ├── InvalidFrame       size prefix below the smallest possible request
    │   ├── UnsupportedRequest unknown API key, or a version we do not serve
    │   └── MalformedRequest   header or body does not parse for its declared version
    └── KafkaApiError          answered inside the response with an ErrorCode
                               (handlers raise it; the handler turns it into a field)

Storage errors (`tinystream.broker.storage.base.LogError`) name their Kafka error
by its upper-case name; `code_for_log_error` translates them at this boundary.
Kafka's own error numbers come from kio (`kio.schema.errors.ErrorCode`), so
nothing here restates a number.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tinystream.broker.storage.base import LogError

__all__ = [
    "BrokerError",
    "ErrorCode",
    "FrameTooLarge",
    "InvalidFrame",
    "KafkaApiError",
    "MalformedRequest",
    "ProtocolError",
    "UnsupportedRequest",
    "code_by_name",
    "code_for_log_error",
]


class BrokerError(Exception):
    """Base of every error the broker raises on purpose."""


class ProtocolError(BrokerError):
    """The connection's byte stream cannot be served any further; close it."""


class FrameTooLarge(ProtocolError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request size {size} exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class InvalidFrame(ProtocolError):
    pass


class UnsupportedRequest(ProtocolError):
    def __init__(self, api_key: int, api_version: int, reason: str = "not supported") -> None:
        super().__init__(f"api_key={api_key} api_version={api_version}: {reason}")
        self.api_key = api_key
        self.api_version = api_version


class MalformedRequest(ProtocolError):
    pass


class KafkaApiError(BrokerError):
    """A failure a client is told about through an error code in the response."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message


def code_by_name(name: str) -> ErrorCode:
    """`"CORRUPT_MESSAGE"` -> ErrorCode.corrupt_message; unknown names -> unknown_server_error."""
    try:
        return ErrorCode[name.lower()]
    except KeyError:
        return ErrorCode.unknown_server_error


def code_for_log_error(exc: LogError) -> ErrorCode:
    return code_by_name(exc.kafka_error)
