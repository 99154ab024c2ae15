"""The host's firewall and the kind cluster's pod network: what lets pod traffic cross the host.

Why: the offline provider has no kindnetd. Each node routes the other nodes'
pod ranges through its podman address (kind_helpers.wire_pod_network), so a
packet between two pods on two nodes crosses the host's podman bridge with
pod addresses. With `net.bridge.bridge-nf-call-iptables=1` bridged packets
traverse the host's iptables FORWARD chain, and once dockerd has started that
chain's policy is DROP: pods then reach neither CoreDNS, nor Services, nor the
API server (issue 20).

What this module does about it, idempotently and on every iptables backend
the host has (legacy and nft tables are both consulted by the kernel, so a
DROP in either one drops):
- `open_pod_network()`: a chain `TINYSTREAM-KIND` that accepts the pod and
  Service ranges, jumped to from the top of FORWARD. Docker re-inserts its own
  jumps above ours when it restarts; none of them drops foreign bridges, so
  the order does not matter.
- `close_pod_network()`: the jump and the chain removed (when the cluster is).
- `snapshot()` / `blockers()`: packet counters of every DROP/REJECT rule and
  DROP policy, before and after a probe; the ones that grew are the rules that
  dropped it, named in the preflight's message.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CHAIN = "TINYSTREAM-KIND"
#: kind's defaults, written into kind-config.yaml's networking section by kind_helpers.kind_config.
POD_SUBNET = "10.244.0.0/16"
SERVICE_SUBNET = "10.96.0.0/16"
BRIDGE_NF_SYSCTL = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def backends() -> list[str]:
    """The iptables commands of this host that answer (legacy and nft both, when both are there)."""
    found = []
    for name in ("iptables-legacy", "iptables-nft", "iptables"):
        path = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
        if path and _run(path, "-w", "-S", "FORWARD").returncode == 0:
            found.append(path)
    if len(found) > 1 and found[-1].endswith("/iptables"):
        found.pop()  # the plain name is one of the two backends above (Debian's alternatives)
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(args), 1, "", str(exc))


def run_checked(*args: str) -> None:
    result = _run(*args)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")


def open_pod_network(subnets: tuple[str, ...] = (POD_SUBNET, SERVICE_SUBNET)) -> list[str]:
    """Accept the cluster's ranges in FORWARD on every backend; returns what was done, for the log."""
    done = []
    for ipt in backends():
        if _run(ipt, "-w", "-S", CHAIN).returncode != 0:
            run_checked(ipt, "-w", "-N", CHAIN)
        run_checked(ipt, "-w", "-F", CHAIN)
        for subnet in subnets:
            for direction in ("-s", "-d"):
                run_checked(ipt, "-w", "-A", CHAIN, direction, subnet, "-j", "ACCEPT")
        if _run(ipt, "-w", "-C", "FORWARD", "-j", CHAIN).returncode != 0:
            run_checked(ipt, "-w", "-I", "FORWARD", "1", "-j", CHAIN)
        done.append(f"{Path(ipt).name}: FORWARD -> {CHAIN} accepts {', '.join(subnets)}")
    return done


def close_pod_network() -> None:
    """Undo open_pod_network (every copy of the jump, then the chain); quiet where there is nothing."""
    for ipt in backends():
        while _run(ipt, "-w", "-D", "FORWARD", "-j", CHAIN).returncode == 0:
            pass
        if _run(ipt, "-w", "-S", CHAIN).returncode == 0:
            _run(ipt, "-w", "-F", CHAIN)
            _run(ipt, "-w", "-X", CHAIN)


@dataclass(frozen=True)
class Rule:
    """One line of `iptables -v -S` that can drop a packet: a DROP/REJECT rule or a DROP policy."""

    backend: str
    text: str  # the rule as iptables prints it, without its counters
    packets: int


def parse_drops(backend: str, text: str) -> list[Rule]:
    """The dropping rules and policies of an `iptables -v -S` listing, with their packet counts.

    Lines look like `-P FORWARD DROP -c 12 720` and `-A DOCKER-USER -s 10.0.0.0/8 -c 3 180 -j DROP`."""
    rules = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 3 or words[0] not in ("-P", "-A"):
            continue
        packets = 0
        if "-c" in words:
            at = words.index("-c")
            packets = int(words[at + 1])
            words = words[:at] + words[at + 3:]
        drops = (words[0] == "-P" and words[2] == "DROP") or (
            "-j" in words and words[words.index("-j") + 1] in ("DROP", "REJECT"))
        if drops:
            rules.append(Rule(backend, " ".join(words), packets))
    return rules


def snapshot() -> list[Rule]:
    """Every dropping rule of the filter table, on every backend, with its counters now."""
    rules = []
    for ipt in backends():
        listing = _run(ipt, "-w", "-v", "-S")
        if listing.returncode == 0:
            rules += parse_drops(Path(ipt).name, listing.stdout)
    return rules


def blockers(before: list[Rule], after: list[Rule]) -> list[Rule]:
    """The dropping rules whose counters grew between two snapshots (the likely culprits)."""
    counted = {(r.backend, r.text): r.packets for r in before}
    return [r for r in after if r.packets > counted.get((r.backend, r.text), 0)]


def touches_subnet(rule: Rule, subnet: str = POD_SUBNET) -> bool:
    """Whether a rule names an address range overlapping `subnet` (a policy touches everything)."""
    words = rule.text.split()
    if words[0] == "-P":
        return True
    wanted = ipaddress.ip_network(subnet)
    for flag in ("-s", "-d"):
        if flag in words:
            try:
                if ipaddress.ip_network(words[words.index(flag) + 1], strict=False).overlaps(wanted):
                    return True
            except ValueError:
                continue
    return not any(flag in words for flag in ("-s", "-d"))  # no address match: it drops any address


def describe() -> str:
    """One paragraph on the host's forwarding state, for a failure message."""
    try:
        bridge_nf = BRIDGE_NF_SYSCTL.read_text().strip()
    except OSError:
        bridge_nf = "absent (br_netfilter not loaded)"
    parts = [f"net.bridge.bridge-nf-call-iptables={bridge_nf}"]
    for ipt in backends():
        forward = _run(ipt, "-w", "-S", "FORWARD").stdout.splitlines()
        policy = next((line.split()[2] for line in forward if line.startswith("-P FORWARD")), "?")
        jump = any(line == f"-A FORWARD -j {CHAIN}" for line in forward)
        docker_user = _run(ipt, "-w", "-S", "DOCKER-USER").returncode == 0
        parts.append(f"{Path(ipt).name}: FORWARD policy {policy}, {CHAIN} jump {'present' if jump else 'MISSING'}, "
                     f"DOCKER-USER chain {'present (dockerd ran)' if docker_user else 'absent'}")
    if len(parts) == 1:
        parts.append("no iptables on the host")
    return "; ".join(parts)
