"""A TinyStreamUser's spec.quotas reach the controller's metadata, against the real API server.

The operator runs in-process with its real embedded controller (controller_host.OperatorController),
which keeps the cluster's state in the TinyStreamCluster's status: the test reads the quota records
from there, where every broker's image comes from. Changing spec.quotas changes them, deleting the
user removes them; a negative quota never gets past the API server (the CRD's schema).
"""

from __future__ import annotations

import pytest
from kmock_helpers import ready_condition, running_operator
from real_api import connection

from tinystream.operator.k8s.controller_host import OperatorController
from tinystream.operator.k8s.controller_secret import derived_secrets
from tinystream.operator.k8s.status_store import decode_state
from tinystream.operator.service.controller_service import DriverTiming

pytestmark = pytest.mark.timeout(120)
TS = "tinystream.io/v1alpha1"
GROUP = "/apis/tinystream.io/v1alpha1"
CLUSTER = {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "quoted"}, "spec": {
    "brokers": 1, "storage": {"size": "1Gi", "deleteClaim": True},
    "listeners": {"authentication": {"type": "scram-sha-512"}}}}
USER = {"apiVersion": TS, "kind": "TinyStreamUser", "metadata": {"name": "app"}, "spec": {
    "cluster": "quoted", "authentication": {"type": "scram-sha-512"},
    "quotas": {"producerByteRate": 1048576, "consumerByteRate": 2097152, "requestPercentage": 55,
               "controllerMutationRate": 10}}}


async def saved_quotas(api) -> dict:
    """The client quotas in the controller state saved in the cluster's status: {entity: values}."""
    status = ((await api.get(TS, "tinystreamclusters", "quoted")) or {}).get("status") or {}
    if "controller" not in status:
        return {}
    image = decode_state(status["controller"], where="test").image
    return {tuple(sorted(q.entity.items())): dict(q.values) for q in image.client_quotas}


async def test_spec_quotas_reach_the_controllers_metadata_and_leave_with_the_user(api, control_plane) -> None:
    controller = OperatorController(host="127.0.0.1", port=0, timing=DriverTiming(tick_interval_s=0.2),
                                    secret_source=derived_secrets("test-master"))
    await api.create(TS, "tinystreamclusters", CLUSTER)
    # Watching this test's namespace alone, as the chart's default: a clusterwide operator also works through
    # every other test's leftovers in the shared API server, and the user's finalizer waited behind them for
    # over a minute under CI's load.
    async with running_operator(control_plane.url, controller=controller, connection=connection(control_plane),
                                namespace=api.ns):
        await api.create(TS, "tinystreamusers", USER)
        user = await api.wait_for(TS, "tinystreamusers", "app", lambda o: ready_condition(o).get("status") == "True",
                                  timeout=60)
        assert user["status"]["quotas"] == 4
        assert await saved_quotas(api) == {(("user", "app"),): {
            "producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0, "request_percentage": 55.0,
            "controller_mutation_rate": 10.0}}

        # A key taken out of the spec goes; the others stay as set.
        await api.patch(TS, "tinystreamusers", "app", {"spec": {"quotas": {"consumerByteRate": None,
                                                                           "requestPercentage": None,
                                                                           "controllerMutationRate": None}}})
        await api.wait_for(TS, "tinystreamusers", "app", lambda o: (o or {}).get("status", {}).get("quotas") == 1,
                           timeout=60)
        assert await saved_quotas(api) == {(("user", "app"),): {"producer_byte_rate": 1048576.0}}

        await api.delete(TS, "tinystreamusers", "app")  # the finalizer removes its access and quotas first
        await api.wait_for(TS, "tinystreamusers", "app", lambda o: o is None, timeout=60)
        assert await saved_quotas(api) == {}


@pytest.mark.parametrize(("quotas", "expected"), [
    ({"producerByteRate": -1}, "should be greater than or equal to 1"),
    ({"consumerByteRate": 0}, "should be greater than or equal to 1"),
    ({"requestPercentage": -5}, "should be greater than 0"),
    ({"controllerMutationRate": 0}, "should be greater than 0"),
    ({"fastest": 1}, "unknown field"),
])
def test_a_bad_quota_is_refused_by_the_api_server(control_plane, namespace, quotas, expected) -> None:
    user = {**USER, "spec": {**USER["spec"], "quotas": quotas}}
    status, body = control_plane.request(
        "POST", f"{GROUP}/namespaces/{namespace}/tinystreamusers?fieldValidation=Strict&dryRun=All", user)
    assert status in (400, 422) and expected in body["message"], body  # 400: strict field validation


def test_a_request_percentage_above_100_is_accepted(control_plane, namespace) -> None:
    """Kafka's request_percentage is per request thread: 200 is two threads' worth, not an error."""
    user = {**USER, "spec": {**USER["spec"], "quotas": {"requestPercentage": 200}}}
    status, body = control_plane.request(
        "POST", f"{GROUP}/namespaces/{namespace}/tinystreamusers?fieldValidation=Strict&dryRun=All", user)
    assert status == 201 and body["spec"]["quotas"] == {"requestPercentage": 200}, body
