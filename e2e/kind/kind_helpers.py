"""Helpers of the kind end-to-end suite: the provider, the tools, the cluster's kubectl and helm.

Two ways to a kind cluster, chosen by `choose_provider()`:

- stock: a Docker engine that can pull kind's own node image
  (`kindest/node`, pinned below) — any laptop with Docker and internet;
- offline: podman (kind's podman provider) with the node image that
  tools/k8s/build-node-image.sh builds from Debian packages and the binaries
  of tools/k8s/build-binaries.sh — no container registry needed. That image
  has no kindnetd, so the cluster is created with `disableDefaultCNI` and
  `wire_pod_network()` gives each node a bridge CNI config on its pod range
  plus routes to the other nodes' ranges.

TINYSTREAM_KIND_PROVIDER=stock|offline chooses outright. When neither can
run, `choose_provider()` says exactly why and which command fixes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from manifests import NAMESPACE

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
KIND_CLUSTER = "tinystream-e2e"
#: `localhost/` so the name is the same in podman, Docker and the nodes' containerd
#: (a bare `tinystream` would become docker.io/library/tinystream in the pod spec).
IMAGE_REPO = "localhost/tinystream"
IMAGE_TAGS = ("e2e", "e2e-roll")  # the second tag drives the rolling-update test
#: kind v0.33.0's own default node image, pinned so a probe can ask for exactly it.
STOCK_NODE_IMAGE = "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"
K8S_VERSION = "v1.34.4"
OFFLINE_NODE_IMAGE = f"localhost/tinystream/kind-node:{K8S_VERSION}"
K8S_BIN = Path(os.environ.get("K8S_BIN") or ROOT / ".cache" / "k8s" / "bin")


#: name -> printable value, filled by the fixtures and tests, printed at the end of the run
#: (conftest.pytest_terminal_summary). Here, not in conftest: a test module importing conftest
#: would get a second copy of it (--import-mode=importlib).
MEASURED: dict[str, str] = {}


def measure(name: str, value: str) -> None:
    MEASURED[name] = value
    print(f"kind e2e: {name}: {value}", flush=True)


def tool(name: str) -> str | None:
    """A tool from the project's build (.cache/k8s/bin), else PATH, else $GOPATH/bin."""
    built = K8S_BIN / name
    if built.is_file() and os.access(built, os.X_OK):
        return str(built)
    found = shutil.which(name)
    if found:
        return found
    candidate = Path(os.environ.get("GOBIN") or Path(os.environ.get("GOPATH") or Path.home() / "go") / "bin") / name
    return str(candidate) if candidate.is_file() else None


def run(*args: str, check: bool = True, timeout: float = 600, input: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, input=input, cwd=ROOT,
                            env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@dataclass(frozen=True)
class Provider:
    """How this machine runs kind: the container engine, the node image, the CNI."""

    name: str  # "stock" or "offline"
    engine: str  # "docker" or "podman"
    node_image: str
    own_cni: bool  # the node image has no CNI: wire_pod_network() after creation
    env: dict[str, str] = field(default_factory=dict)

    def kind(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(tool("kind") or "kind", *args, timeout=timeout, check=check, env=self.env)

    def engine_cmd(self, *args: str, timeout: float = 600, check: bool = True,
                   input: str | None = None) -> subprocess.CompletedProcess[str]:
        return run(self.engine, *args, timeout=timeout, check=check, input=input)


def _answers(*cmd: str, timeout: float = 30) -> bool:
    try:
        return subprocess.run(list(cmd), capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _stock_problem() -> str | None:
    """Why kind's stock node image cannot be used here (None: it can)."""
    if shutil.which("docker") is None:
        return "no docker client"
    if not _answers("docker", "info"):
        return "no running Docker engine (`docker info` fails)"
    if _answers("docker", "image", "inspect", STOCK_NODE_IMAGE):
        return None
    if _answers("docker", "pull", STOCK_NODE_IMAGE, timeout=600):
        return None
    return f"`docker pull {STOCK_NODE_IMAGE.split('@')[0]}` fails (no route to its registry)"


def _offline_problem() -> str | None:
    """Why the offline podman path cannot run here (None: it can), with the fixing command."""
    if os.geteuid() != 0:
        return ("the offline node image needs root (kind's podman nodes are privileged containers; "
                "debootstrap): run the suite as root, e.g. `sudo make test-kind`")
    if shutil.which("podman") is None:
        return "podman is missing: `apt-get install -y podman` (or `make test-kind`, which installs it)"
    if not _answers("podman", "image", "exists", OFFLINE_NODE_IMAGE):
        return f"the node image {OFFLINE_NODE_IMAGE} is not built: `bash tools/k8s/build-node-image.sh`"
    return None


def choose_provider() -> Provider | str:
    """The provider this machine can run, or the reason nothing can (a skip message)."""
    wanted = os.environ.get("TINYSTREAM_KIND_PROVIDER", "auto")
    missing = [f"{name} ({hint})" for name, hint in (
        ("kind", "bash tools/k8s/build-binaries.sh kind"), ("helm", "bash tools/k8s/build-binaries.sh helm"),
        ("kubectl", "bash tools/k8s/build-binaries.sh kubectl")) if tool(name) is None]
    if missing:
        return "kind e2e needs " + "; ".join(missing)
    stock = _stock_problem() if wanted in ("auto", "stock") else "not chosen"
    if stock is None:
        return Provider("stock", "docker", os.environ.get("TINYSTREAM_KIND_NODE_IMAGE", STOCK_NODE_IMAGE), False)
    offline = _offline_problem() if wanted in ("auto", "offline") else "not chosen"
    if offline is None:
        return Provider("offline", "podman", os.environ.get("TINYSTREAM_KIND_NODE_IMAGE", OFFLINE_NODE_IMAGE), True,
                        {"KIND_EXPERIMENTAL_PROVIDER": "podman"})
    return f"kind e2e cannot run here: stock kind: {stock}; offline kind: {offline}"


def load_image(provider: Provider, ref: str | list[str], tmp: Path) -> None:
    """Images from the provider's engine into every node of the kind cluster."""
    refs = [ref] if isinstance(ref, str) else ref
    if provider.engine == "podman":  # kind's podman provider loads archives, not images from podman's store
        archive = tmp / "images.tar"
        archive.unlink(missing_ok=True)  # podman will not write over an archive
        provider.engine_cmd("save", "-m", "--format", "docker-archive", "-o", str(archive), *refs, timeout=900)
        provider.kind("load", "image-archive", str(archive), "--name", KIND_CLUSTER)
        archive.unlink()
    else:
        for one in refs:
            provider.kind("load", "docker-image", one, "--name", KIND_CLUSTER)


def kind_config(provider: Provider) -> str:
    """kind-config.yaml, plus `disableDefaultCNI` where the node image has no CNI of its own."""
    text = (HERE / "kind-config.yaml").read_text()
    if provider.own_cni:
        text = text.replace("\nnetworking:\n", "\nnetworking:\n  disableDefaultCNI: true\n", 1)
        assert "disableDefaultCNI" in text, "kind-config.yaml lost its networking section"
    return text


class Kube:
    """kubectl and helm against the kind cluster's context."""

    def __init__(self, kubeconfig: Path) -> None:
        self.env_kubeconfig = str(kubeconfig)
        self.helm_install_started = 0.0  # time.monotonic() at `helm install`, for helm install -> Ready
        self.first_release: Any = None  # previous_release.Release: the chart `helm install` installs

    def kubectl(self, *args: str, namespace: str | None = NAMESPACE, **kw) -> subprocess.CompletedProcess[str]:
        ns = ("-n", namespace) if namespace else ()
        return run(tool("kubectl") or "kubectl", "--kubeconfig", self.env_kubeconfig, *ns, *args, **kw)

    def helm(self, *args: str, **kw) -> subprocess.CompletedProcess[str]:
        return run(tool("helm") or "helm", "--kubeconfig", self.env_kubeconfig, "-n", NAMESPACE, *args, **kw)

    def apply(self, text: str, **kw) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "-f", "-", input=text, **kw)

    def json(self, *args: str, namespace: str | None = NAMESPACE) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json", namespace=namespace).stdout)


def bridge_conflist(pod_cidr: str) -> str:
    """A node's CNI config: a bridge on its pod range (host-local IPAM), portmap for hostPorts.

    No masquerade: every node routes every other node's pod range (wire_pod_network), so pod
    addresses are reachable as they are, the way kindnetd leaves them."""
    return json.dumps({
        "cniVersion": "0.4.0",
        "name": "tinystream-bridge",
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]], "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }, indent=2)


def wire_pod_network(provider: Provider, kube: Kube, timeout: float = 300) -> None:
    """Give each node a bridge CNI config on its pod range and routes to the other nodes' ranges."""
    deadline = time.monotonic() + timeout
    while True:  # the controller-manager assigns pod ranges shortly after each node registers
        nodes = kube.json("nodes", namespace=None)["items"]
        if nodes and all(n["spec"].get("podCIDR") for n in nodes):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"nodes without a podCIDR after {timeout} s: {[n['metadata']['name'] for n in nodes]}")
        time.sleep(1)
    ranges = {n["metadata"]["name"]: (n["spec"]["podCIDR"],
                                      next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP"))
              for n in nodes}
    for name, (cidr, _) in ranges.items():
        provider.engine_cmd("exec", "-i", name, "sh", "-c", "mkdir -p /etc/cni/net.d && cat >/etc/cni/net.d/10-bridge.conflist",
                            input=bridge_conflist(cidr))
        for other, (other_cidr, other_ip) in ranges.items():
            if other != name:
                provider.engine_cmd("exec", name, "ip", "route", "replace", other_cidr, "via", other_ip)
