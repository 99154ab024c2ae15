"""One pass over a TinyStreamRebalance: decide the step (rebalances.next_step, pure), run it through the
controller port, write status, remove the annotation acted on.

On a cluster with node pools the proposal places replicas on the pools' brokers only
(node_pools.pool_members: each pool's status.nodeIds up to its replicas).

Failures: the controller unavailable leaves state and annotation as they
are (the next pass retries); a refusal of a proposal or of the execution
is NotReady with the controller's message; a refused verify or stop keeps
Rebalancing and says why. Partition sizes are not measured here (the
operator does not talk to brokers over Kafka), so proposals balance replica
and leader counts; the local CLI measures sizes (DescribeLogDirs).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.controller_port import ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, POOL_KIND, ClusterSpec
from tinystream.operator.k8s.node_pools import CLUSTER_LABEL, pool_members
from tinystream.operator.k8s.rebalances import (
    ANNOTATION,
    RebalanceSpec,
    State,
    Step,
    members_problem,
    moves_of,
    next_step,
    problem,
    proposal_status,
    state_status,
    throttle_of,
)


class RebalanceReconciler:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def reconcile(self, body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> None:
        spec = RebalanceSpec.from_resource(body)
        step = next_step(spec, status)
        if step is Step.NONE:
            return
        try:
            update = await self._run(spec, step, status)
        except ControllerUnavailable as exc:
            patch.status["message"] = f"waiting for the controller: {exc}"
            return
        except ControllerRefused as exc:
            if step in (Step.PROPOSE, Step.EXECUTE):
                update = {**state_status(State.NOT_READY, exc.message, generation=spec.generation),
                          **({"proposal": None, "optimizationResult": None} if step is Step.PROPOSE else {})}
            else:
                update = {"message": f"{step.value} refused: {exc.message}"}
        logger.info("rebalance %s/%s: %s -> %s", spec.namespace, spec.name, step.value, update.get("state"))
        for key, value in update.items():
            patch.status[key] = value
        if spec.annotation is not None:
            patch.metadata.setdefault("annotations", {})[ANNOTATION] = None

    async def _members(self, spec: RebalanceSpec) -> frozenset[int] | None:
        """The ids the cluster's node pools keep, None for a cluster without pools (or not found: the
        controller says so)."""
        client = self.deps.kube()
        found = await client.get(API_VERSION, CLUSTER_KIND, spec.cluster, spec.namespace)
        if found is None or not ClusterSpec.from_resource(found).node_pools:
            return None
        pools = await client.list(API_VERSION, POOL_KIND, spec.namespace, labels={CLUSTER_LABEL: spec.cluster})
        return pool_members(spec.cluster, pools)

    async def _run(self, spec: RebalanceSpec, step: Step, status: Any) -> dict[str, Any]:
        port = self.deps.controller
        cluster = ClusterKey(spec.namespace, spec.cluster)
        moves = moves_of(status)
        if step is Step.PROPOSE:
            bad = problem(spec)
            members = await self._members(spec) if bad is None else None
            bad = bad or members_problem(spec, members)
            if bad:
                return {**state_status(State.NOT_READY, bad, generation=spec.generation),
                        "proposal": None, "optimizationResult": None}
            proposal = await port.rebalance_proposal(cluster, spec.mode, spec.brokers, members=members)
            return proposal_status(proposal, generation=spec.generation)
        if step is Step.EXECUTE:
            await port.rebalance_moves(cluster, "execute", moves, throttle=spec.throttle)
            throttled = f" at {spec.throttle} bytes/s" if spec.throttle is not None else ""
            return {**state_status(State.REBALANCING, f"moving {len(moves)} partition(s){throttled}",
                                   generation=spec.generation), "throttle": spec.throttle}
        if step is Step.VERIFY:
            progress = await port.rebalance_moves(cluster, "verify", moves, throttle=throttle_of(status))
            if not progress.remaining:
                return state_status(State.READY, f"{len(moves)} partition(s) moved", generation=spec.generation)
            return state_status(State.REBALANCING, f"{len(progress.remaining)} of {len(moves)} partition(s) left",
                                generation=spec.generation)
        progress = await port.rebalance_moves(cluster, "stop", moves, throttle=throttle_of(status))
        return state_status(State.STOPPED, f"stopped: {len(progress.cancelled)} running move(s) cancelled",
                            generation=spec.generation)
