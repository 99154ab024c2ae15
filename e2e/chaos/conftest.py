"""The chaos suite: a local 3-broker cluster (controller + brokers as processes) under faults.

    .venv/bin/python -m pytest e2e/chaos -v -s           # prints the figures
    TINYSTREAM_CHAOS_SEED=7 .venv/bin/python -m pytest e2e/chaos -s

Timeouts are short (chaos_config.py). Every process writes its log under
a temporary folder whose path is printed; it is kept after the run (pytest keeps the last three base temp
folders), and on a failure the tail of each log is printed too.

The suite needs replication (brokers registering with the controller,
RF 3 topics). Where that is missing, it skips and says which probe failed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos_config import BROKERS, CLUSTER_SETTINGS, REGISTER_TIMEOUT_S, SEED
from cluster_state import live_brokers, try_metadata

from tinystream.dev.cluster import ClusterError, LocalCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: fault injection on a local multi-process cluster (e2e/chaos)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


@pytest.fixture(scope="module")
def chaos_cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("chaos")
    cluster = LocalCluster(brokers=BROKERS, data_dir=root / "data", log_dir=root / "logs", first_port=0,
                           overrides=CLUSTER_SETTINGS, echo=lambda line: print(line, flush=True))
    print(f"\nchaos: seed {SEED}; process logs in {cluster.log_dir}", flush=True)
    try:
        cluster.open()
    except ClusterError as exc:
        pytest.fail(f"local cluster did not start: {exc} (logs: {cluster.log_dir})")
    cluster.announce()
    failed = False
    try:
        _require_replication(cluster)
        yield cluster
        failed = any(getattr(item, "rep_call", None) is not None and item.rep_call.failed
                     for item in request.session.items if item.module is request.module)
    finally:
        cluster.close()
        if failed:
            for child in cluster.children:
                print(f"\n----- {child.name}: last lines of {child.log_path} -----\n{_tail(child.log_path)}")
        print(f"\nchaos: process logs kept in {cluster.log_dir}", flush=True)


def _require_replication(cluster: LocalCluster) -> None:
    """Skip (with the reason) when the brokers do not take part in replication yet."""
    deadline = time.monotonic() + REGISTER_TIMEOUT_S
    live: set[int] = set()
    while time.monotonic() < deadline:
        image = try_metadata(cluster.controller_url, token=cluster.admin_token)
        live = live_brokers(image) if image else set()
        if len(live) == BROKERS:
            return
        time.sleep(0.2)
    pytest.skip(f"replication not in place: brokers started with --controller-url did not register with the "
                f"controller within {REGISTER_TIMEOUT_S:.0f} s (live brokers in its image: {sorted(live)})")
