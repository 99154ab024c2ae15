"""The operator IS the controller: KMock for the API, a real broker registering with the operator.

The operator runs in-process (kopf, clusterwide) with `OperatorController`
behind its controller port; a real `tinystream.broker.app.Broker` (in memory,
in the test's loop) points its controller.url at the operator's
/clusters/<namespace>/<name> API, as a broker pod would. Topic status and
cluster status must then come from the controller core's image, and the
core's state must survive an operator restart through the cluster's status.
"""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'kopf', 'kmock')

import asyncio
import base64
import contextlib
import socket
import ssl

import aiohttp
import kmock
import pytest
import pytest_asyncio
from kmock_helpers import MASTER_SECRET, Api, declare, ready_condition, running_operator

from tinystream.broker.app import Broker
from tinystream.controller_auth import broker_principal, token_for
from tinystream.controller_client import ControllerClient, ControllerRefused, ControllerUnavailable, controller_ssl_context
from tinystream.operator.k8s.controller_host import OperatorController
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.controller_port import ControllerRefused as ControllerRefusedPort
from tinystream.operator.k8s.controller_secret import derive_cluster_secret, derived_secrets
from tinystream.operator.k8s.controller_tls import ControllerTLS
from tinystream.operator.k8s.reconcile import DrainBrokers, EndScaleDownDrain, MoveLeadership
from tinystream.operator.k8s.resources import ADMIN_TOKEN_FILE, CONTROLLER_CA_FILE
from tinystream.operator.k8s.status_store import decode_state
from tinystream.operator.service.controller_service import DriverTiming
from tinystream.testing.broker import test_settings
from tinystream.testing.waiting import wait_until_async

pytestmark = pytest.mark.timeout(60)

TS = "tinystream.io/v1alpha1"
NS = "streaming"
KEY = ClusterKey(NS, "demo")
# spec.brokers 3 (so a Topic with RF 2 passes the operator's own check), one real broker running.
CLUSTER = {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo", "generation": 1},
           "spec": {"brokers": 3}}
TIMING = DriverTiming(tick_interval_s=0.2)


def topic(name: str, **spec):
    return {"apiVersion": TS, "kind": "Topic", "metadata": {"name": name},
            "spec": {"cluster": "demo", "partitions": 2, "replicationFactor": 1, **spec}}


def new_controller() -> OperatorController:
    return OperatorController(host="127.0.0.1", port=0, timing=TIMING, secret_source=derived_secrets(MASTER_SECRET))


async def broker_token_file(api, tmp_path) -> str:
    """broker-0's controller API token, as its pod would hold it: a token for that broker alone (in
    production the pod's projected service-account token, which KMock cannot review: this controller
    has no reviewer, so it takes a token the cluster secret made), and controller-ca.crt beside it from
    the Secret the operator made, which holds nothing else."""
    tokens = await api.get("v1", "secrets", "demo-broker-tokens")
    assert tokens is not None, "the operator made no controller CA Secret"
    assert set(tokens["data"]) == {CONTROLLER_CA_FILE, ADMIN_TOKEN_FILE}  # no broker's token in what every pod mounts
    cluster = await api.get(TS, "tinystreamclusters", "demo")
    secret = derive_cluster_secret(MASTER_SECRET, ClusterKey(api.ns, "demo"), cluster["metadata"]["uid"])
    path = tmp_path / "tokens" / "broker-0"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(token_for(secret, broker_principal(0)))
    (path.parent / CONTROLLER_CA_FILE).write_bytes(base64.b64decode(tokens["data"][CONTROLLER_CA_FILE]))
    return str(path.parent / "broker-{broker_id}")


@contextlib.asynccontextmanager
async def real_broker(tmp_path, url: str, token_file: str, **extra):
    settings = test_settings(tmp_path / "broker-0", **{
        "broker.id": 0, "host": "127.0.0.1", "controller.url": url,
        "controller.token.file": token_file, "broker.heartbeat.interval.ms": 200, **extra,
    })
    broker = Broker(settings, in_memory=True, with_groups=False)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


@contextlib.asynccontextmanager
async def operator_with_a_broker(server, api, tmp_path):
    """The operator running CLUSTER's controller, broker 0 registered with it and unfenced."""
    controller = new_controller()
    async with running_operator(str(server.url), controller=controller):
        await api.create(TS, "tinystreamclusters", CLUSTER)
        await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: controller.service(KEY) is not None)
        async with real_broker(tmp_path, controller.cluster_url(KEY), await broker_token_file(api, tmp_path)):
            await wait_until_async(lambda: 0 in controller.service(KEY).image.brokers
                                   and not controller.service(KEY).image.brokers[0].fenced,
                                   timeout=15, what="broker 0 registered")
            yield controller


@pytest_asyncio.fixture
async def server():
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        declare(emulator)
        yield emulator


@pytest_asyncio.fixture
async def api(server):
    client = Api(str(server.url), NS)
    yield client
    await client.close()


def placed(obj) -> bool:
    return ready_condition(obj).get("status") == "True" and bool((obj.get("status") or {}).get("partitions"))


async def test_topic_status_and_refusals_come_from_the_core(server, api, tmp_path):
    controller = new_controller()
    async with running_operator(str(server.url), controller=controller):
        await api.create(TS, "tinystreamclusters", CLUSTER)
        # The state is saved to status while the service opens; the service is registered just after.
        cluster = await api.wait_for(TS, "tinystreamclusters", "demo",
                                     lambda o: ((o or {}).get("status") or {}).get("clusterId")
                                     and controller.service(KEY) is not None)
        assert cluster["status"]["clusterId"] == controller.service(KEY).image.cluster_id
        async with aiohttp.ClientSession() as http:  # the broker-facing API, per cluster, on one port
            admin = {"Authorization": f"Bearer {controller.admin_token(KEY)}"}
            async with http.get(controller.cluster_url(KEY) + "/v1/metadata", headers=admin) as r:
                assert r.status == 200 and (await r.json())["cluster_id"] == cluster["status"]["clusterId"]
            async with http.get(controller.cluster_url(KEY) + "/v1/metadata") as r:  # no token: no epochs
                assert r.status == 401 and (await r.json())["error"] == "SASL_AUTHENTICATION_FAILED"
            async with http.get(controller.url + "/clusters/streaming/nope/v1/metadata", headers=admin) as r:
                assert r.status == 503 and (await r.json())["error"] == "NOT_CONTROLLER"

        async with real_broker(tmp_path, controller.cluster_url(KEY), await broker_token_file(api, tmp_path)) as broker:
            await wait_until_async(lambda: broker.info and 0 in controller.service(KEY).image.brokers
                                   and not controller.service(KEY).image.brokers[0].fenced,
                                   timeout=15, what="broker 0 registered")
            assert broker.cluster.cluster_id == cluster["status"]["clusterId"]  # adopted from the operator

            await api.create(TS, "topics", topic("orders"))
            obj = await api.wait_for(TS, "topics", "orders", placed)
            record = controller.service(KEY).image.topic("orders")
            assert obj["status"]["partitions"] == [
                {"partition": p.partition, "leader": 0, "leaderEpoch": p.leader_epoch, "replicas": [0], "isr": [0]}
                for p in record.partitions]
            assert ready_condition(obj)["reason"] == "TopicReady"

            # RF 2 is fine by the spec (3 brokers) but only one broker is registered: the core refuses.
            await api.create(TS, "topics", topic("wide", replicationFactor=2))
            bad = await api.wait_for(TS, "topics", "wide", lambda o: ready_condition(o).get("status") == "False"
                                     and ready_condition(o).get("reason") != "ControllerUnavailable")
            assert ready_condition(bad)["reason"] == "InvalidReplicationFactor"
            assert "INVALID_REPLICATION_FACTOR" in ready_condition(bad)["message"]
            assert controller.service(KEY).image.topic("wide") is None

            # Grow: the core adds a partition, status follows; the bad topic broke nothing.
            await api.patch(TS, "topics", "orders", {"spec": {"partitions": 3}, "metadata": {"generation": 2}})
            await api.wait_for(TS, "topics", "orders", lambda o: len(o["status"].get("partitions") or []) == 3)

            # A new replication factor above the live brokers (3 in spec, 1 registered): the core's planner
            # refuses the reassignment, status says why, and nothing moves.
            await api.patch(TS, "topics", "orders", {"spec": {"replicationFactor": 2}, "metadata": {"generation": 3}})
            refused = await api.wait_for(TS, "topics", "orders",
                                         lambda o: ready_condition(o).get("reason") == "InvalidReplicationFactor")
            assert "1 available" in ready_condition(refused)["message"], ready_condition(refused)
            assert all(len(p.replicas) == 1 for p in controller.service(KEY).image.topic("orders").partitions)

            # Cluster status: the broker as the controller sees it (no pod in KMock: none is claimed).
            status = (await api.wait_for(
                TS, "tinystreamclusters", "demo",
                lambda o: any(b.get("partitionsLed") == 3 for b in o["status"].get("brokers") or [])))["status"]
            entry = next(b for b in status["brokers"] if b["id"] == 0)
            assert entry["fenced"] is False and "pod" not in entry

            # The saved state is the running one.
            saved = decode_state(status["controller"], where="test")
            assert saved.image.topic("orders").topic_id == record.topic_id

            # Delete: the controller drops the topic, the finalizer is released.
            await api.delete(TS, "topics", "orders")
            await api.wait_for(TS, "topics", "orders", lambda o: o is None)
            assert controller.service(KEY).image.topic("orders") is None


CONTROLLER_NAME = "demo-controller.streaming.svc"  # the cluster's ExternalName Service (resources.controller_url)


@pytest.fixture
def controller_name_resolves_here(monkeypatch):
    """The cluster's controller name resolves to this machine, as the ExternalName Service does to the operator."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        return real("127.0.0.1" if host == CONTROLLER_NAME else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


async def test_broker_registers_over_tls_trusting_its_clusters_ca_only(server, api, tmp_path,
                                                                        controller_name_resolves_here):
    controller = OperatorController(host="127.0.0.1", port=0, timing=TIMING, secret_source=derived_secrets(MASTER_SECRET),
                                    tls=ControllerTLS(MASTER_SECRET, service_names=frozenset({"ts.ops.svc"})))
    async with running_operator(str(server.url), controller=controller):
        await api.create(TS, "tinystreamclusters", CLUSTER)
        await api.wait_for(TS, "tinystreamclusters", "demo",
                           lambda o: ((o or {}).get("status") or {}).get("clusterId") and controller.service(KEY))
        token_file = await broker_token_file(api, tmp_path)
        ca_file = str(tmp_path / "tokens" / CONTROLLER_CA_FILE)
        url = f"https://{CONTROLLER_NAME}:{controller.port}/clusters/streaming/demo"
        assert controller.url.startswith("https://")
        token = (tmp_path / "tokens" / "broker-0").read_text()

        # Callers that cannot be sure who answers get nothing: plain HTTP, the system's CAs, the operator's CA.
        for kwargs in ({"base": url.replace("https://", "http://")}, {}, {"cadata": controller.tls.ca.cert_pem}):
            base = kwargs.pop("base", url)
            context = ssl.create_default_context(**kwargs) if base.startswith("https") else None
            async with ControllerClient(base, token=token, ssl_context=context) as client:
                with pytest.raises(ControllerUnavailable):
                    await client.metadata(since=-1)
        assert list(controller.service(KEY).image.brokers) == []  # nobody registered

        # The broker trusts controller-ca.crt from its tokens Secret and registers over TLS.
        async with real_broker(tmp_path, url, token_file, **{"controller.ssl.truststore.location": ca_file}) as broker:
            await wait_until_async(lambda: broker.info and 0 in controller.service(KEY).image.brokers
                                   and not controller.service(KEY).image.brokers[0].fenced,
                                   timeout=15, what="broker 0 registered over TLS")
            assert broker.cluster.cluster_id == controller.service(KEY).image.cluster_id
            async with ControllerClient(url, ssl_context=controller_ssl_context(url, ca_file)) as anonymous:
                with pytest.raises(ControllerRefused) as refused:  # TLS is not a credential
                    await anonymous.metadata(since=-1)
                assert refused.value.status == 401


@pytest.mark.slow  # two operator start/stop cycles
async def test_operator_restart_resumes_the_core_from_status(server, api, tmp_path):
    first = new_controller()
    async with running_operator(str(server.url), controller=first):
        await api.create(TS, "tinystreamclusters", CLUSTER)
        await api.wait_for(TS, "tinystreamclusters", "demo",  # saved while opening; registered just after
                           lambda o: ((o or {}).get("status") or {}).get("controller") and first.service(KEY))
        async with real_broker(tmp_path, first.cluster_url(KEY), await broker_token_file(api, tmp_path)):
            await wait_until_async(lambda: 0 in first.service(KEY).image.brokers
                                   and not first.service(KEY).image.brokers[0].fenced, timeout=15, what="broker 0 registered")
            await api.create(TS, "topics", topic("orders"))
            await api.wait_for(TS, "topics", "orders", placed)
            before = first.service(KEY).image
    cluster = await api.get(TS, "tinystreamclusters", "demo")
    assert cluster["status"]["controller"]["metadataVersion"] >= before.version - 1  # fencing at stop may follow

    second = new_controller()
    async with running_operator(str(server.url), controller=second):
        await api.wait_for(TS, "topics", "orders", lambda o: o["metadata"].get("generation", 1) and placed(o))
        after = await wait_until_async(lambda: second.service(KEY) and second.service(KEY).image, timeout=15,
                                       what="the resumed controller")
        assert after.cluster_id == before.cluster_id
        assert after.topic("orders").topic_id == before.topic("orders").topic_id
        assert after.version >= before.version
        assert 0 in after.brokers  # the registration survived the restart


async def test_a_controller_told_to_stop_answers_not_controller_and_closes_connections(server, api, tmp_path):
    """SIGTERM's first step (hand_over.py): from `stand_down` on, a kept-alive connection gets
    NOT_CONTROLLER and is closed (the broker's next call goes to the replacement behind the Service), and
    the old controller decides nothing more: its image stays as it was while its broker keeps calling."""
    async with operator_with_a_broker(server, api, tmp_path) as controller:
        service = controller.service(KEY)
        admin = {"Authorization": f"Bearer {controller.admin_token(KEY)}"}
        url = controller.cluster_url(KEY) + "/v1/metadata"
        async with aiohttp.ClientSession() as http:
            async with http.get(url, headers=admin) as answered:
                assert answered.status == 200
                await answered.read()
            driver = controller._drivers[KEY]  # the operator's loop (kopf runs in a thread here)
            driver.get_loop().call_soon_threadsafe(controller.stand_down)
            await wait_until_async(driver.done, timeout=5, what="the driver loop stopped")
            version = service.image.version
            async with http.get(url, headers=admin) as refused:  # on the same kept-alive connection
                body = await refused.json()
                assert refused.status == 503 and body["error"] == "NOT_CONTROLLER", body
                assert refused.headers.get("Connection", "").lower() == "close"
            await asyncio.sleep(1.0)  # five heartbeats of the broker's, five driver ticks
            assert service.image.version == version


async def test_a_rebalance_resource_runs_on_the_core(server, api, tmp_path):
    """TinyStreamRebalance through OperatorController to the real core: a proposal onto a second broker,
    approve (the move starts, with throttled replicas and spec.throttle's rate on brokers 0 and 1), then stop
    (cancelled, throttles and rates gone)."""
    async with operator_with_a_broker(server, api, tmp_path) as controller:
        await api.create(TS, "topics", topic("orders"))
        await api.wait_for(TS, "topics", "orders", placed)
        # Broker 1 registers (the admin may act as any broker) but never fetches: a move to it stays running.
        async with ControllerClient(controller.cluster_url(KEY), token=controller.admin_token(KEY),
                                    ssl_context=controller_ssl_context(controller.cluster_url(KEY), None)) as c:
            reply = await c.register_broker(broker_id=1, incarnation_id="b1", host="127.0.0.1", port=9)
            meta = await c.metadata()
            assert not (await c.heartbeat(1, broker_epoch=reply.broker_epoch,
                                          metadata_version=meta.version)).fenced

        def state(name):
            return lambda o: ((o or {}).get("status") or {}).get("state") == name

        await api.create(TS, "tinystreamrebalances", {
            "apiVersion": TS, "kind": "TinyStreamRebalance", "metadata": {"name": "grow"},
            "spec": {"cluster": "demo", "mode": "add-brokers", "brokers": [1], "throttle": 4096}})
        ready = await api.wait_for(TS, "tinystreamrebalances", "grow", state("ProposalReady"))
        (move,) = ready["status"]["proposal"]
        assert 1 in move["after"] and ready["status"]["optimizationResult"]["numReplicaMovements"] == 1

        await api.patch(TS, "tinystreamrebalances", "grow",
                        {"metadata": {"annotations": {"tinystream.io/rebalance": "approve"}}})
        await api.wait_for(TS, "tinystreamrebalances", "grow", state("Rebalancing"))
        record = controller.service(KEY).image.topic("orders")
        assert record.partitions[move["partition"]].adding_replicas == (1,)
        assert record.config["follower.replication.throttled.replicas"] == f"{move['partition']}:1"
        rates = {"leader.replication.throttled.rate": "4096", "follower.replication.throttled.rate": "4096"}
        assert controller.service(KEY).image.broker_configs.brokers == {"0": rates, "1": rates}

        await api.patch(TS, "tinystreamrebalances", "grow",
                        {"metadata": {"annotations": {"tinystream.io/rebalance": "stop"}}})
        stopped = await api.wait_for(TS, "tinystreamrebalances", "grow", state("Stopped"))
        assert "1 running move(s) cancelled" in stopped["status"]["message"]
        record = controller.service(KEY).image.topic("orders")
        assert all(p.replicas == (0,) and not p.adding_replicas for p in record.partitions)
        assert "follower.replication.throttled.replicas" not in record.config
        assert controller.service(KEY).image.broker_configs.brokers == {}


async def test_an_id_given_out_again_loses_its_scale_down_drain_and_a_pool_rebalance_uses_members(
        server, api, tmp_path):
    """Node pools reuse an id a scale-down removed (another pool's growth takes the lowest free id): the
    core keeps a scale-down's drain over a restart, so the new broker would get no replica. The pool pass's
    EndScaleDownDrain ends it (a roll's drain and an admin's are left alone); a proposal given `members` places nothing on
    a registered broker outside them."""
    async with operator_with_a_broker(server, api, tmp_path) as controller:
        await api.create(TS, "topics", topic("orders", partitions=6))
        await api.wait_for(TS, "topics", "orders", placed)
        async with ControllerClient(controller.cluster_url(KEY), token=controller.admin_token(KEY),
                                    ssl_context=controller_ssl_context(controller.cluster_url(KEY), None)) as c:
            async def start(broker_id: int, incarnation: str) -> None:
                reply = await c.register_broker(broker_id=broker_id, incarnation_id=incarnation,
                                                host="127.0.0.1", port=9)
                meta = await c.metadata()
                await c.heartbeat(broker_id, broker_epoch=reply.broker_epoch, metadata_version=meta.version)

            await start(1, "b1")
            # pool b's scale-down removed id 1
            await on_operator_loop(controller, controller.broker_actions(KEY, [DrainBrokers((1,))]))
            await start(2, "c1")
            await on_operator_loop(controller, controller.broker_actions(KEY, [MoveLeadership(2)]))  # a roll's drain of broker 2
            await start(1, "b2")  # pool a's new pod, given id 1 again
            await start(3, "d1")
            await c.drain_broker(3)  # an admin's drain (the API's): no pool pass may end it
            image = controller.service(KEY).image
            assert image.brokers[1].drained  # what made a rebalance onto the grown pool place nothing
            with pytest.raises(ControllerRefusedPort, match="fenced or drained"):
                await on_operator_loop(controller, controller.rebalance_proposal(KEY, "add-brokers", [1]))

            await on_operator_loop(controller, controller.broker_actions(KEY, [EndScaleDownDrain((0, 1, 2, 3))]))
            image = controller.service(KEY).image
            assert not image.brokers[1].drained and image.brokers[2].drained_until_restart
            assert image.brokers[3].drained and not image.brokers[3].drained_by_scale_down
            proposal = await on_operator_loop(controller, controller.rebalance_proposal(KEY, "add-brokers", [1]))
            assert proposal["moves"] and all(1 in m["after"] for m in proposal["moves"])
            with pytest.raises(ControllerRefusedPort, match="fenced or drained"):
                await on_operator_loop(controller, controller.rebalance_proposal(KEY, "add-brokers", [1], members={0}))


async def on_operator_loop(controller: OperatorController, coro):
    """Await `coro` on the operator's event loop (kopf's thread), where the controller's state lives."""
    loop = controller._drivers[KEY].get_loop()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
