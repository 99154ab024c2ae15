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


async def test_a_second_operator_that_loads_the_state_fences_the_first(store, control_plane) -> None:
    # Issue 12, 5: two operators must never both write a cluster's state; the one that loaded last owns it.
    api, first = store
    service = await ControllerService.open(first, seed=3)
    assert first.epoch == 1
    client = KubeClient.from_connection_info(connection(control_plane))
    try:
        second = ClusterStatusStore(client, first.cluster)
        taken = await second.load()
        assert taken is not None and taken.image.cluster_id == service.image.cluster_id and second.epoch == 2
        fenced = []
        first.on_fenced = lambda: fenced.append(True)
        with pytest.raises(status_store_module.FencedOut, match="another operator took over"):
            await first.save(taken)
        assert fenced == [True]
        await second.save(taken)  # the owner still writes
        stored = (await api.get(TS, "tinystreamclusters", "demo"))["status"]["controller"]
        assert stored["epoch"] == 2
    finally:
        await client.close()


async def test_two_operators_cannot_both_write_the_first_state(store, control_plane) -> None:
    """Issue 21, item 8: the first state write was not fenced, so two operators could both hold epoch 1."""
    api, first = store
    client = KubeClient.from_connection_info(connection(control_plane))
    try:
        second = ClusterStatusStore(client, first.cluster)
        assert await first.load() is None and await second.load() is None  # both see a new cluster
        state = ControllerState.bootstrap(cluster_id="a" * 22, seed=1, config=ControllerConfig())
        await first.save(state)
        assert first.epoch == 1
        fenced = []
        second.on_fenced = lambda: fenced.append(True)
        other = ControllerState.bootstrap(cluster_id="b" * 22, seed=2, config=ControllerConfig())
        with pytest.raises(status_store_module.FencedOut, match="another operator wrote the first state"):
            await second.save(other)
        assert fenced == [True] and second.epoch == 0
        stored = (await api.get(TS, "tinystreamclusters", "demo"))["status"]
        assert stored["clusterId"] == "a" * 22  # the first writer's state stands
        # A change to the object in between that is not a controller state only makes the first save retry.
        await api.create(TS, "tinystreamclusters", {**CLUSTER, "metadata": {"name": "fresh"}})
        fresh = ClusterStatusStore(client, ClusterKey(first.cluster.namespace, "fresh"))
        assert await fresh.load() is None
        await api.patch(TS, "tinystreamclusters", "fresh", {"metadata": {"labels": {"edited": "yes"}}})
        await fresh.save(state)
        assert fresh.epoch == 1
    finally:
        await client.close()
