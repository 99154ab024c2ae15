"""A real Kubernetes control plane as local processes: etcd, kube-apiserver, and optionally kube-controller-manager.

The operator's fast tier runs against it: what only a real API server does
(CRD schema validation and defaulting, CEL rules, status and scale
subresources, RBAC, resourceVersion conflicts, finalizers, garbage collection
by owner references) is tested here in seconds, with no kubelet and no
containers. The binaries are built from the Go module proxy by
`tools/k8s/build-binaries.sh` into `.cache/k8s/bin` (`make k8s-binaries`).

Credentials: a static admin token in `system:masters` (kube-apiserver's
`--token-auth-file`); the API server makes its own self-signed serving
certificate, so clients skip verification (loopback only); service-account
tokens are signed with a key made here by openssl, so TokenRequest works and
a test can act as any ServiceAccount.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = ROOT / ".cache" / "k8s" / "bin"
BUILD_COMMAND = "make k8s-binaries   # tools/k8s/build-binaries.sh, from the Go module proxy"
ADMIN_TOKEN = "tinystream-admin-token"
SERVICE_CIDR = "10.96.0.0/16"


def k8s_bin_dir() -> Path:
    return Path(os.environ.get("TINYSTREAM_K8S_BIN", DEFAULT_BIN))


def missing_binaries(*names: str) -> list[str]:
    """Binaries of `names` not built yet (the caller skips with BUILD_COMMAND)."""
    return [n for n in names if not (k8s_bin_dir() / n).is_file()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KubeControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) under `workdir`, until `stop()`."""

    def __init__(self, workdir: Path, *, controller_manager: bool = False) -> None:
        self.workdir = Path(workdir)
        self.controller_manager = controller_manager
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = self.workdir / "kubeconfig"
        self._procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    # -- life cycle -------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> KubeControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        missing = missing_binaries("etcd", "kube-apiserver", *(["kube-controller-manager"] if self.controller_manager else []))
        if missing:
            raise FileNotFoundError(f"not built: {', '.join(missing)} in {k8s_bin_dir()}; run {BUILD_COMMAND}")
        sa_key = self._service_account_key()
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n')
        etcd_port, etcd_peer = free_port(), free_port()
        self._spawn("etcd", [
            "--data-dir", str(self.workdir / "etcd"), "--name", "fast-tier",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}", "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster", f"fast-tier=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync",  # a test's etcd: throughput over durability
        ])
        self._spawn("kube-apiserver", [
            "--etcd-servers", f"http://127.0.0.1:{etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(self.port),
            "--cert-dir", str(self.workdir / "apiserver-certs"),
            "--token-auth-file", str(tokens),
            "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(sa_key), "--service-account-signing-key-file", str(sa_key),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--enable-priority-and-fairness=false",  # fewer moving parts, faster start
        ])
        self._write_kubeconfig()
        self._wait_ready(timeout)
        if self.controller_manager:
            self._spawn("kube-controller-manager", [
                "--kubeconfig", str(self.kubeconfig), "--bind-address", "127.0.0.1", "--secure-port", "0",
                "--service-account-private-key-file", str(sa_key), "--leader-elect=false",
                "--controllers", "*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-route,-service",
                "--concurrent-gc-syncs", "5",
            ])
        return self

    def stop(self) -> None:
        for _, proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
        for _, proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()

    def __enter__(self) -> KubeControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients ----------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *, token: str = ADMIN_TOKEN,
                content_type: str = "application/json") -> tuple[int, Any]:
        """One API call; (status, decoded JSON body). Errors are returned, not raised."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, context=_insecure(), timeout=30) as r:  # noqa: S310 - loopback
                return r.status, _decoded(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _decoded(exc.read())

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        """kubectl (built with the rest) against this control plane."""
        return subprocess.run([str(k8s_bin_dir() / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                              input=input, capture_output=True, text=True, check=check, timeout=120)

    def service_account_token(self, namespace: str, name: str) -> str:
        """A token for a ServiceAccount (TokenRequest), to act as it."""
        status, body = self.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                                    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                     "spec": {"expirationSeconds": 3600}})
        if status != 201:
            raise RuntimeError(f"TokenRequest for {namespace}/{name} failed: {status} {body}")
        return str(body["status"]["token"])

    def logs(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    # -- internals --------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([str(k8s_bin_dir() / name), *args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        log.close()
        self._procs.append((name, proc))

    def _service_account_key(self) -> Path:
        key = self.workdir / "service-account.key"
        if not key.exists():
            openssl = shutil.which("openssl")
            if openssl is None:
                raise FileNotFoundError("openssl is not installed (apt-get install openssl)")
            subprocess.run([openssl, "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        return key

    def _write_kubeconfig(self) -> None:
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fast-tier",
            "clusters": [{"name": "fast-tier", "cluster": {"server": self.url, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}}],
            "contexts": [{"name": "fast-tier", "context": {"cluster": "fast-tier", "user": "admin", "namespace": "default"}}],
        }))

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            for name, proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.logs(name)}")
            try:
                status, body = self.request("GET", "/readyz")
                if status == 200:
                    return
                last = body
            except (OSError, urllib.error.URLError) as exc:
                last = exc
            time.sleep(0.2)
        raise TimeoutError(f"kube-apiserver not ready after {timeout} s: {last}\n{self.logs('kube-apiserver')}")


def _decoded(raw: bytes) -> Any:
    """JSON where the server sent JSON (API objects, Status), the text otherwise (/readyz)."""
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")


def _insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
