"""The broker's errors, and Kafka error codes as data.

Two kinds of failure reach a client, and the hierarchy keeps them apart:

    BrokerError
    └── KafkaApiError          answered inside the response with an ErrorCode
                               (handlers raise it; the handler turns it into a field)

    ProtocolError              the bytes cannot be served: log once, close the connection
                               (`tinystream.broker.protocol.errors`, below this module)

Storage errors (`tinystream.broker.storage.base.LogError`) name their Kafka error
by its upper-case name; `code_for_log_error` translates them at this boundary.
This module sits at the bottom of the broker's layers, so it takes any error
that names one (`NamesKafkaError`) rather than importing storage.
Kafka's own error numbers come from kio (`kio.schema.errors.ErrorCode`), so
nothing here restates a number; every other module imports `ErrorCode` from
here, the one place that names kio's table.
"""

from __future__ import annotations

from typing import Protocol

from kio.schema.errors import ErrorCode

__all__ = [
    "BrokerError",
    "ErrorCode",
    "KafkaApiError",
    "NamesKafkaError",
    "code_by_name",
    "code_for_log_error",
]


class BrokerError(Exception):
    """Base of every error the broker raises on purpose."""


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


class NamesKafkaError(Protocol):
    """An error that carries its Kafka error's upper-case name (storage's LogError)."""

    kafka_error: str


def code_for_log_error(exc: NamesKafkaError) -> ErrorCode:
    return code_by_name(exc.kafka_error)
