"""plan_cluster: create, patch, roll one broker at a time, scale up and down safely."""

from __future__ import annotations

import copy
import dataclasses

from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.reconcile import (
    Apply,
    BrokerPod,
    Delete,
    DeletePod,
    DrainBrokers,
    EndRollDrain,
    MoveLeadership,
    Observed,
    PartitionView,
    Phase,
    Rebalance,
    differs,
    plan_cluster,
)
from tinystream.operator.k8s.resources import owned_objects

CTX = OperatorContext(broker_image="tinystream:1")


def spec(brokers=3, **extra):
    return ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "ns", "uid": "u", "generation": 2},
                                      "spec": {"brokers": brokers, **extra}})


def world(s, *, replicas=None, pods=None, revision="r1", partitions=None, max_rf=0):
    """Observed objects as if everything desired for `s` had been applied and the pods run `revision`."""
    replicas = s.brokers if replicas is None else replicas
    objects = {}
    for obj in owned_objects(s, CTX, replicas=replicas):
        obj = copy.deepcopy(obj)
        obj["metadata"]["uid"] = "server-added"  # server-side fields are not differences
        if obj["kind"] == "StatefulSet":
            obj["status"] = {"updateRevision": "r1"}
        objects[(obj["kind"], obj["metadata"]["name"])] = obj
    if pods is None:
        pods = tuple(BrokerPod(f"demo-broker-{i}", i, True, revision) for i in range(replicas))
    return Observed(objects=objects, pods=pods, partitions=partitions, max_replication_factor=max_rf)


def parts(*specs):
    """PartitionView from (leader, replicas, isr) tuples."""
    return tuple(PartitionView("t", i, leader, tuple(reps), tuple(isr)) for i, (leader, reps, isr) in enumerate(specs))


def kinds(plan):
    return [type(a).__name__ for a in plan.actions]


def test_create_applies_every_owned_object():
    plan = plan_cluster(spec(), None, Observed(), ctx=CTX)
    assert all(isinstance(a, Apply) and a.create for a in plan.actions)
    assert [a.key[0] for a in plan.actions][-1] == "StatefulSet"  # pods last, after their config
    assert plan.phase is Phase.CREATING
    assert plan.condition.status is False and plan.condition.reason == "Creating"
    assert plan.requeue_after


def test_steady_state_does_nothing_and_is_ready():
    s = spec()
    plan = plan_cluster(s, None, world(s), ctx=CTX)
    assert plan.actions == ()
    assert plan.condition.status is True and plan.condition.reason == "ClusterReady"
    assert plan.status["readyBrokers"] == 3 and plan.status["replicas"] == 3
    assert plan.status["labelSelector"] == "app.kubernetes.io/component=broker,tinystream.io/cluster=demo"
    assert plan.status["observedGeneration"] == 2


def test_changed_object_is_patched_not_created():
    s = spec()
    observed = world(s)
    svc = observed.objects[("Service", "demo-kafka")]
    svc["spec"]["ports"][0]["port"] = 1234
    plan = plan_cluster(s, None, observed, ctx=CTX)
    apply, = plan.actions
    assert isinstance(apply, Apply) and not apply.create and apply.key == ("Service", "demo-kafka")


def test_waiting_for_brokers_names_them():
    s = spec()
    pods = (BrokerPod("demo-broker-0", 0, True, "r1"), BrokerPod("demo-broker-1", 1, False, "r1"))
    plan = plan_cluster(s, None, world(s, pods=pods), ctx=CTX)
    assert plan.condition.status is False
    assert plan.condition.reason == "WaitingForBrokers"
    assert "1/3 brokers ready" in plan.condition.message and "demo-broker-1" in plan.condition.message


def test_invalid_broker_config_changes_nothing():
    s = spec(config={"log.segment.bytes": 1})
    plan = plan_cluster(s, None, world(spec()), ctx=CTX)
    assert plan.actions == ()
    assert plan.condition.reason == "InvalidBrokerConfig" and "log.segment.bytes" in plan.condition.message
    assert plan.phase is Phase.FAILED


def test_image_change_patches_the_statefulset_first():
    old = spec()
    new = spec(image="tinystream:2")
    plan = plan_cluster(new, None, world(old), ctx=CTX)
    assert kinds(plan) == ["Apply"] and plan.actions[0].key[0] == "StatefulSet"
    assert plan.phase is Phase.ROLLING


def outdated_world(partitions=None, ready=(True, True, True)):
    s = spec()
    pods = tuple(BrokerPod(f"demo-broker-{i}", i, ready[i], "r0") for i in range(3))
    return s, world(s, pods=pods, partitions=partitions)


def test_roll_restarts_highest_ordinal_first_when_all_is_healthy():
    s, observed = outdated_world(parts((0, [0, 1, 2], [0, 1, 2])))
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert plan.actions == (DeletePod("demo-broker-2", 2),)
    assert plan.condition.reason == "RollingUpdate" and "2 more to go" in plan.condition.message


def test_roll_moves_leadership_away_before_restarting_a_leader():
    s, observed = outdated_world(parts((2, [2, 0, 1], [2, 0, 1])))
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert plan.actions == (MoveLeadership(2),)
    assert plan.condition.reason == "MovingLeadership"


def test_roll_restarts_a_drained_victim_that_left_its_isrs():
    # After MoveLeadership broker 2 left every ISR (KIP-841) and its readiness probe fails: restart it.

    s, observed = outdated_world(parts((0, [2, 0, 1], [0, 1]), (1, [1, 2, 0], [1, 0])), ready=(True, True, False))
    observed = dataclasses.replace(observed, drained_for_roll=frozenset({2}))
    assert plan_cluster(s, None, observed, ctx=CTX).actions == (DeletePod("demo-broker-2", 2),)
    # ...but not while another broker is missing from an ISR or not ready.
    short = dataclasses.replace(observed, partitions=parts((0, [2, 0, 1], [0])))
    assert plan_cluster(s, None, short, ctx=CTX).condition.reason == "RollWaitingForISR"
    down = dataclasses.replace(observed, pods=(observed.pods[0], dataclasses.replace(observed.pods[1], ready=False),
                                               observed.pods[2]))
    assert plan_cluster(s, None, down, ctx=CTX).condition.reason == "RollWaitingForPod"


def test_roll_waits_while_the_drained_victim_terminates():

    s, observed = outdated_world(parts((0, [2, 0, 1], [0, 1])), ready=(True, True, False))
    pods = observed.pods[:2] + (dataclasses.replace(observed.pods[2], terminating=True),)
    observed = dataclasses.replace(observed, drained_for_roll=frozenset({2}), pods=pods)
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert plan.actions == () and plan.condition.reason == "RollWaitingForPod"  # no second DeletePod


def test_a_roll_undone_before_its_victim_restarted_ends_the_drain():

    s = spec()
    observed = dataclasses.replace(world(s, partitions=parts((0, [2, 0, 1], [0, 1]))),
                                   drained_for_roll=frozenset({2}))
    assert EndRollDrain(2) in plan_cluster(s, None, observed, ctx=CTX).actions


def test_roll_waits_for_full_isrs():
    s, observed = outdated_world(parts((0, [0, 1, 2], [0, 1])))
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert not any(isinstance(a, DeletePod) for a in plan.actions)
    assert plan.condition.reason == "RollWaitingForISR" and "t-0" in plan.condition.message


def test_roll_waits_for_a_not_ready_pod():
    s, observed = outdated_world(parts((0, [0, 1, 2], [0, 1, 2])), ready=(True, False, True))
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert plan.actions == ()
    assert plan.condition.reason == "RollWaitingForPod" and "demo-broker-1" in plan.condition.message


def test_roll_without_controller_view_says_isrs_were_not_checked():
    s, observed = outdated_world(None)
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert plan.actions == (DeletePod("demo-broker-2", 2),)
    assert "ISRs not checked" in plan.condition.message


def test_scale_up_grows_the_statefulset():
    plan = plan_cluster(spec(4), None, world(spec(3)), ctx=CTX)
    sts = [a for a in plan.actions if isinstance(a, Apply) and a.key[0] == "StatefulSet"]
    assert sts and sts[0].obj["spec"]["replicas"] == 4
    assert plan.phase is Phase.SCALING


def test_new_empty_broker_gets_a_fair_share():
    s = spec(4)
    partitions = parts((0, [0, 1, 2], [0, 1, 2]), (1, [1, 2, 0], [1, 2, 0]))
    plan = plan_cluster(s, None, world(s, partitions=partitions), ctx=CTX)
    assert plan.actions == (Rebalance((3,)),)
    assert plan.condition.status is True and plan.condition.reason == "Rebalancing"


def test_scale_down_is_blocked_by_replication_factor():
    plan = plan_cluster(spec(2), None, world(spec(3), max_rf=3, partitions=()), ctx=CTX)
    assert not any(isinstance(a, Apply) and a.key[0] == "StatefulSet" for a in plan.actions)
    assert plan.condition.reason == "ScaleDownBlocked" and "replicationFactor 3" in plan.condition.message
    assert plan.phase is Phase.DEGRADED


def test_scale_down_drains_before_shrinking():
    partitions = parts((0, [0, 2], [0, 2]))
    plan = plan_cluster(spec(2), None, world(spec(3), partitions=partitions, max_rf=2), ctx=CTX)
    assert plan.actions == (DrainBrokers((2,)),)
    assert plan.condition.reason == "ScaleDownDraining"


def test_scale_down_shrinks_once_drained():
    partitions = parts((0, [0, 1], [0, 1]))
    plan = plan_cluster(spec(2), None, world(spec(3), partitions=partitions, max_rf=2), ctx=CTX)
    sts, = [a for a in plan.actions if isinstance(a, Apply) and a.key[0] == "StatefulSet"]
    assert sts.obj["spec"]["replicas"] == 2


def test_scale_down_without_controller_view_is_refused():
    plan = plan_cluster(spec(2), None, world(spec(3)), ctx=CTX)
    assert plan.condition.reason == "ScaleDownBlocked" and "unavailable" in plan.condition.message


def test_disabling_the_dashboard_deletes_its_service():
    plan = plan_cluster(spec(dashboard={"enabled": False}), None, world(spec()), ctx=CTX)
    assert Delete("v1", "Service", "demo-dashboard") in plan.actions


def test_an_operator_without_a_dashboard_makes_no_dashboard_service():
    # dashboard.port 0 turns the operator's dashboard off; a Service on port 0 is refused by a real API server.
    no_dashboard = dataclasses.replace(CTX, dashboard_port=0)
    plan = plan_cluster(spec(), None, world(spec()), ctx=no_dashboard)
    assert Delete("v1", "Service", "demo-dashboard") in plan.actions
    fresh = plan_cluster(spec(), None, Observed(), ctx=no_dashboard)
    assert not any(isinstance(a, Apply) and a.key == ("Service", "demo-dashboard") for a in fresh.actions)


def test_claim_templates_are_kept_on_patch():
    observed = world(spec(storage={"size": "10Gi"}))
    plan = plan_cluster(spec(storage={"size": "50Gi"}), None, observed, ctx=CTX)
    assert not any(isinstance(a, Apply) and a.key[0] == "StatefulSet" for a in plan.actions)


def test_broker_status_counts_leaders():
    s = spec()
    plan = plan_cluster(s, None, world(s, partitions=parts((1, [1, 0, 2], [1, 0, 2]))), ctx=CTX)
    assert [b["partitionsLed"] for b in plan.status["brokers"]] == [0, 1, 0]


def test_cluster_status_counts_partitions_for_the_printer_columns():
    s = spec()
    plan = plan_cluster(s, None, world(s, partitions=parts((1, [1, 0, 2], [1, 0, 2]), (0, [0, 1], [0]),
                                                           (-1, [2], []))), ctx=CTX)
    assert (plan.status["partitions"], plan.status["underReplicatedPartitions"],
            plan.status["offlinePartitions"]) == (3, 2, 1)
    assert "partitions" not in plan_cluster(s, None, world(s), ctx=CTX).status  # no controller view: no count


def test_differs_ignores_server_fields_but_not_changes():
    assert not differs({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "status": {}})
    assert differs({"a": [1, 2]}, {"a": [1]})
    assert differs({"a": {"b": 1}}, {"a": {"b": 2}})


# --- spec.template.pod (issue 23) ---------------------------------------------------------

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}


def test_a_pod_template_change_patches_the_statefulset_then_rolls_one_broker_at_a_time():
    old = spec()
    new = spec(template={"pod": {"tolerations": [TOLERATION], "priorityClassName": "high"}})
    plan = plan_cluster(new, None, world(old), ctx=CTX)
    apply, = plan.actions
    assert apply.key == ("StatefulSet", "demo-broker") and not apply.create
    assert apply.obj["spec"]["template"]["spec"]["tolerations"] == [TOLERATION]
    assert plan.phase is Phase.ROLLING and plan.condition.reason == "RollingUpdate"
    # The next pass: the StatefulSet is current, the pods run the old revision; one restarts.
    pods = tuple(BrokerPod(f"demo-broker-{i}", i, True, "r0") for i in range(3))
    plan = plan_cluster(new, None, world(new, pods=pods, partitions=parts((0, [0, 1, 2], [0, 1, 2]))), ctx=CTX)
    assert plan.actions == (DeletePod("demo-broker-2", 2),)


def test_removing_the_pod_template_applies_the_statefulset_again():
    """A removed toleration is missing from the desired object, which `differs` alone does not see."""
    old = spec(template={"pod": {"tolerations": [TOLERATION]}})
    plan = plan_cluster(spec(), None, world(old), ctx=CTX)
    apply, = plan.actions
    assert apply.key == ("StatefulSet", "demo-broker") and "tolerations" not in apply.obj["spec"]["template"]["spec"]
    assert plan.phase is Phase.ROLLING


def test_an_operator_without_templates_applied_before_adds_the_digest_only():
    """An operator upgrade: the StatefulSet gets the digest annotation; its pod template is the same (no roll)."""
    s = spec()
    observed = world(s)
    sts = observed.objects[("StatefulSet", "demo-broker")]
    before = copy.deepcopy(sts["spec"]["template"])
    del sts["metadata"]["annotations"]
    apply, = plan_cluster(s, None, observed, ctx=CTX).actions
    assert apply.obj["spec"]["template"] == before


def test_a_reserved_pod_label_changes_nothing_and_says_why():
    s = spec(template={"pod": {"metadata": {"labels": {"app.kubernetes.io/managed-by": "me"}}}})
    plan = plan_cluster(s, None, world(spec()), ctx=CTX)
    assert plan.actions == ()
    assert plan.phase is Phase.FAILED and plan.condition.reason == "InvalidPodTemplate"
    assert "app.kubernetes.io/managed-by" in plan.condition.message
