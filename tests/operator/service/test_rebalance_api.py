"""The rebalance routes: proposal, execute (with throttles), verify, stop; admin only."""

from __future__ import annotations

import pytest
from service_helpers import Controller
from test_auth_api import broker_token

from tinystream.controller_client import ControllerRefused, PartitionState

THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


async def _skewed(ctl: Controller) -> None:
    for b in (1, 2, 3):
        await ctl.start_broker(b)
    await ctl.client.create_topic("t", partitions=3, replica_assignment=[[1, 2], [2, 1], [1, 2]])


async def _catch_up(ctl: Controller, p: PartitionState) -> None:
    """The leader reports the added replicas in sync, as a real one would once they fetched."""
    await ctl.client.alter_partition(broker_id=p.leader, broker_epoch=ctl.epochs[p.leader], topic=p.topic,
                                     partition=p.partition, leader_epoch=p.leader_epoch,
                                     partition_epoch=p.partition_epoch, isr=list(p.replicas))


def _moves(proposal: dict) -> dict[tuple[str, int], list[int]]:
    return {(m["topic"], m["partition"]): m["after"] for m in proposal["moves"]}


async def test_propose_execute_throttle_verify(controller: Controller) -> None:
    ctl = controller
    await _skewed(ctl)
    reply = await ctl.client.rebalance_proposal("full", sizes={("t", 0): 100, ("t", 1): 100, ("t", 2): 100})
    proposal = reply["proposal"]
    assert reply["sizes_measured"] == 3
    assert proposal["num_replica_movements"] == 2 and proposal["data_to_move_bytes"] == 200
    assert proposal["score_after"] < proposal["score_before"]
    moves = _moves(proposal)

    started = await ctl.client.rebalance_execute(moves, throttle=True)
    assert started["throttled_topics"] == ["t"]
    assert {(r["topic"], r["partition"]) for r in started["remaining"]} <= set(moves)
    config = (await ctl.client.describe_topic("t")).config
    moving = [k for k, target in moves.items() if 3 in target]
    assert all(f"{p}:3" in config["follower.replication.throttled.replicas"] for _, p in moving)
    assert (await ctl.client.rebalance_verify(moves))["done"] is False

    for _, index in moving:
        await _catch_up(ctl, (await ctl.client.describe_topic("t")).partitions[index])
    verified = await ctl.client.rebalance_verify(moves)
    assert verified["done"] is True and verified["unthrottled_topics"] == ["t"]
    topic = await ctl.client.describe_topic("t")
    assert not set(THROTTLES) & set(topic.config)
    assert sorted(b for p in topic.partitions for b in p.replicas) == [1, 1, 2, 2, 3, 3]
    assert (await ctl.client.rebalance_proposal("full"))["proposal"]["moves"] == []


async def test_stop_cancels_what_runs_and_keeps_a_hand_set_throttle(controller: Controller) -> None:
    ctl = controller
    await _skewed(ctl)
    await ctl.client.alter_topic_config("t", {"leader.replication.throttled.replicas": "7:9"})
    moves = _moves((await ctl.client.rebalance_proposal("remove-brokers", brokers=[1]))["proposal"])
    assert all(1 not in target for target in moves.values())
    await ctl.client.rebalance_execute(moves, throttle=True)
    stopped = await ctl.client.rebalance_stop(moves)
    assert {(c["topic"], c["partition"]) for c in stopped["cancelled"]} == set(moves)
    topic = await ctl.client.describe_topic("t")
    assert all(not p.adding_replicas and 1 in p.replicas for p in topic.partitions)
    assert topic.config["leader.replication.throttled.replicas"] == "7:9"
    assert "follower.replication.throttled.replicas" not in topic.config


RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


async def _broker_configs(ctl: Controller) -> dict:
    _, metadata = await ctl.request("GET", "/v1/metadata")
    return metadata.get("broker_configs", {"default": {}, "brokers": {}})


async def _rated(ctl: Controller) -> dict:
    """A user's own configs first: broker 2's leader rate and broker 3's retention, the cluster default; broker
    4 takes no part. Then t-0 moves from [1, 2] to [3, 2] with a rate: sources and destinations are 1, 2, 3."""
    await _skewed(ctl)
    await ctl.start_broker(4)
    await ctl.client.alter_broker_configs([
        {"resource": "", "ops": [{"key": "log.retention.ms", "value": "60000"}]},
        {"resource": "2", "ops": [{"key": RATES[0], "value": "999"}]},
        {"resource": "3", "ops": [{"key": "log.retention.ms", "value": "120000"}]}])
    moves = {("t", 0): [3, 2]}
    started = await ctl.client.rebalance_execute(moves, rate=1000)
    assert started["rate_brokers"] == [1, 2, 3] and started["throttled_topics"] == ["t"]
    assert (await _broker_configs(ctl))["brokers"] == {
        "1": {RATES[0]: "1000", RATES[1]: "1000"},
        "2": {RATES[0]: "999", RATES[1]: "1000"},  # the hand-set leader rate is kept
        "3": {"log.retention.ms": "120000", RATES[0]: "1000", RATES[1]: "1000"}}
    assert (await ctl.client.describe_topic("t")).partitions[0].adding_replicas == (3,)
    return moves


USERS_OWN = {"default": {"log.retention.ms": "60000"},
             "brokers": {"2": {RATES[0]: "999"}, "3": {"log.retention.ms": "120000"}}}


async def test_execute_rates_the_involved_brokers_and_verify_takes_only_its_rates_out(controller: Controller):
    ctl = controller
    moves = await _rated(ctl)
    assert (await ctl.client.rebalance_verify(moves, rate=1000))["rate_brokers"] == []  # still moving
    assert "1" in (await _broker_configs(ctl))["brokers"]
    await _catch_up(ctl, (await ctl.client.describe_topic("t")).partitions[0])
    verified = await ctl.client.rebalance_verify(moves, rate=1000)
    assert verified["done"] is True and verified["rate_brokers"] == [1, 2, 3]
    assert await _broker_configs(ctl) == USERS_OWN


async def test_stop_takes_the_rates_out(controller: Controller):
    ctl = controller
    moves = await _rated(ctl)
    stopped = await ctl.client.rebalance_stop(moves, rate=1000)
    assert stopped["cancelled"] == [{"topic": "t", "partition": 0}] and stopped["rate_brokers"] == [1, 2, 3]
    assert await _broker_configs(ctl) == USERS_OWN


@pytest.mark.parametrize("rate", [0, -5, "fast"])
async def test_a_bad_rate_gets_a_clear_400_and_changes_nothing(controller: Controller, rate: object):
    await _skewed(controller)
    body = {"assignments": [{"topic": "t", "partition": 0, "replicas": [3, 2]}], "throttle_rate": rate}
    status, reply = await controller.request("POST", "/v1/rebalance/execute", body)
    assert status == 400 and "throttle_rate" in reply["message"], reply
    assert (await _broker_configs(controller))["brokers"] == {}
    assert (await controller.client.describe_topic("t")).partitions[0].replicas == (1, 2)
    assert (await _broker_configs(controller))["brokers"] == {}


@pytest.mark.parametrize(("body", "message"), [
    ({"mode": "sideways"}, "not one of full, add-brokers, remove-brokers"),
    ({"mode": "remove-brokers", "brokers": [1, 2]}, "only 1 broker"),
    ({"mode": "add-brokers", "brokers": [7]}, "unknown broker"),
    ({"mode": "full", "extra": 1}, "extra"),
])
async def test_bad_proposals_get_a_clear_400(controller: Controller, body: dict, message: str) -> None:
    await _skewed(controller)
    status, reply = await controller.request("POST", "/v1/rebalance/proposal", body)
    assert status == 400 and message in reply["message"], reply


async def test_execute_refused_by_the_core_sets_no_throttle(controller: Controller) -> None:
    await _skewed(controller)
    with pytest.raises(ControllerRefused):
        await controller.client.rebalance_execute({("t", 0): [1, 9]}, throttle=True)
    assert not set(THROTTLES) & set((await controller.client.describe_topic("t")).config)


@pytest.mark.parametrize("path", ["/v1/rebalance/proposal", "/v1/rebalance/execute", "/v1/rebalance/verify",
                                  "/v1/rebalance/stop"])
async def test_only_the_admin_may_rebalance(controller: Controller, path: str) -> None:
    await _skewed(controller)
    body = {"mode": "full"} if path.endswith("proposal") else {"assignments": [
        {"topic": "t", "partition": 0, "replicas": [3, 2]}], "throttle_rate": 1000}
    status, reply = await controller.request("POST", path, body, token=broker_token(controller, 1))
    assert status == 403 and "admin only" in reply["message"], reply
    status, reply = await controller.request("POST", path, body, token=None)
    assert status == 401, reply
    assert (await controller.client.describe_topic("t")).partitions[0].replicas == (1, 2)
    assert (await _broker_configs(controller))["brokers"] == {}
