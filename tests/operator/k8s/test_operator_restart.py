"""An operator restart resumes from what is stored in the API (a separate module: it needs its own operators)."""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'kopf', 'kmock')

import pytest
from fake_controller import FakeController
from kmock_helpers import Api, declare, running_operator

TS = "tinystream.io/v1alpha1"
CLUSTER = {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo", "generation": 1},
           "spec": {"brokers": 3}}


@pytest.fixture
async def api(kmock):
    declare(kmock)
    client = Api(str(kmock.url))
    yield client
    await client.close()


@pytest.fixture
def controller():
    return FakeController()


@pytest.mark.slow  # two operator start/stop cycles: ~12 s
@pytest.mark.timeout(60)
async def test_operator_restart_resumes_from_status(kmock, api, controller):
    async with running_operator(str(kmock.url), controller=controller):
        await api.create(TS, "tinystreamclusters", CLUSTER)
        await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o is not None)
    # A change made while no operator runs is picked up by the next one (resume/update).
    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"brokers": 4}})
    async with running_operator(str(kmock.url), controller=controller):
        sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o["spec"]["replicas"] == 4)
    assert sts["metadata"]["ownerReferences"][0]["uid"] == "uid-streaming-tinystreamclusters-demo"
