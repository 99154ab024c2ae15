"""Kafka's log level names <-> Python's levels (BROKER_LOGGER), pure."""

from __future__ import annotations

import logging

import pytest

from tinystream.broker.broker_configs.log_levels import KAFKA_LEVELS, TRACE, UnknownLevel, kafka_level, python_level


@pytest.mark.parametrize(("name", "level"), [
    ("TRACE", TRACE), ("DEBUG", logging.DEBUG), ("INFO", logging.INFO), ("WARN", logging.WARNING),
    ("ERROR", logging.ERROR), ("FATAL", logging.CRITICAL),
])
def test_each_kafka_name_maps_both_ways(name, level):
    assert python_level(name) == level
    assert kafka_level(level) == name


def test_names_are_kafkas_valid_log_levels_most_verbose_first():
    assert list(KAFKA_LEVELS) == ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]
    assert list(KAFKA_LEVELS.values()) == sorted(KAFKA_LEVELS.values())
    assert TRACE < logging.DEBUG


@pytest.mark.parametrize(("level", "name"), [
    (logging.NOTSET, "TRACE"), (1, "TRACE"), (9, "TRACE"), (15, "DEBUG"), (25, "INFO"), (35, "WARN"),
    (45, "ERROR"), (99, "FATAL"),
])
def test_a_level_between_names_reads_as_the_lower_name(level, name):
    assert kafka_level(level) == name


@pytest.mark.parametrize("name", ["debug", "WARNING", "CRITICAL", "ALL", "OFF", "", " INFO"])
def test_other_names_are_refused_naming_the_valid_ones(name):
    with pytest.raises(UnknownLevel, match="TRACE, DEBUG, INFO, WARN, ERROR, FATAL"):
        python_level(name)
