"""`tinystream dev` as a user runs it: a real process, real ports, Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

READY_TIMEOUT_S = 60


def _read_until_ready(process: subprocess.Popen[str]) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + READY_TIMEOUT_S
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if line.startswith("broker 0 admin"):
            return lines
    process.kill()
    pytest.fail(f"dev did not become ready: {lines}")


def test_dev_one_broker_prints_addresses_serves_and_stops_cleanly(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tinystream", "dev", "--brokers", "1", "--port", "0", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        lines = _read_until_ready(process)
        bootstrap = next(re.search(r"bootstrap=(127\.0\.0\.1:\d+)", line) for line in lines if "bootstrap=" in line)
        admin_url = re.search(r"(http://127\.0\.0\.1:\d+)", lines[-1]).group(1)
        with urllib.request.urlopen(admin_url + "/healthz", timeout=5) as response:
            assert response.status == 200
        with urllib.request.urlopen(admin_url + "/metrics", timeout=5) as response:
            assert b"# TYPE" in response.read()
        registry = [re.search(r"schema-registry=(http://127\.0\.0\.1:\d+)", line) for line in lines]
        registry_url = next(match.group(1) for match in registry if match)
        with urllib.request.urlopen(registry_url + "/subjects", timeout=5) as response:
            assert response.read() == b"[]"
        assert bootstrap is not None
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=bootstrap.group(1), acks="all")
        producer.send("dev-smoke", b"x").get(timeout=20)
        producer.close()
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
    assert code == 0
    assert (tmp_path / "broker-0").is_dir()
    assert any(path.name.startswith("dev-smoke-0") for path in (tmp_path / "broker-0").rglob("*"))
