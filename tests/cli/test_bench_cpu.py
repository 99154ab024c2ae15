"""Broker CPU seconds per GB in the benchmarks: read from /proc for the broker's process group."""

from __future__ import annotations

import subprocess
import sys
import time

from tinystream.bench import produce_workloads
from tinystream.bench.cpu import CpuMeter, group_cpu_seconds, parse_stat
from tinystream.bench.stats import RunResult, ratio_lines
from tinystream.bench.targets import open_target


def test_stat_fields_are_counted_after_the_last_parenthesis_of_the_command_name() -> None:
    line = "4242 (java (main) x) S 1 4200 4200 0 -1 4194560 500 0 0 0 731 96 0 0 20 0 30 0 12345 0 0"
    stat = parse_stat(line)
    assert (stat.pgid, stat.utime_ticks, stat.stime_ticks) == (4200, 731, 96)


def _group(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_a_busy_group_costs_cpu_and_a_sleeping_one_does_not() -> None:
    busy = _group("import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
                  "time.sleep(30)")
    idle = _group("import time; time.sleep(30)")
    try:
        time.sleep(0.3)  # both started (interpreter start-up is before the meters)
        with CpuMeter(busy.pid).measure() as spinning, CpuMeter(idle.pid).measure() as sleeping:
            time.sleep(1.5)
        assert spinning.seconds is not None and spinning.seconds >= 0.2, spinning.seconds
        assert sleeping.seconds is not None and sleeping.seconds < 0.1, sleeping.seconds
    finally:
        for child in (busy, idle):
            child.kill()
            child.wait()
    assert CpuMeter(None).measure().__enter__().seconds is None  # a broker not started here: no figure
    assert group_cpu_seconds(busy.pid) == 0.0  # the group is gone


def _result(target: str, records_per_s: float, cpu_s: float | None) -> RunResult:
    return RunResult(target=target, bootstrap="x:1", client="raw", operation="produce", records=int(records_per_s),
                     bytes=int(records_per_s) * 100, seconds=1.0, latency_ms={}, latency_unit="request",
                     broker_cpu_s=cpu_s)


def test_the_ratio_lines_compare_cpu_per_gb_when_both_brokers_have_it() -> None:
    ours, kafka = _result("tinystream", 2_000_000, 2.0), _result("kafka", 1_000_000, 2.0)
    assert ours.cpu_s_per_gb == 10.0 and kafka.cpu_s_per_gb == 20.0
    lines = ratio_lines([ours, kafka])
    assert "2.00x records/s" in lines[0]
    assert lines[1].startswith("tinystream / kafka: 0.50x broker CPU per GB (10.0 vs 20.0 s/GB")
    assert len(ratio_lines([ours, _result("kafka", 1_000_000, None)])) == 1
    assert ours.as_dict()["cpu_s_per_gb"] == 10.0


def test_a_produce_run_on_a_broker_started_here_reports_its_cpu_per_gb() -> None:
    spec = produce_workloads.ProduceSpec(topic="bench-cpu", partitions=2, records=200_000, record_size=100,
                                         batch_bytes=65_536, acks="1", compression="none", progress=False)
    with open_target("tinystream", quiet=True) as target:
        assert target.pgid is not None
        result = produce_workloads.run_raw(target, spec)
    assert result.verified, result.problem
    assert result.broker_cpu_s is not None and result.broker_cpu_s > 0
    assert result.cpu_s_per_gb is not None and 0 < result.cpu_s_per_gb < 10_000
    assert "broker CPU" in result.line()
