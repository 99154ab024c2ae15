"""The kind cluster's network preflight: every path the product needs, checked in seconds.

Right after the cluster is created (and the broker image loaded), one probe
pod runs on every node (pinned by nodeName, listening on PROBE_PORT). From each
one, `kubectl exec` runs PROBER, which tries at once, with a short timeout each:

- pod -> pod across nodes: TCP to every other node's probe pod;
- pod -> CoreDNS pod: TCP 53 to each CoreDNS pod;
- pod -> DNS Service: a name looked up through the pod's resolv.conf (UDP to kube-dns);
- pod -> API server: TCP to the `kubernetes` Service (DNAT to the API server's node address).

The TCP paths go first: when they are open, CoreDNS (which needs them to reach
the API) must become Ready, and then names resolve; DNS is tried last.
A failed path stops the suite at once with the exact path, the host firewall's
state and the dropping rules whose counters grew during the probe
(host_firewall.blockers), instead of a helm --wait that times out minutes later.
`plan_probes` and `report` are pure; `run_preflight` does the I/O.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import host_firewall

NAMESPACE = "tinystream-preflight"
PROBE_PORT = 8080
PROBE_TIMEOUT_S = 3.0
DNS_NAME = "kubernetes.default.svc.cluster.local."  # absolute: no search domains tried first
COREDNS_READY_S = 120  # CoreDNS answers once it has listed the API (TCP paths proven first)

#: Runs in each probe pod: a TCP listener on PROBE_PORT for the other nodes to reach.
LISTENER = f"""\
import socket
server = socket.create_server(("", {PROBE_PORT}))
while True:
    conn, _ = server.accept()
    conn.close()
"""

#: Runs in a probe pod through `kubectl exec`: stdin is a JSON list of probes; prints one JSON
#: list of results. Each probe runs in its own thread, so every path is tried within one timeout.
PROBER = """\
import json, socket, sys, threading, time
probes, timeout = json.load(sys.stdin), float(sys.argv[1])
results = [{"ok": False, "error": "timed out", "ms": None} for _ in probes]
def attempt(i, probe):
    start = time.monotonic()
    try:
        if probe["kind"] == "dns":
            socket.getaddrinfo(probe["host"], None)
        else:
            socket.create_connection((probe["host"], probe["port"]), timeout=timeout).close()
        results[i] = {"ok": True, "error": "", "ms": round((time.monotonic() - start) * 1000)}
    except Exception as exc:
        results[i] = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "ms": None}
threads = [threading.Thread(target=attempt, args=pair, daemon=True) for pair in enumerate(probes)]
for t in threads:
    t.start()
deadline = time.monotonic() + timeout + 0.5
for t in threads:
    t.join(max(0.0, deadline - time.monotonic()))
print(json.dumps(results))
"""


@dataclass(frozen=True)
class ProbePod:
    node: str
    pod: str
    ip: str


@dataclass(frozen=True)
class Probe:
    """One path from one probe pod: what a user would call it, and what to try."""

    path: str  # e.g. "pod -> pod across nodes (worker -> worker2)"
    source: ProbePod
    kind: str  # "tcp" or "dns"
    host: str
    port: int = 0

    def wire(self) -> dict[str, object]:
        return {"kind": self.kind, "host": self.host, "port": self.port}


@dataclass(frozen=True)
class Outcome:
    probe: Probe
    ok: bool
    error: str


def plan_probes(pods: list[ProbePod], coredns: list[ProbePod], api_service_ip: str) -> list[Probe]:
    """Every path to check, from every probe pod (pure)."""
    probes = []
    for src in pods:
        for dst in pods:
            if dst.node != src.node:
                probes.append(Probe(f"pod -> pod across nodes ({src.node} -> {dst.node}, {dst.ip}:{PROBE_PORT})",
                                    src, "tcp", dst.ip, PROBE_PORT))
        for dns in coredns:
            where = "same node" if dns.node == src.node else f"{src.node} -> {dns.node}"
            probes.append(Probe(f"pod -> CoreDNS pod ({where}, {dns.ip}:53/tcp)", src, "tcp", dns.ip, 53))
        probes.append(Probe(f"pod -> DNS Service ({src.node}: lookup of {DNS_NAME}, UDP via kube-dns)",
                            src, "dns", DNS_NAME))
        probes.append(Probe(f"pod -> API server ({src.node} -> Service kubernetes {api_service_ip}:443)",
                            src, "tcp", api_service_ip, 443))
    return probes


def report(outcomes: list[Outcome], blocking: list[host_firewall.Rule], host_state: str) -> str | None:
    """None when every path works, else the message that stops the suite (pure)."""
    failed = [o for o in outcomes if not o.ok]
    if not failed:
        return None
    lines = [f"kind preflight: {len(failed)} of {len(outcomes)} network paths are blocked; "
             "the product cannot work on this cluster (helm --wait would time out):"]
    lines += [f"  BLOCKED {o.probe.path}: {o.error}" for o in failed]
    lines.append(f"  host: {host_state}")
    suspects = [r for r in blocking if host_firewall.touches_subnet(r)]
    if suspects:
        lines.append("  dropping rules whose counters grew during the probe:")
        lines += [f"    {r.backend}: {r.text}" for r in suspects]
    lines.append(f"  fix: host_firewall.open_pod_network() accepts {host_firewall.POD_SUBNET} and "
                 f"{host_firewall.SERVICE_SUBNET} in FORWARD (chain {host_firewall.CHAIN}); a rule above it "
                 "that drops pod traffic must go")
    return "\n".join(lines)


def probe_pod_manifest(node: str, image: str) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"probe-{node}", "namespace": NAMESPACE, "labels": {"app": "network-preflight"}},
        "spec": {
            "nodeName": node,  # not scheduled: one on each node, the control plane included
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "probe", "image": image, "imagePullPolicy": "Never",
                "command": ["python3", "-c", LISTENER],
                "readinessProbe": {"tcpSocket": {"port": PROBE_PORT}, "periodSeconds": 1},
            }],
        },
    }


def run_preflight(kube, image: str, timeout: float = 180) -> tuple[str | None, float]:
    """Probe pods on every node, every path tried from each; (failure message or None, seconds taken)."""
    start = time.monotonic()
    nodes = [n["metadata"]["name"] for n in kube.json("nodes", namespace=None)["items"]]
    kube.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", namespace=None, timeout=120)
    kube.kubectl("create", "namespace", NAMESPACE, namespace=None)
    try:
        for node in nodes:
            kube.apply(json.dumps(probe_pod_manifest(node, image)), namespace=NAMESPACE)
        kube.kubectl("wait", "pods", "--all", "--for=condition=Ready", f"--timeout={int(timeout)}s",
                     namespace=NAMESPACE, timeout=timeout + 30)
        pods = [ProbePod(p["spec"]["nodeName"], p["metadata"]["name"], p["status"]["podIP"])
                for p in kube.json("pods", namespace=NAMESPACE)["items"]]
        coredns = [ProbePod(p["spec"]["nodeName"], p["metadata"]["name"], p["status"]["podIP"])
                   for p in kube.json("pods", "-l", "k8s-app=kube-dns", namespace="kube-system")["items"]
                   if p["status"].get("podIP")]
        api_ip = kube.json("service", "kubernetes", namespace="default")["spec"]["clusterIP"]
        probes = plan_probes(pods, coredns, api_ip)
        before = host_firewall.snapshot()
        outcomes = _probe_all(kube, pods, [p for p in probes if p.kind == "tcp"])
        if all(o.ok for o in outcomes):
            ready = kube.kubectl("rollout", "status", "deploy/coredns", f"--timeout={COREDNS_READY_S}s",
                                 namespace="kube-system", timeout=COREDNS_READY_S + 30, check=False)
            if ready.returncode != 0:
                outcomes += [Outcome(p, False, f"CoreDNS not Ready within {COREDNS_READY_S} s: {ready.stderr.strip()}")
                             for p in probes if p.kind == "dns"]
            else:
                outcomes += _probe_all(kube, pods, [p for p in probes if p.kind == "dns"])
        blocking = host_firewall.blockers(before, host_firewall.snapshot())
        return report(outcomes, blocking, host_firewall.describe()), time.monotonic() - start
    finally:
        kube.kubectl("delete", "namespace", NAMESPACE, "--wait=false", namespace=None, check=False)


def _probe_all(kube, pods: list[ProbePod], probes: list[Probe]) -> list[Outcome]:
    """Every probe, from its own pod, all pods at once."""
    with ThreadPoolExecutor(len(pods)) as pool:
        return [o for chunk in pool.map(lambda pod: _probe_from(kube, pod, probes), pods) for o in chunk]


def _probe_from(kube, pod: ProbePod, probes: list[Probe]) -> list[Outcome]:
    mine = [p for p in probes if p.source == pod]
    if not mine:
        return []
    result = kube.kubectl("exec", "-i", pod.pod, "--", "python3", "-c", PROBER, str(PROBE_TIMEOUT_S),
                          input=json.dumps([p.wire() for p in mine]), namespace=NAMESPACE,
                          timeout=PROBE_TIMEOUT_S + 60, check=False)
    if result.returncode != 0:
        return [Outcome(p, False, f"kubectl exec into {pod.pod} failed: {result.stderr.strip()}") for p in mine]
    return [Outcome(p, r["ok"], r["error"]) for p, r in zip(mine, json.loads(result.stdout), strict=True)]
