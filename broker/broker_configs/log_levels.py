"""Kafka's log level names and Python's logging levels, both ways (BROKER_LOGGER resources, KIP-412).

Kafka's brokers answer DescribeConfigs on a BROKER_LOGGER with each logger's
level in log4j's names and accept those names in IncrementalAlterConfigs
(LogLevelConfig.VALID_LOG_LEVELS). Python has no TRACE and calls FATAL
CRITICAL and WARN WARNING: TRACE is level 5, below DEBUG, as the usual Python
extensions (structlog, loguru) place it. A level between two names reads as
the lower name (25 -> INFO), so every Python level has one Kafka name.
"""

from __future__ import annotations

import logging

#: The root logger's name in Kafka's answers (log4j's "root"; Python's root logger is "root" too).
ROOT_LOGGER = "root"

TRACE = 5

#: Kafka's names, most verbose first, with the Python level each one sets.
KAFKA_LEVELS: dict[str, int] = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}


class UnknownLevel(ValueError):
    """A name Kafka does not accept as a log level (INVALID_CONFIG)."""


def python_level(name: str) -> int:
    """"DEBUG" -> 10; a name Kafka does not know raises UnknownLevel (Kafka's check is case-sensitive)."""
    try:
        return KAFKA_LEVELS[name]
    except KeyError:
        raise UnknownLevel(f"{name!r} is not a supported log level; valid log levels are "
                           f"{', '.join(KAFKA_LEVELS)}") from None


def kafka_level(level: int) -> str:
    """10 -> "DEBUG", 30 -> "WARN", 25 -> "INFO"; anything below DEBUG (NOTSET too) -> "TRACE"."""
    name = "TRACE"
    for kafka_name, value in KAFKA_LEVELS.items():
        if level >= value:
            name = kafka_name
    return name
