"""The kind end-to-end suite: a real Kubernetes (kind), the chart with its CRDs, the real image.

The whole session shares one kind cluster (1 control plane + 2 workers in two
zones), created from kind-config.yaml and deleted at the end
(TINYSTREAM_E2E_KEEP=1 keeps it for debugging; TINYSTREAM_E2E_REUSE=1 then runs
chosen tests on it as it is, e.g. `-k failover`). The provider is chosen by
kind_helpers.choose_provider(): kind's stock node image where Docker can pull
it, else the offline node image with podman. Where neither can run, every
test skips with the exact reason and the command that fixes it.

    make test-kind                                  # builds what is missing, then runs this suite
    .venv/bin/python -m pytest e2e/kind -v -m kind  # the suite alone

Right after the cluster is created (offline provider: with the host's FORWARD
chain told to accept pod traffic, host_firewall.py) a network preflight
(preflight.py) tries every path the product needs and stops the whole session
in seconds with the blocked path; a session fixture that fails (helm install)
stops it too. A failed test leaves the cluster's logs, events and describes in
.cache/kind-e2e/artifacts/ (diagnostics.py) and a digest beside the failure.

Measurements (helm install -> Ready, failover, records acked/lost, creation
times) are collected in `MEASURED` and printed at the end of the run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import diagnostics
import host_firewall
import pytest
from image_build import ensure_image
from kind_helpers import (
    IMAGE_REPO,
    IMAGE_TAGS,
    KIND_CLUSTER,
    MEASURED,
    ROOT,
    Kube,
    Provider,
    choose_provider,
    kind_config,
    load_image,
    measure,
    wire_pod_network,
)
from manifests import NAMESPACE
from preflight import run_preflight
from previous_release import PREVIOUS_COMMIT, PREVIOUS_IMAGE, THIS_CHART, Release, chart_version, previous_tree


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed kind test (or fixture) gets the cluster's logs, events and describes, and a digest beside it."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and diagnostics.ACTIVE and item.get_closest_marker("kind"):
        report.sections.append(("kind diagnostics", diagnostics.collect(diagnostics.ACTIVE[0], item.nodeid)))


def stop_suite(kube: Kube, why: str) -> None:
    """Stop the whole session now with the cause and the cluster's own account (every other test needs it)."""
    digest = diagnostics.collect(kube, "session-setup")
    pytest.exit(f"{why}\n{digest}", returncode=1)


def pytest_terminal_summary(terminalreporter):
    if MEASURED:
        terminalreporter.section("kind e2e measurements")
        for name, value in MEASURED.items():
            terminalreporter.write_line(f"{name}: {value}")


@pytest.fixture(scope="session")
def provider() -> Provider:
    chosen = choose_provider()
    if isinstance(chosen, str):
        pytest.skip(chosen)
    measure("provider", f"{chosen.name} ({chosen.engine}, node image {chosen.node_image.split('@')[0]})")
    return chosen


def build_broker_images(provider: Provider, tmp: Path) -> Release:
    """The project's image under both tags, and the previous release's image, built by the provider's
    engine (before the cluster: the network preflight runs it). Returns the release to install first."""
    first = f"{IMAGE_REPO}:{IMAGE_TAGS[0]}"
    start = time.monotonic()
    how = ensure_image(first, engine=provider.engine)
    for tag in IMAGE_TAGS[1:]:  # same image, another name: a tag change is an image change for the StatefulSet
        provider.engine_cmd("tag", first, f"{IMAGE_REPO}:{tag}")
    measure(f"broker image ({how})", f"{time.monotonic() - start:.0f} s")
    this_chart = THIS_CHART
    tree = previous_tree(tmp)
    if tree is None:
        measure("previous release", f"commit {PREVIOUS_COMMIT[:12]} is not in this checkout: the suite installs "
                                    "this tree's chart and upgrades it to itself")
        return Release(this_chart, IMAGE_TAGS[0], chart_version(this_chart), None)
    start = time.monotonic()
    how = ensure_image(PREVIOUS_IMAGE, engine=provider.engine, context=tree, key=f"release-{PREVIOUS_COMMIT}")
    measure(f"previous release image ({how}, {PREVIOUS_COMMIT[:12]})", f"{time.monotonic() - start:.0f} s")
    chart = tree / "charts" / "tinystream"
    return Release(chart, PREVIOUS_IMAGE.split(":")[-1], chart_version(chart), PREVIOUS_COMMIT)


def load_broker_images(provider: Provider, release: Release, tmp: Path) -> None:
    start = time.monotonic()
    refs = {f"{IMAGE_REPO}:{tag}" for tag in (*IMAGE_TAGS, release.image_tag)}
    load_image(provider, sorted(refs), tmp)
    measure("broker images load", f"{time.monotonic() - start:.0f} s")


@pytest.fixture(scope="session")
def kind_cluster(provider: Provider) -> Kube:
    # Not under pytest's basetemp: other pytest runs on the machine rotate /tmp/pytest-of-<user>.
    tmp = ROOT / ".cache" / "kind-e2e"
    tmp.mkdir(parents=True, exist_ok=True)
    kubeconfig, config = tmp / "kubeconfig", tmp / "kind-config.yaml"
    config.write_text(kind_config(provider))
    kube = Kube(kubeconfig)
    if os.environ.get("TINYSTREAM_E2E_REUSE") == "1" and KIND_CLUSTER in provider.kind("get", "clusters").stdout:
        # Debugging: the cluster a TINYSTREAM_E2E_KEEP=1 run left, as it is (images, release, objects).
        kubeconfig.write_text(provider.kind("get", "kubeconfig", "--name", KIND_CLUSTER).stdout)
        if provider.own_cni:
            host_firewall.open_pod_network()
        diagnostics.ACTIVE[:] = [kube]
        kube.first_release = Release(THIS_CHART, IMAGE_TAGS[0], "reused", None)
        yield kube
        return
    provider.kind("delete", "cluster", "--name", KIND_CLUSTER, check=False, timeout=300)  # a leftover run
    kube.first_release = build_broker_images(provider, tmp)
    start = time.monotonic()
    wait = () if provider.own_cni else ("--wait", "300s")  # without a CNI no node is Ready until wired
    provider.kind("create", "cluster", "--name", KIND_CLUSTER, "--config", str(config), "--image",
                  provider.node_image, "--kubeconfig", str(kubeconfig), *wait, timeout=900)
    diagnostics.ACTIVE[:] = [kube]
    try:
        if provider.own_cni:
            # Pod addresses cross the host's bridge: whatever its FORWARD policy (dockerd sets DROP), accept them.
            for line in host_firewall.open_pod_network():
                print(f"kind e2e: host firewall: {line}", flush=True)
            wire_pod_network(provider, kube)
        kube.kubectl("wait", "nodes", "--all", "--for=condition=Ready", "--timeout=300s", namespace=None, timeout=360)
        measure("cluster creation (3 nodes Ready)", f"{time.monotonic() - start:.0f} s")
        load_broker_images(provider, kube.first_release, tmp)
        failure, seconds = run_preflight(kube, f"{IMAGE_REPO}:{IMAGE_TAGS[0]}")
        measure("network preflight", f"{seconds:.0f} s, {'FAILED' if failure else 'every path open'}")
        if failure:
            stop_suite(kube, failure)
        for ns, deploy in (("kube-system", "coredns"), ("local-path-storage", "local-path-provisioner")):
            kube.kubectl("rollout", "status", f"deploy/{deploy}", "--timeout=300s", namespace=ns, timeout=360)
        yield kube
    finally:
        diagnostics.ACTIVE.clear()
        if os.environ.get("TINYSTREAM_E2E_KEEP") != "1":
            provider.kind("delete", "cluster", "--name", KIND_CLUSTER, check=False, timeout=300)
            if provider.own_cni:
                host_firewall.close_pod_network()


@pytest.fixture(scope="session")
def installed(kind_cluster: Kube) -> Kube:
    """The previous release's chart installed as a user would: CRDs included (no --skip-crds), the operator
    Ready; test_kind.py upgrades it to this tree's chart (previous_release.py)."""
    release = kind_cluster.first_release
    kind_cluster.helm_install_started = time.monotonic()
    if os.environ.get("TINYSTREAM_E2E_REUSE") == "1" and kind_cluster.helm("status", "ts", check=False).returncode == 0:
        return kind_cluster
    try:
        kind_cluster.helm("install", "ts", str(release.chart), "--create-namespace",
                          "--set", f"image.repository={IMAGE_REPO}", "--set", f"image.tag={release.image_tag}",
                          "--set", "image.pullPolicy=Never", "--wait", "--timeout", "5m", timeout=400)
    except AssertionError as exc:  # every test needs the operator: stop with the cluster's account, not 26 errors
        stop_suite(kind_cluster, f"kind e2e: helm install did not become Ready: {str(exc)[:2000]}")
    measure(f"helm install --wait (chart {release.version}: CRDs + operator Ready)",
            f"{time.monotonic() - kind_cluster.helm_install_started:.0f} s")
    assert NAMESPACE in kind_cluster.kubectl("get", "ns", "-o", "name", namespace=None).stdout
    return kind_cluster
