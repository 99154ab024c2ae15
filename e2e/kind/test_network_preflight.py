"""The kind suite's network preflight and host firewall: the pure parts here (make test), the real
blocked path on the kind cluster at the end (make test-kind)."""

from __future__ import annotations

import time

import host_firewall
import pytest
from host_firewall import POD_SUBNET, Rule, blockers, parse_drops, touches_subnet
from kind_helpers import IMAGE_REPO, IMAGE_TAGS, Kube, measure
from preflight import Outcome, ProbePod, plan_probes, report, run_preflight

WORKER = ProbePod("worker", "probe-worker", "10.244.1.5")
WORKER2 = ProbePod("worker2", "probe-worker2", "10.244.2.7")
PLANE = ProbePod("control-plane", "probe-control-plane", "10.244.0.9")
COREDNS = ProbePod("control-plane", "coredns-1", "10.244.0.3")

LISTING = """\
-P INPUT ACCEPT -c 10 600
-P FORWARD DROP -c 42 2520
-N DOCKER-USER
-A FORWARD -c 100 9000 -j DOCKER-USER
-A FORWARD -s 10.244.0.0/16 -c 3 180 -j DROP
-A DOCKER-ISOLATION-STAGE-2 -o docker0 -c 0 0 -j DROP
-A TINYSTREAM-KIND -s 10.96.0.0/16 -c 7 420 -j ACCEPT
-A OTHER -d 192.168.0.0/24 -c 1 60 -j REJECT --reject-with icmp-port-unreachable
"""


def test_every_path_from_every_node_is_planned():
    probes = plan_probes([PLANE, WORKER, WORKER2], [COREDNS], "10.96.0.1")
    from_worker = [p for p in probes if p.source == WORKER]
    paths = [p.path for p in from_worker]
    assert [p.host for p in from_worker if p.path.startswith("pod -> pod across nodes")] == [PLANE.ip, WORKER2.ip]
    assert any(p.startswith("pod -> CoreDNS pod (worker -> control-plane, 10.244.0.3:53") for p in paths)
    assert any(p.kind == "dns" for p in from_worker)
    assert [(p.host, p.port) for p in from_worker if "API server" in p.path] == [("10.96.0.1", 443)]
    # the control plane's own CoreDNS pod is on its node, and it is not asked to reach itself across nodes
    from_plane = [p.path for p in probes if p.source == PLANE]
    assert any("CoreDNS pod (same node" in p for p in from_plane)
    assert len(probes) == 3 * (2 + 1 + 1 + 1)


def test_parse_drops_keeps_dropping_rules_with_their_counters():
    rules = parse_drops("iptables-nft", LISTING)
    assert rules == [
        Rule("iptables-nft", "-P FORWARD DROP", 42),
        Rule("iptables-nft", "-A FORWARD -s 10.244.0.0/16 -j DROP", 3),
        Rule("iptables-nft", "-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP", 0),
        Rule("iptables-nft", "-A OTHER -d 192.168.0.0/24 -j REJECT --reject-with icmp-port-unreachable", 1),
    ]


def test_blockers_are_the_drops_that_counted_during_the_probe():
    before = parse_drops("iptables-nft", LISTING)
    after = parse_drops("iptables-nft", LISTING.replace("-c 3 180 -j DROP", "-c 9 540 -j DROP"))
    assert blockers(before, after) == [Rule("iptables-nft", "-A FORWARD -s 10.244.0.0/16 -j DROP", 9)]
    assert blockers(before, before) == []


def test_a_rule_touches_the_pod_range_by_address_or_by_matching_every_address():
    policy, pods, docker0, other = parse_drops("iptables-nft", LISTING)
    assert touches_subnet(policy) and touches_subnet(pods) and touches_subnet(docker0)
    assert not touches_subnet(other, POD_SUBNET)


def test_report_names_each_blocked_path_the_host_state_and_the_rule():
    probes = plan_probes([WORKER, WORKER2], [COREDNS], "10.96.0.1")
    outcomes = [Outcome(p, p.kind == "dns", "" if p.kind == "dns" else "TimeoutError: timed out") for p in probes]
    blocking = [Rule("iptables-nft", "-P FORWARD DROP", 50), Rule("iptables-nft", "-A OTHER -d 192.168.0.0/24 -j DROP", 2)]
    message = report(outcomes, blocking, "net.bridge.bridge-nf-call-iptables=1; iptables-nft: FORWARD policy DROP")
    assert message is not None
    assert "BLOCKED pod -> pod across nodes (worker -> worker2, 10.244.2.7:8080): TimeoutError" in message
    assert "BLOCKED pod -> API server (worker2 -> Service kubernetes 10.96.0.1:443)" in message
    assert "FORWARD policy DROP" in message and "iptables-nft: -P FORWARD DROP" in message
    assert "192.168.0.0/24" not in message  # a drop elsewhere is not blamed
    assert report([Outcome(p, True, "") for p in probes], blocking, "") is None


@pytest.mark.kind
@pytest.mark.timeout(600)
def test_preflight_stops_on_a_blocked_pod_range_and_names_it(kind_cluster: Kube):
    """A DROP for the pod range above the suite's own ACCEPT: the preflight names the paths and the rule
    in seconds; with the rule gone every path is open again."""
    backend = host_firewall.backends()[-1]
    rule = ("FORWARD", "-s", POD_SUBNET, "-j", "DROP")
    host_firewall.run_checked(backend, "-w", "-I", rule[0], "1", *rule[1:])
    try:
        started = time.monotonic()
        failure, seconds = run_preflight(kind_cluster, f"{IMAGE_REPO}:{IMAGE_TAGS[0]}")
        measure("network preflight with the pod range dropped", f"{time.monotonic() - started:.0f} s to fail")
    finally:
        host_firewall.run_checked(backend, "-w", "-D", *rule)
    assert failure is not None
    assert "BLOCKED pod -> pod across nodes" in failure and "BLOCKED pod -> API server" in failure, failure
    assert f"-A FORWARD -s {POD_SUBNET} -j DROP" in failure, failure
    assert seconds < 120, seconds
    failure, _ = run_preflight(kind_cluster, f"{IMAGE_REPO}:{IMAGE_TAGS[0]}")
    assert failure is None, failure
