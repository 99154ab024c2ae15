"""The controller state in a TinyStreamCluster's status, saved and loaded through the real API server.

Found on a real cluster (e2e/kind): the CRD declared `status.controller` a
string while the store writes an object (encoding, data, bytes,
metadataVersion), so every save was refused (422) and no cluster's controller
ever opened: brokers got NOT_CONTROLLER forever. The fast tier's operator
tests use a fake controller, so nothing here had saved a state before.
"""

from __future__ import annotations

import pytest
from real_api import RealApi, connection

from tinystream.operator.controller import ControllerConfig, ControllerState
from tinystream.operator.k8s import status_store as status_store_module
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.status_store import JSON, ZLIB, ClusterStatusStore
from tinystream.operator.service.controller_service import ControllerService

pytestmark = pytest.mark.timeout(60)
TS = "tinystream.io/v1alpha1"
CLUSTER = {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo"},
           "spec": {"brokers": 3, "storage": {"size": "1Gi"}}}


@pytest.fixture
async def store(control_plane, namespace):
    api = RealApi(control_plane, namespace)
    await api.create(TS, "tinystreamclusters", CLUSTER)
    client = KubeClient.from_connection_info(connection(control_plane))
    yield api, ClusterStatusStore(client, ClusterKey(namespace, "demo"))
    await client.close()
    await api.close()


async def test_a_new_cluster_controller_opens_and_its_state_survives_a_reload(store) -> None:
    api, status_store = store
    service = await ControllerService.open(status_store, seed=7)  # bootstraps and saves: refused before the fix
    saved = (await api.get(TS, "tinystreamclusters", "demo"))["status"]
    assert saved["clusterId"] == service.image.cluster_id
    assert saved["controller"]["encoding"] == JSON and saved["controller"]["bytes"] > 0
    loaded = await status_store.load()
    assert loaded is not None and loaded.image.cluster_id == service.image.cluster_id


async def test_a_large_state_is_stored_compressed_and_loads_back(store, monkeypatch) -> None:
    api, status_store = store
    monkeypatch.setattr(status_store_module, "COMPRESS_ABOVE", 0)  # every state counts as large
    state = ControllerState.bootstrap(cluster_id="c" * 22, seed=1, config=ControllerConfig())
    await status_store.save(state)
    stored = (await api.get(TS, "tinystreamclusters", "demo"))["status"]["controller"]
    assert stored["encoding"] == ZLIB
    assert (await status_store.load()).image.cluster_id == "c" * 22
