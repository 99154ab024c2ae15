"""`tinystream consume`: a partition, a start offset or time, a topic pattern, json with both timestamps.

Against a real broker (a thread of this process) with real topics; the
parsing rules are pure and tested apart.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
import time

import orjson
import pytest
from click.testing import CliRunner

from tinystream.cli import cli
from tinystream.cli.start_position import BadPosition, StartPosition, parse_offset, parse_time
from tinystream.testing.broker import BrokerThread, test_settings


def test_offsets_and_times_parse_as_documented() -> None:
    assert parse_offset("earliest") == StartPosition(edge="earliest")
    assert parse_offset("42") == StartPosition(offset=42)
    assert parse_time("-15m", now_ms=1_000_000) == StartPosition(timestamp_ms=100_000)
    assert parse_time("-2h", now_ms=10_000_000) == StartPosition(timestamp_ms=10_000_000 - 7_200_000)
    moment = datetime.datetime(2026, 11, 24, 10, 0, tzinfo=datetime.UTC)
    assert parse_time("2026-11-24T10:00:00Z", now_ms=0).timestamp_ms == int(moment.timestamp() * 1000)
    assert parse_time("2026-11-24T10:00:00", now_ms=0).timestamp_ms == int(moment.timestamp() * 1000)  # UTC
    for bad in ("-1", "first", "-15 minutes"):
        with pytest.raises(BadPosition):
            parse_offset(bad) if not bad.startswith("-15") else parse_time(bad, now_ms=0)
    with pytest.raises(BadPosition, match="ISO-8601"):
        parse_time("yesterday", now_ms=0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("data"), **{"num.partitions": 2})) as running:
        runner = CliRunner()
        ok = runner.invoke(cli, ["topics", "create", "events", "-p", "2", "-b", running.bootstrap])
        assert ok.exit_code == 0, ok.output
        for partition, count in ((0, 5), (1, 3)):
            lines = "".join(f"k{partition}-{i}:v{partition}-{i}\n" for i in range(count))
            produced = runner.invoke(cli, ["produce", "events", "-b", running.bootstrap, "-K", ":", "--partition",
                                           str(partition), "-H", "source=test"], input=lines)
            assert produced.exit_code == 0, produced.output
        yield running


def consume(broker, *args: str):
    result = CliRunner().invoke(cli, ["consume", "-b", broker.bootstrap, "--timeout-ms", "3000", "--format", "json",
                                      *args])
    return result, [orjson.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_one_partition_from_an_offset(broker) -> None:
    result, records = consume(broker, "events", "--partition", "0", "--offset", "2", "-n", "3")
    assert result.exit_code == 0, result.output
    assert [(r["partition"], r["offset"], r["value"]) for r in records] == [(0, 2, "v0-2"), (0, 3, "v0-3"), (0, 4, "v0-4")]
    first = records[0]
    assert first["key"] == "k0-2" and first["headers"] == {"source": "test"}
    assert first["timestamp_type"] == "CreateTime" and first["create_timestamp"] == first["timestamp"]
    assert first["log_append_timestamp"] is None


def test_earliest_of_one_partition_and_a_time_for_all(broker) -> None:
    _, earliest = consume(broker, "events", "--partition", "1", "--offset", "earliest", "-n", "3")
    assert [(r["partition"], r["offset"]) for r in earliest] == [(1, 0), (1, 1), (1, 2)]
    _, recent = consume(broker, "events", "--from-time", "-1h", "-n", "8")
    assert sorted((r["partition"], r["offset"]) for r in recent) == [(0, i) for i in range(5)] + [(1, i) for i in range(3)]
    future = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)).isoformat()
    result, late = consume(broker, "events", "--from-time", future)
    assert result.exit_code == 0 and late == []


@pytest.mark.parametrize(("args", "message"), [
    (("events", "--partition", "5"), "has no partition 5"),
    (("events", "--partition", "0", "--offset", "99"), "offset 99 is out of range for events-0"),
    (("--pattern", "ev[ents"), "is not a regular expression"),
    (("nosuch", "--partition", "0"), "does not exist"),
    (("events", "--offset", "1", "--from-time", "-1m"), "not both"),
    (("events", "--from-time", "soon"), "ISO-8601"),
])
def test_clear_errors(broker, args, message) -> None:
    result, records = consume(broker, *args)
    assert result.exit_code != 0 and records == []
    assert message in result.output


def test_pattern_reads_matching_topics_and_picks_up_new_ones(broker) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tinystream", "consume", "-b", broker.bootstrap, "--pattern", "late-.*",
         "--from-beginning", "-n", "2", "--timeout-ms", "20000", "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(2)  # subscribed before the topics exist
        runner = CliRunner()
        for name in ("late-a", "late-b", "other"):
            assert runner.invoke(cli, ["topics", "create", name, "-b", broker.bootstrap]).exit_code == 0
            assert runner.invoke(cli, ["produce", name, "-b", broker.bootstrap], input=f"from {name}\n").exit_code == 0
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    values = sorted(orjson.loads(line)["value"] for line in out.splitlines() if line.startswith("{"))
    assert values == ["from late-a", "from late-b"], err[-2000:]
