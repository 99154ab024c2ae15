"""Which Pod events mean a broker's process is certainly not running (pure)."""

from __future__ import annotations

from tinystream.operator.k8s.pod_health import broker_down
from tinystream.operator.k8s.reconcile import BrokerDown


def pod(state: dict | None, *, restarts: int = 0, last: dict | None = None, name: str = "demo-broker-2") -> dict:
    statuses = [] if state is None else [{"name": "broker", "state": state, "restartCount": restarts,
                                          **({"lastState": last} if last else {})}]
    return {"metadata": {"name": name}, "status": {"containerStatuses": statuses}}


def test_running_or_not_yet_started_is_not_down():
    assert broker_down(pod({"running": {"startedAt": "2026-11-21T12:00:00Z"}}, restarts=4)) is None
    assert broker_down(pod({"waiting": {"reason": "ContainerCreating"}})) is None  # registered nothing yet
    assert broker_down(pod(None)) is None


def test_terminated_or_crash_looping_is_down():
    down = broker_down(pod({"terminated": {"reason": "OOMKilled", "exitCode": 137}}))
    assert down == BrokerDown(2, "the broker container of demo-broker-2 terminated (OOMKilled)")
    looping = broker_down(pod({"waiting": {"reason": "CrashLoopBackOff"}}, restarts=3))
    assert looping is not None and looping.broker_id == 2 and "CrashLoopBackOff" in looping.reason
    assert broker_down(pod({"waiting": {}}, last={"terminated": {"exitCode": 1}})) is not None


def test_a_deleted_pod_is_down_and_odd_names_are_ignored():
    assert broker_down(pod({"running": {}}), deleted=True) == BrokerDown(2, "pod demo-broker-2 was deleted")
    assert broker_down(pod({"terminated": {}}, name="not-a-broker")) is None


def test_process_gone_reads_the_pod_as_it_is_now():
    from tinystream.operator.k8s.pod_health import process_gone

    assert process_gone(None)  # deleted and not recreated
    assert process_gone(pod({"waiting": {"reason": "ContainerCreating"}}))  # a new pod, nothing registered yet
    assert process_gone(pod({"terminated": {"exitCode": 1}}))
    assert not process_gone(pod({"running": {}}, restarts=1))  # restarted: may have registered already
