"""What a failed kind test leaves behind: the cluster's own account of what went wrong.

When a kind test (or a session fixture) fails, `collect()` writes to
`.cache/kind-e2e/artifacts/<test>/`: every pod's log in the product's
namespace (the operator's and each broker's, the previous container's too),
`kubectl get events -A`, `kubectl get pods -A -o wide`, the custom resources,
and `describe` of every pod that is not Ready. It returns a short digest (the
unready pods and the last warning events) that the suite prints next to the
failure, so the CI log names the cause on its first screen.
"""

from __future__ import annotations

import re
from pathlib import Path

from kind_helpers import ROOT, Kube
from manifests import NAMESPACE

ARTIFACTS = ROOT / ".cache" / "kind-e2e" / "artifacts"
DIGEST_EVENTS = 12
#: The session's cluster while it exists (set by conftest's kind_cluster fixture), for the failure hook.
ACTIVE: list[Kube] = []


def folder_for(test_id: str) -> Path:
    return ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", test_id)[:150]


def collect(kube: Kube, test_id: str) -> str:
    """Write the artifacts of one failure; return the digest to print (never raises)."""
    out = folder_for(test_id)
    try:
        out.mkdir(parents=True, exist_ok=True)
        return _collect(kube, out)
    except Exception as exc:  # a broken cluster must not hide the test's own failure
        return f"kind diagnostics: could not collect ({type(exc).__name__}: {exc})"


def _save(out: Path, name: str, kube: Kube, *args: str, namespace: str | None = None) -> str:
    result = kube.kubectl(*args, namespace=namespace, check=False, timeout=60)
    text = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr.strip() else "")
    (out / name).write_text(text)
    return result.stdout


def _collect(kube: Kube, out: Path) -> str:
    _save(out, "pods.txt", kube, "get", "pods", "-A", "-o", "wide")
    events = _save(out, "events.txt", kube, "get", "events", "-A", "--sort-by=.lastTimestamp")
    _save(out, "custom-resources.yaml", kube, "get", "tsc,tst,tsu", "-A", "-o", "yaml")
    pods = kube.kubectl("get", "pods", "-A", "-o",
                        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} "
                        "{.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}",
                        namespace=None, check=False, timeout=60).stdout
    unready = []
    for line in pods.splitlines():
        ref, _, ready = line.partition(" ")
        ns, _, name = ref.partition("/")
        if ns == NAMESPACE:
            for flag in ((), ("--previous",)):
                _save(out, f"log-{name}{'-previous' if flag else ''}.txt", kube, "logs", name,
                      "--all-containers", "--tail=2000", *flag, namespace=ns)
        if ready != "True" and name:
            unready.append(ref)
            _save(out, f"describe-{ns}-{name}.txt", kube, "describe", "pod", name, namespace=ns)
    warnings = [line for line in events.splitlines() if " Warning " in line][-DIGEST_EVENTS:]
    digest = [f"kind diagnostics in {out.relative_to(ROOT)}: logs of every pod in {NAMESPACE}, "
              "events, pods, custom resources, describe of unready pods",
              f"  pods not Ready: {', '.join(unready) if unready else 'none'}"]
    if warnings:
        digest.append("  last warning events:")
        digest += [f"    {' '.join(line.split())}" for line in warnings]
    return "\n".join(digest)
