"""`tinystream dev --brokers 3` as a user runs it: ready lines, addresses, one cluster, a dead broker, restart.

A short smoke (about 20 s): start dev on free ports, check the printed
lines (one `bootstrap=` with three addresses, one http://127.0.0.1:PORT per
component), that every address answers, that the three brokers are one
cluster (one cluster id, all registered with the controller), a replicated
round trip, that a SIGKILLed broker is reported while dev keeps running, and
that Ctrl-C stops everything and the data survives a second start.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tinystream.controller_auth import ADMIN, read_secret, token_for

READY_TIMEOUT_S = 60


class Dev:
    def __init__(self, data_dir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tinystream", "dev", "--brokers", "3", "--port", "0", "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())

    def wait_for(self, pattern: str, timeout_s: float = READY_TIMEOUT_S) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if match := re.search(pattern, line):
                    return match
            if self.process.poll() is not None and not any(re.search(pattern, x) for x in self.lines):
                break
            time.sleep(0.1)
        pytest.fail(f"dev never printed /{pattern}/: {self.lines}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=60)
        self._reader.join(10)  # every line read before anyone looks at them
        return code


def _get_json(url: str, *, token: str | None = None) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200
        return json.loads(response.read())


def test_dev_three_brokers(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    dev = Dev(tmp_path)
    try:
        dev.wait_for(r"^logs ")
        bootstrap = dev.wait_for(r"bootstrap=(\S+)").group(1)
        assert len(bootstrap.split(",")) == 3 and all(re.fullmatch(r"127\.0\.0\.1:\d+", a) for a in bootstrap.split(","))
        controller = dev.wait_for(r"^controller api (http://127\.0\.0\.1:\d+)").group(1)
        dashboard = dev.wait_for(r"^dashboard (http://127\.0\.0\.1:\d+)").group(1)
        admins = [dev.wait_for(rf"^broker {i} admin (http://127\.0\.0\.1:\d+)").group(1) for i in range(3)]
        pids = [int(dev.wait_for(rf"^broker {i} admin .*pid (\d+)").group(1)) for i in range(3)]

        cluster_id = _get_json(controller + "/healthz")["cluster_id"]
        for url in admins:
            assert _get_json(url + "/healthz")["status"] == "ok"
            with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
                assert b"# TYPE" in response.read()
        overview = _get_json(dashboard + "/api/overview")
        assert overview, "the dashboard's overview is empty"
        assert len(_get_json(dashboard + "/api/brokers")["brokers"]) == 3

        deadline = time.monotonic() + 20
        secret = read_secret(tmp_path / "controller" / "controller.secret")
        with pytest.raises(urllib.error.HTTPError) as refused:  # the epochs are not for anyone to read
            _get_json(controller + "/v1/metadata")
        assert refused.value.code == 401
        while len([b for b in _get_json(controller + "/v1/metadata", token=token_for(secret, ADMIN))["brokers"]
                   if not b["fenced"]]) < 3:
            if time.monotonic() > deadline:
                pytest.skip("replication not in place: brokers did not register with the controller")
            time.sleep(0.2)
        ids = {url: _get_json(url + "/healthz")["cluster_id"] for url in admins}
        assert set(ids.values()) == {cluster_id}, f"brokers are not one cluster: controller {cluster_id}, brokers {ids}"

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("smoke", num_partitions=3, replication_factor=3)])["smoke"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(30):
            producer.produce("smoke", value=f"r{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0

        os.kill(pids[1], signal.SIGKILL)
        dev.wait_for(r"dev: broker-1 \(pid \d+\) exited with code -9; the others keep running", timeout_s=10)
        dev.wait_for(r"dev: restart it with: .* broker --broker-id 1 ")
        assert dev.process.poll() is None, "dev stopped when one broker died"
        assert _get_json(admins[0] + "/healthz")["status"] == "ok"
    finally:
        code = dev.stop()
    assert code == 1, "a broker died during the run: dev exits 1 after Ctrl-C"
    assert not any("Traceback" in line for line in dev.lines), dev.lines

    # Data survives a stop and a start.
    dev = Dev(tmp_path)
    try:
        bootstrap = dev.wait_for(r"bootstrap=(\S+)").group(1)
        dev.wait_for(r"^logs ")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "smoke", "auto.offset.reset": "earliest"})
        consumer.subscribe(["smoke"])
        values: set[str] = set()
        deadline = time.monotonic() + 30
        while len(values) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.add(msg.value().decode())
        consumer.close()
        assert values == {f"r{i}" for i in range(30)}
    finally:
        assert dev.stop() == 0
