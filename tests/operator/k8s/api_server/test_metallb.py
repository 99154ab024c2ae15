"""Load balancer external listeners with a real load balancer: MetalLB's controller as a process.

No cloud runs here, so nothing else would fill a LoadBalancer Service's status.loadBalancer.ingress. MetalLB's
controller (built from the Go module proxy by tools/install-metallb.sh) assigns each Service an address from
an IPAddressPool, as in a bare-metal cluster; the operator must read those addresses back and have each broker
advertise its own Service's. The speaker, which answers ARP for the addresses, is not needed for that.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
from pathlib import Path

import pytest
from fake_controller import FakeController
from kmock_helpers import ready_condition, running_operator
from real_api import connection

from tinystream.testing.kube_control_plane import free_port

# slow: its controller is built by `make kind-prereqs` (CI builds it beside the default suite)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[4]
TOOLS = Path(os.environ.get("TINYSTREAM_GO_TOOLS", ROOT / ".cache" / "go-tools"))
TS = "tinystream.io/v1alpha1"
POOL = ["192.0.2.10", "192.0.2.11", "192.0.2.12"]  # TEST-NET-1: one address for each of the three Services


@pytest.fixture
def metallb(control_plane, namespace, tmp_path):
    """MetalLB's controller watching the whole cluster, its configuration in the test's namespace."""
    binary, crds = TOOLS / "metallb-controller", TOOLS / "metallb-crds"
    if not binary.exists() or not crds.is_dir():
        pytest.skip(f"not built: {binary}; run tools/install-metallb.sh")
    control_plane.kubectl("apply", "--server-side", "-f", str(crds))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/ipaddresspools.metallb.io")
    log = (tmp_path / "metallb.log").open("w")
    process = subprocess.Popen([str(binary), "--kubeconfig", str(control_plane.kubeconfig), "--namespace", namespace,
                                "--webhook-mode", "disabled", "--port", str(free_port()), "--log-level", "info"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.fixture
async def operator(control_plane):
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane)):
        yield


def ingress_ip(service: dict | None) -> str | None:
    entries = ((service or {}).get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return entries[0].get("ip") if entries else None


async def test_metallb_addresses_are_what_the_brokers_advertise(api, metallb, operator) -> None:
    external = [{"name": "lb", "port": 9095, "type": "loadbalancer"}]
    await api.create(TS, "tinystreamclusters", {
        "apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo"},
        "spec": {"brokers": 2, "storage": {"size": "1Gi", "deleteClaim": True}, "listeners": {"external": external}}})
    # No pool yet: MetalLB has nothing to give, and the cluster says what it waits for.
    waiting = await api.wait_for(TS, "tinystreamclusters", "demo",
                                 lambda o: ready_condition(o).get("reason") == "WaitingForExternalAddresses",
                                 timeout=60)
    assert "demo-lb-0" in ready_condition(waiting)["message"]

    await api.create("metallb.io/v1beta1", "ipaddresspools", {
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": {"name": "pool"},
        "spec": {"addresses": [f"{POOL[0]}-{POOL[-1]}"]}})
    assigned = {}
    for name in ("demo-lb-bootstrap", "demo-lb-0", "demo-lb-1"):
        service = await api.wait_for("v1", "services", name, lambda o: ingress_ip(o) is not None, timeout=60)
        assert service["spec"]["type"] == "LoadBalancer"
        assigned[name] = ingress_ip(service)
    assert sorted(assigned.values(), key=ipaddress.ip_address) == POOL  # MetalLB's, one each
    want = f"0 LB {assigned['demo-lb-0']} 9095\n1 LB {assigned['demo-lb-1']} 9095\n"
    config = await api.wait_for("v1", "configmaps", "demo-config",
                                lambda o: (o or {}).get("data", {}).get("external-listeners") == want, timeout=60)
    assert config["data"]["external-listeners"] == want
    assert "LB://0.0.0.0:9095" in config["data"]["broker.toml"]
    cluster = await api.wait_for(TS, "tinystreamclusters", "demo",
                                 lambda o: ready_condition(o).get("reason") != "WaitingForExternalAddresses",
                                 timeout=60)
    assert ready_condition(cluster)["status"] == "False"  # no kubelet: no broker runs, but no address is missing
