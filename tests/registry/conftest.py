"""A broker per module (in-process, real sockets) and registries on it, each on its own thread."""

from __future__ import annotations

import pytest

from tinystream.registry.app import RegistryOptions
from tinystream.testing.broker import BrokerThread, test_settings
from tinystream.testing.registry import RegistryThread


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("registry") / "data")) as running:
        yield running


@pytest.fixture
def start_registry(broker, request):
    """start_registry(topic=..., **options) -> RegistryThread; each test gets its own topic by default."""
    started: list[RegistryThread] = []
    default_topic = "_schemas_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:150]

    def start(**options) -> RegistryThread:
        options.setdefault("topic", default_topic)
        registry = RegistryThread(RegistryOptions(bootstrap=broker.bootstrap, port=0, **options))
        registry.start()
        started.append(registry)
        return registry

    yield start
    for registry in started:
        registry.stop()
