"""ACLs and SCRAM credentials replicated with the cluster metadata (issue 12).

A controller and three brokers on SASL_PLAINTEXT with the authorizer on:
an ACL created through one broker (CreateAcls, forwarded to the controller)
is enforced by every broker; a SCRAM user added through one broker
(AlterUserScramCredentials) logs in at every broker; both survive a
controller restart (they are in its state file).
"""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from tinystream.acls import AclOperation, ResourceType
from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient, SaslLogin, SaslRefused
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import broker_principal, read_secret, token_for, write_token_file
from tinystream.operator.service.app import ControllerServer
from tinystream.scram_users import UserStore
from tinystream.testing.broker import (
    acl_creation,
    create_acls_request,
    create_topics_request,
    entity,
    now_batch,
    produce_request,
    request,
    test_settings,
)
from tinystream.testing.waiting import wait_until_async

USERS = {"admin": "admin-pw", "alice": "alice-pw", "broker": "broker-pw"}


def controller_settings(tmp_path, port: int = 0) -> ControllerSettings:
    return ControllerSettings(**{"port": port, "state.file": str(tmp_path / "controller" / "state.json"),
                                 "broker.session.timeout.ms": 3000, "dashboard.enabled": False,
                                 "default.replication.factor": 3})


@pytest.fixture
async def secured_cluster(tmp_path):
    controller = ControllerServer(controller_settings(tmp_path))
    info = await controller.start()
    secret = read_secret(info.secret_file)
    store = UserStore()
    for name, password in USERS.items():
        store.set_password(name, password)
    store.save(tmp_path / "users.json")
    (tmp_path / "broker.password").write_text(USERS["broker"])
    brokers: dict[int, Broker] = {}
    for broker_id in (1, 2, 3):
        token = tmp_path / f"token-{broker_id}"
        write_token_file(token, token_for(secret, broker_principal(broker_id)))
        broker = Broker(test_settings(tmp_path / f"broker-{broker_id}", **{
            "broker.id": broker_id, "controller.url": info.url, "controller.token.file": str(token),
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.users.file": str(tmp_path / "users.json"),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", "inter.broker.sasl.username": "broker",
            "inter.broker.sasl.password.file": str(tmp_path / "broker.password"),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin", "broker.heartbeat.interval.ms": 200,
            "offsets.topic.replication.factor": 3}))
        await broker.start()
        brokers[broker_id] = broker
    clients: list[KafkaClient] = []

    async def login(broker_id: int, user: str, password: str | None = None) -> KafkaClient:
        b = brokers[broker_id]
        c = await KafkaClient.connect(b.info.host, b.info.port,
                                      sasl=SaslLogin("SCRAM-SHA-512", user, password or USERS[user]))
        clients.append(c)
        return c

    state = {"controller": controller, "url": info.url}
    try:
        yield brokers, login, state, tmp_path
    finally:
        for c in clients:
            await c.close()
        for b in brokers.values():
            await b.stop()
        await state["controller"].stop()


async def test_acls_and_credentials_reach_every_broker_and_survive_a_controller_restart(secured_cluster):
    brokers, login, state, tmp_path = secured_cluster
    admin = await login(1, "admin")
    created = await admin.request(create_topics_request([("shared", 3, 3)]))
    assert created.topics[0].error_code == ErrorCode.none

    async def alice_writes(broker_id: int) -> ErrorCode:
        alice = await login(broker_id, "alice")
        leader = brokers[broker_id].topics.partition_state
        index = next(i for i in range(3) if leader(TopicPartition("shared", i)).leader == broker_id)
        reply = await alice.request(produce_request("shared", index, now_batch([(b"k", b"v")])))
        await alice.close()
        return reply.responses[0].partition_responses[0].error_code

    for broker_id in (1, 2, 3):
        assert await alice_writes(broker_id) == ErrorCode.topic_authorization_failed

    reply = await admin.request(create_acls_request(acl_creation("TOPIC", "sha", "User:alice", "WRITE",
                                                                 pattern="PREFIXED")))
    assert reply.results[0].error_code == ErrorCode.none
    # Answered once broker 1 applied it; the others follow the same image.
    for broker_id in (1, 2, 3):
        async def allowed(b=brokers[broker_id]) -> bool:
            return b.ctx.authorizer.authorize("User:alice", "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC,
                                              "shared")
        await wait_until_async(allowed, what=f"broker {broker_id} to apply the ACL")
        assert await alice_writes(broker_id) == ErrorCode.none

    salt = os.urandom(16)
    done = await admin.request(request(51, 0, deletions=(), upsertions=(entity(
        51, 0, "ScramCredentialUpsertion", name="carol", mechanism=2, iterations=4096, salt=salt,
        salted_password=hashlib.pbkdf2_hmac("sha512", b"carol-pw", salt, 4096)),)))
    assert done.results[0].error_code == ErrorCode.none, done
    for broker_id in (1, 2, 3):
        async def has_carol(b=brokers[broker_id]) -> bool:
            return b.ctx.users.credential("carol", "SCRAM-SHA-512") is not None
        await wait_until_async(has_carol, what=f"broker {broker_id} to know carol")
        await login(broker_id, "carol", "carol-pw")

    # A controller restart: the ACL and the credential are in its state file.
    port = int(state["url"].rsplit(":", 1)[1])
    await state["controller"].stop()
    state["controller"] = ControllerServer(controller_settings(tmp_path, port=port))
    await state["controller"].start()
    image = state["controller"].service.image
    assert [a.resource_name for a in image.acls] == ["sha"]
    assert [c.user for c in image.scram_credentials] == ["carol"]
    await asyncio.sleep(1.0)  # brokers re-sync with the restarted controller
    for broker_id in (1, 2, 3):
        assert await alice_writes(broker_id) == ErrorCode.none
        await login(broker_id, "carol", "carol-pw")
    with pytest.raises(SaslRefused):
        await login(2, "carol", "wrong")
