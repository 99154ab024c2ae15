"""BROKER_LOGGER resources (KIP-412): this process's loggers and their levels, changed live.

The loggers listed are the root logger and every logger under the project's
package (`tinystream`, and each parent of a module's logger), as Kafka lists
its log4j loggers. Levels are shown and taken in Kafka's names
(broker_configs/log_levels.py). Changes are not persisted, as in Kafka: a
restart is back to the logging configuration the process started with.

Every broker in one process (tests, `tinystream dev --in-process`) shares the
loggers, as Python's logging is per process.
"""

from __future__ import annotations

import logging

from tinystream.broker.broker_configs.log_levels import ROOT_LOGGER, kafka_level, python_level

#: The packages whose loggers are listed.
PACKAGES = ("tinystream",)


def _under_packages(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PACKAGES)


def logger_names() -> list[str]:
    """root, then every project logger name and its parents, sorted."""
    names: set[str] = set(PACKAGES)
    for name in list(logging.root.manager.loggerDict):
        if _under_packages(name):
            parts = name.split(".")
            names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return [ROOT_LOGGER, *sorted(names)]


def exists(name: str) -> bool:
    return name == ROOT_LOGGER or name in logger_names()


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)


def levels() -> dict[str, str]:
    """Logger name -> its effective level in Kafka's names."""
    return {name: kafka_level(_logger(name).getEffectiveLevel()) for name in logger_names()}


def set_level(name: str, kafka_name: str) -> None:
    """Set a logger's level (raises log_levels.UnknownLevel for a name Kafka does not accept)."""
    _logger(name).setLevel(python_level(kafka_name))


def unset_level(name: str) -> None:
    """Back to inheriting its parent's level (Kafka's DELETE; the root logger has no parent)."""
    if name == ROOT_LOGGER:
        raise ValueError("the root logger's level cannot be removed")
    _logger(name).setLevel(logging.NOTSET)
