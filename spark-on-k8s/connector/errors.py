"""Errors of the Spark connector.

    TinyStreamSparkError                 base of everything raised here
    ├── InvalidOptionError (ValueError)  a bad or conflicting data source option
    ├── DataLossError                    offsets the query needs are gone (failOnDataLoss=true)
    ├── KafkaClientError                 the broker or the client said no; carries the
    │                                    broker's message and Kafka error name
    ├── ProduceError (KafkaClientError)  records a write task could not deliver
    └── SchemaRegistryError              a registry request failed, or a value is not its schema's

confluent-kafka's `KafkaException` is translated at the boundary
(`kafka_client.py`) with `raise ... from exc`, so a Spark task failure shows
the broker's own words (`UNKNOWN_TOPIC_OR_PART: Broker: Unknown topic or
partition`) and the original exception stays chained.
"""

from __future__ import annotations


class TinyStreamSparkError(Exception):
    """Base class of the connector's errors."""


class InvalidOptionError(TinyStreamSparkError, ValueError):
    """A data source option is missing, malformed or conflicts with another one."""


class DataLossError(TinyStreamSparkError):
    """Offsets a query needs were deleted (retention, DeleteRecords, topic re-created)."""

    HINT = (
        "Some data may have been lost because they are not available in the broker any more; "
        "either the data was aged out by retention or the topic may have been deleted before "
        "all the data in the topic was processed. If you don't want your query to fail in such "
        'cases, set the source option "failOnDataLoss" to "false".'
    )

    def __init__(self, message: str):
        super().__init__(f"{message}. {self.HINT}")
        self.detail = message


class KafkaClientError(TinyStreamSparkError):
    """A request to the broker failed; `code` is the Kafka error name (e.g. UNKNOWN_TOPIC_OR_PART)."""

    def __init__(self, message: str, *, code: str | None = None, retriable: bool = False):
        super().__init__(message)
        self.code = code
        self.retriable = retriable


class ProduceError(KafkaClientError):
    """One or more records were not acknowledged by the broker."""


class SchemaRegistryError(TinyStreamSparkError):
    """The schema registry refused a request, or a value does not match its schema (wire format, payload)."""
