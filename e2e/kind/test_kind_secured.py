"""A TinyStream cluster secured by default on a real Kubernetes: TLS, SCRAM-SHA-512, ACLs, users, certificate rotation.

Runs after test_kind.py in the same kind cluster (its operator; its own
cluster `secure` in the same namespace). The operator runs the cluster's CA
and issues the broker certificate; TinyStreamUsers applied with kubectl get
their password Secrets and their ACLs; a client pod authenticates with what
an application gets (the CA's Secret and its user's Secret). Then the broker
certificate is renewed (annotation) while an acks=all writer runs: new
connections see the new certificate without a broker restart, and no
acknowledged record is lost. Brokers replicate on their own listener (mTLS with the broker certificate),
which a NetworkPolicy opens to broker pods only. A client on the host (outside the cluster) produces and
consumes through the external listener's node ports, over TLS + SCRAM, across a broker failover.
"""

from __future__ import annotations

import base64
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kind_helpers import IMAGE_REPO, IMAGE_TAGS, Kube, measure
from kind_workload import Client, Writer, wait_until
from manifests import (
    EXTERNAL,
    NAMESPACE,
    SECURE,
    SECURE_CLIENT_POD,
    SECURE_TOPIC,
    TYPED_SUBJECT,
    TYPED_TOPIC,
    secure_client_pod,
    secured_cluster,
    typed_schema,
    users,
)
from previous_release import ensure_this_chart

INPOD_CLIENT = Path(__file__).parent / "inpod_client.py"

pytestmark = [pytest.mark.kind, pytest.mark.timeout(1800)]

CA = ("KAFKA_CAFILE", "/etc/tinystream-ca/ca.crt")
BOOTSTRAP = f"{SECURE}-kafka:9092"
BROKER_PODS = f"tinystream.io/cluster={SECURE},app.kubernetes.io/component=broker"


def client(user: str | None, *, password: str | None = None, protocol: str = "SASL_SSL") -> Client:
    env: list[tuple[str, str]] = [("KAFKA_SECURITY_PROTOCOL", protocol)]
    if protocol != "PLAINTEXT":
        env.append(CA)
    if user:
        env.append(("KAFKA_SASL_USERNAME", user))
        env.append(("KAFKA_SASL_PASSWORD", password) if password else
                   ("KAFKA_SASL_PASSWORD_FROM", f"{user.upper()}_PASSWORD"))
    return Client(pod=SECURE_CLIENT_POD, bootstrap=BOOTSTRAP, env=tuple(env))


APP = client("app")


def ready(kube: Kube, kind: str, name: str) -> bool:
    obj = kube.json(kind, name)
    cond = next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Ready"), {})
    return cond.get("status") == "True"


@pytest.fixture(scope="module")
def secured(installed: Kube) -> Kube:
    kube = installed
    ensure_this_chart(kube)
    start = time.monotonic()
    image = f"{IMAGE_REPO}:{IMAGE_TAGS[0]}"
    kube.apply(secured_cluster(image=image))
    wait_until(lambda: ready(kube, "tsc", SECURE) and kube.json("tsc", SECURE)["status"].get("readyBrokers") == 3,
               timeout=600, what="the secured cluster Ready")
    measure("secured cluster: apply -> Ready (3 brokers, TLS + SCRAM + ACLs)", f"{time.monotonic() - start:.0f} s")
    wait_until(lambda: ready(kube, "topic", SECURE_TOPIC), timeout=180, what="the secured topic")
    kube.apply(users())
    wait_until(lambda: ready(kube, "tsu", "app") and ready(kube, "tsu", "nobody"), timeout=120, what="the users")
    kube.apply(secure_client_pod(image))
    kube.kubectl("wait", f"pod/{SECURE_CLIENT_POD}", "--for=condition=Ready", "--timeout=180s", timeout=200)
    return kube


def probe(kube: Kube, who: Client) -> str:
    out = who.run(kube, "probe", who.bootstrap, SECURE_TOPIC, timeout=120)
    return out[-1] if out else ""


def test_the_operator_made_the_credentials_and_the_brokers_run_tls_and_scram(secured):
    secrets = {s["metadata"]["name"] for s in secured.json("secrets")["items"]}
    assert {f"{SECURE}-cluster-ca-cert", f"{SECURE}-broker-tls", f"{SECURE}-broker-users", "app", "nobody"} <= secrets
    config = secured.json("configmap", f"{SECURE}-config")["data"]["broker.toml"]
    assert '"listener.security.protocol.map" = "CLIENT:SASL_SSL,REPLICATION:SSL,EXT:SASL_SSL"' in config
    assert '"inter.broker.listener.name" = "REPLICATION"' in config and "StandardAuthorizer" in config
    assert secured.json("networkpolicy", f"{SECURE}-broker")["spec"]["ingress"][1]["ports"][0]["port"] == 9093
    assert secured.json("tsu", "app")["status"]["acls"] == 3
    conditions = {c["type"]: c for c in secured.json("tsc", SECURE)["status"]["conditions"]}
    assert (conditions["Secure"]["status"], conditions["Secure"]["reason"]) == ("True", "SecureByDefault")


def test_a_user_with_acls_writes_and_others_are_refused(secured):
    assert probe(secured, APP) == "OK"
    callers = {
        "no ACLs": client("nobody"),
        "wrong password": client("app", password="not-the-password"),
        "no credentials (TLS only)": client(None, protocol="SSL"),
        "plaintext": client(None, protocol="PLAINTEXT"),
    }
    with ThreadPoolExecutor(len(callers)) as pool:  # three of them wait out the client's 20 s bootstrap: together
        answers = {what: pool.submit(probe, secured, caller) for what, caller in callers.items()}
        refusals = {what: answer.result() for what, answer in answers.items()}
    measure("secured cluster refusals", "; ".join(f"{k}: {v[:80]}" for k, v in refusals.items()))
    assert "TopicAuthorizationFailed" in refusals["no ACLs"], refusals
    for what, answer in refusals.items():
        assert answer.startswith("REFUSED"), (what, answer)


def test_each_broker_keeps_partitions_on_both_of_its_volumes(secured):
    """spec.storage.volumes: a claim and a mount per volume, and the broker places partitions on both
    (after the writes above: the topic's and the offsets topic's partitions)."""
    claims = {c["metadata"]["name"] for c in secured.json("pvc")["items"]}
    assert {f"data-{v}-{SECURE}-broker-{b}" for v in (0, 1) for b in range(3)} <= claims
    config = secured.json("configmap", f"{SECURE}-config")["data"]["broker.toml"]
    assert "/var/lib/tinystream/data-0/data,/var/lib/tinystream/data-1/data" in config
    listing = {}
    for volume in (0, 1):
        out = secured.kubectl("exec", f"{SECURE}-broker-0", "-c", "broker", "--", "ls",
                              f"/var/lib/tinystream/data-{volume}/data", timeout=60).stdout.split()
        listing[volume] = [name for name in out if re.fullmatch(r".+-\d+", name)]
    measure("secured cluster: partition directories per volume on broker 0",
            ", ".join(f"data-{v}: {len(names)}" for v, names in listing.items()))
    assert listing[0] and listing[1], listing
    assert not set(listing[0]) & set(listing[1])  # each partition lives in one directory


def secret_if_any(kube: Kube, name: str) -> dict | None:
    found = kube.kubectl("get", "secret", name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def test_a_deleted_user_secret_comes_back_and_still_logs_in(secured):
    """Strimzi re-creates a deleted KafkaUser Secret; so does the operator (it tries to create it on a
    timer; it may not read Secrets). The password is derived, so the credential in the metadata matches."""
    before = base64.b64decode(secured.json("secret", "app")["data"]["password"]).decode()
    deleted = time.monotonic()
    secured.kubectl("delete", "secret", "app")
    secret = wait_until(lambda: secret_if_any(secured, "app"), timeout=180, what="the app user's Secret made again",
                        interval=2)
    measure("deleted TinyStreamUser Secret -> made again", f"{time.monotonic() - deleted:.0f} s")
    after = base64.b64decode(secret["data"]["password"]).decode()
    assert after == before
    assert probe(secured, client("app", password=after)) == "OK"
    events = secured.json("events", "--field-selector", "involvedObject.name=app,reason=SecretRecreated")["items"]
    assert events, "no SecretRecreated event"


def test_a_schema_registered_declaratively_is_used_by_a_producer_pod(secured):
    """spec.schemaRegistry deploys the registry (HTTPS from the cluster CA, the cluster's SCRAM users as its
    logins); a TinyStreamSchema is registered in it; an application pod fetches the schema as a
    serializer does, produces a framed Avro value and reads it back. A caller without login gets 401."""
    start = time.monotonic()
    secured.kubectl("patch", "tsc", SECURE, "--type=merge", "-p", json.dumps({"spec": {"schemaRegistry": {}}}))
    url = wait_until(lambda: secured.json("tsc", SECURE)["status"].get("schemaRegistry", {}).get("url"),
                     timeout=180, what="status.schemaRegistry.url")
    assert url == f"https://{SECURE}-schema-registry.{NAMESPACE}.svc:8081", url
    secured.kubectl("rollout", "status", f"statefulset/{SECURE}-schema-registry", "--timeout=300s", timeout=320)
    secured.apply(typed_schema())
    wait_until(lambda: ready(secured, "tss", TYPED_SUBJECT) and ready(secured, "topic", TYPED_TOPIC), timeout=240,
               what="the TinyStreamSchema registered")
    measure("spec.schemaRegistry -> TinyStreamSchema Ready", f"{time.monotonic() - start:.0f} s")
    status = secured.json("tss", TYPED_SUBJECT)["status"]
    assert status["version"] == 1 and status["id"] >= 1, status
    producer = client("app")
    producer = Client(pod=producer.pod, bootstrap=producer.bootstrap, env=(*producer.env, ("REGISTRY_USER", "app")))
    out = producer.run(secured, "avro", BOOTSTRAP, TYPED_TOPIC, url, TYPED_SUBJECT, timeout=180)
    assert "ANONYMOUS 401" in out, out
    assert f"ID {status['id']}" in out, out
    assert f'READ {status["id"]} {{"amount": 42, "id": "o-1"}}' in out, out
    secured.kubectl("delete", "tss", TYPED_SUBJECT, "--timeout=120s", timeout=150)  # its finalizer released
    secured.kubectl("patch", "tsc", SECURE, "--type=merge", "-p", json.dumps({"spec": {"schemaRegistry": None}}))
    wait_until(lambda: secured.kubectl("get", "statefulset", f"{SECURE}-schema-registry", check=False).returncode != 0,
               timeout=180, what="the registry's StatefulSet removed with spec.schemaRegistry")


def serials(kube: Kube) -> set[str]:
    """The certificate serial each broker shows to a new TLS connection."""
    found = set()
    for ordinal in range(3):
        host = f"{SECURE}-broker-{ordinal}.{SECURE}-brokers.{NAMESPACE}.svc"
        found.add(APP.run(kube, "serial", host, "9092", timeout=60)[-1].strip())
    return found


def test_certificate_renewal_under_a_writer_loses_nothing_and_restarts_no_broker(secured):
    before = secured.json("tsc", SECURE)["status"]["certificates"]["serial"]
    assert serials(secured) == {before}
    restarts = {p["metadata"]["name"]: p["metadata"]["uid"] for p in
                secured.json("pods", "-l", BROKER_PODS)["items"]}
    writer = Writer(secured, "rotate", seconds=600, client=APP, topic=SECURE_TOPIC).start()
    wait_until(lambda: writer.acked_count() > 100, timeout=120, what="the writer under way", interval=1)
    asked = time.monotonic()
    secured.kubectl("annotate", "tsc", SECURE, f"tinystream.io/renew-certificates={int(time.time())}", "--overwrite")
    after = wait_until(lambda: (s := secured.json("tsc", SECURE)["status"]["certificates"]["serial"]) != before and s,
                       timeout=120, what="a new broker certificate", interval=1)
    issued = time.monotonic() - asked
    wait_until(lambda: serials(secured) == {after}, timeout=300, what="every broker serving the new certificate",
               interval=5)
    served_at = time.monotonic()
    served = served_at - asked
    wait_until(lambda: writer.acked_since(served_at + 5) > 100 or writer.done,
               timeout=120, what="records acknowledged after the rotation", interval=1)
    writer.stop()
    writer.join()
    measure("certificate renewal: annotate -> issued / -> every broker serving it",
             f"{issued:.0f} s / {served:.0f} s, longest gap between acks {writer.longest_stall():.1f} s")
    writer.check_nothing_lost(secured, "certificate renewal under an acks=all writer")
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in
           secured.json("pods", "-l", BROKER_PODS)["items"]}
    assert now == restarts  # the same pods: renewed without a restart


def _cluster_ca(kube: Kube) -> dict:
    return kube.json("tsc", SECURE)["status"].get("clusterCa") or {}


def _handshakes(kube: Kube, stop: threading.Event, seen: list[str]) -> None:
    """New TLS connections to every broker, trusting the client pod's mounted bundle as it is each time,
    until `stop`: what an application connecting during the rotation meets."""
    hosts = [f"{SECURE}-broker-{n}.{SECURE}-brokers.{NAMESPACE}.svc" for n in range(3)]
    while not stop.is_set():
        try:
            seen.extend(APP.run(kube, "handshake", *hosts, timeout=60))
        except AssertionError:  # kubectl exec itself failed (the API server busy): no answer, try again
            pass
        stop.wait(3)


def test_a_cluster_ca_rotation_under_a_writer_loses_nothing_and_refuses_no_client(secured):
    """The whole cluster CA rotation (three one-at-a-time rolls: trust both, certificates from the new CA,
    drop the old), forced by annotation, under an acks=all TLS + SCRAM writer whose CA file is the mounted
    Secret (kafka-python reads it at each new connection, so it follows the bundle as an application that
    re-reads its truststore does)."""
    before = _cluster_ca(secured)
    assert before.get("phase") == "Steady", before
    old_serials = serials(secured)
    writer = Writer(secured, "carotate", seconds=1200, client=APP, topic=SECURE_TOPIC).start()
    wait_until(lambda: writer.acked_count() > 100, timeout=120, what="the writer under way", interval=1)
    stop, seen = threading.Event(), []
    prober = threading.Thread(target=_handshakes, args=(secured, stop, seen), daemon=True)
    prober.start()
    asked = time.monotonic()
    try:
        secured.kubectl("annotate", "tsc", SECURE, f"tinystream.io/force-renew-ca={int(time.time())}",
                        "--overwrite")
        wait_until(lambda: _cluster_ca(secured).get("phase") != "Steady", timeout=120,
                   what="the rotation started", interval=2)
        wait_until(lambda: (ca := _cluster_ca(secured)).get("phase") == "Steady"
                   and ca.get("generation") == before["generation"] + 1,
                   timeout=1200, what="the rotation finished (three rolls)", interval=5)
    finally:
        stop.set()
        prober.join(90)
    rotated = time.monotonic() - asked
    wait_until(lambda: ready(secured, "tsc", SECURE), timeout=300, what="the cluster Ready after the rotation")
    done_at = time.monotonic()
    wait_until(lambda: writer.acked_since(done_at + 5) > 100 or writer.done,
               timeout=180, what="records acknowledged after the rotation", interval=1)
    writer.stop()
    writer.join()
    measure("cluster CA rotation: annotate -> Steady on the next CA (three rolls)",
            f"{rotated:.0f} s, longest gap between acks {writer.longest_stall():.1f} s")
    writer.check_nothing_lost(secured, "cluster CA rotation under an acks=all writer")
    counts = {kind: sum(1 for line in seen if line.startswith(kind + " ")) for kind in ("OK", "REFUSED", "DOWN")}
    measure("cluster CA rotation: new TLS connections OK / refused / broker down",
            f"{counts['OK']} / {counts['REFUSED']} / {counts['DOWN']}")
    assert counts["OK"] > 30, seen[-10:]  # the prober ran through the rotation
    refused = [line for line in seen if line.startswith("REFUSED ")]
    assert not refused, f"a new client connection was refused during the rotation: {refused[:5]}"
    bundle = _secret(secured, f"{SECURE}-cluster-ca-cert", "ca.crt")
    assert bundle.count("BEGIN CERTIFICATE") == 1  # the old CA is trusted nowhere any more
    # Each broker now shows a certificate that verifies against the new CA alone (the serial command's
    # handshake checks it against the mounted, updated bundle), and none is an old one.
    new_serials = wait_until(lambda: (found := serials(secured)) and not found & old_serials and found,
                             timeout=180, what="every broker verified by the new CA alone", interval=5)
    assert len(new_serials) >= 1


def _secret(kube: Kube, name: str, key: str) -> str:
    return base64.b64decode(kube.json("secret", name)["data"][key]).decode()


def _external_client(kube: Kube, tmp: Path) -> tuple[dict[str, str], set[str]]:
    """A librdkafka config for the host: a node's address and the bootstrap node port, the cluster's CA,
    the app user's SCRAM password (what a user outside the cluster is given); and every node's address."""
    nodes = kube.json("nodes", namespace=None)["items"]
    addresses = {a["address"] for n in nodes for a in n["status"]["addresses"] if a["type"] == "InternalIP"}
    worker = next(a["address"] for n in nodes if "control-plane" not in n["metadata"]["name"]
                  for a in n["status"]["addresses"] if a["type"] == "InternalIP")
    port = kube.json("service", f"{SECURE}-{EXTERNAL}-bootstrap")["spec"]["ports"][0]["nodePort"]
    ca = tmp / "ca.crt"
    ca.write_text(_secret(kube, f"{SECURE}-cluster-ca-cert", "ca.crt"))
    return {"bootstrap.servers": f"{worker}:{port}", "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "app", "sasl.password": _secret(kube, "app", "password"),
            "ssl.ca.location": str(ca)}, addresses  # the broker certificate names the node addresses (IP SANs)


def compare_external_and_internal_producers(kube: Kube, conf: dict, rounds: int = 3) -> None:
    """The same producer (inpod_client.py's `rate`: kafka-python, 3000 x 1 KiB, acks=all, SASL_SSL) on the
    host through the node ports and in the client pod through the bootstrap Service, alternated."""
    host_env = {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_CAFILE": conf["ssl.ca.location"],
                "KAFKA_SASL_USERNAME": conf["sasl.username"], "KAFKA_SASL_PASSWORD": conf["sasl.password"]}
    args = (SECURE_TOPIC, "3000", "1024")
    rates: dict[str, list[float]] = {"outside": [], "inside": []}
    for _ in range(rounds):
        outside = subprocess.run([sys.executable, str(INPOD_CLIENT), "rate", conf["bootstrap.servers"], *args],
                                 capture_output=True, text=True, timeout=300, env={**os.environ, **host_env})
        inside = APP.run(kube, "rate", APP.bootstrap, *args)
        for where, lines in (("outside", outside.stdout.splitlines()), ("inside", inside)):
            assert lines and lines[-1].startswith("RATE "), (where, lines[-5:], outside.stderr[-2000:])
            _, per_s, acked = lines[-1].split()
            assert acked == "3000", (where, lines[-1])
            rates[where].append(float(per_s))
    outside_rate, inside_rate = statistics.median(rates["outside"]), statistics.median(rates["inside"])
    measure(f"external vs in-cluster producer (kafka-python, 3000 x 1 KiB, acks=all, SASL_SSL, {rounds} "
            "alternated rounds, median [min..max] records/s)",
            f"host via node ports {outside_rate:.0f} [{min(rates['outside']):.0f}..{max(rates['outside']):.0f}], "
            f"client pod via the bootstrap Service {inside_rate:.0f} [{min(rates['inside']):.0f}.."
            f"{max(rates['inside']):.0f}]: {outside_rate / inside_rate:.2f}x")


def test_a_host_client_uses_the_node_ports_over_tls_and_scram_across_a_failover(secured, tmp_path):
    kube = secured
    conf, addresses = _external_client(kube, tmp_path)
    ports = {int(s["metadata"]["labels"]["tinystream.io/broker"]): s["spec"]["ports"][0]["nodePort"]
             for s in kube.json("services", "-l", f"tinystream.io/listener={EXTERNAL}")["items"]
             if "tinystream.io/broker" in s["metadata"]["labels"]}

    def described():  # the certificate with the node addresses may still be on its way to the brokers
        try:
            return AdminClient(conf).list_topics(SECURE_TOPIC, timeout=10)
        except Exception:  # noqa: BLE001 - KafkaException while the handshake is refused
            return None
    metadata = wait_until(described, timeout=180, what="metadata through the bootstrap node port", interval=3)
    advertised = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
    assert {b: port for b, (_, port) in advertised.items()} == ports, (advertised, ports)
    assert {host for host, _ in advertised.values()} <= addresses, advertised

    run = uuid.uuid4().hex[:8]
    acked: set[str] = set()
    failed: list[str] = []

    def delivered(err, msg) -> None:
        (failed.append(str(err)) if err else acked.add(msg.value().decode().rstrip()))

    producer = Producer({**conf, "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000})
    compare_external_and_internal_producers(kube, conf)

    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            producer.produce(SECURE_TOPIC, f"{run}-{i}".encode(), on_delivery=delivered)
            producer.poll(0.01)
            i += 1
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    time.sleep(3)
    leader = metadata.topics[SECURE_TOPIC].partitions[0].leader
    victim = f"{SECURE}-broker-{leader}"
    uid = kube.json("pod", victim)["metadata"]["uid"]
    failover = time.monotonic()
    kube.kubectl("delete", "pod", victim, "--wait=false")
    wait_until(lambda: (p := kube.json("pod", victim))["metadata"]["uid"] != uid and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])),
        timeout=300, what=f"{victim} back and ready", interval=2)
    back = time.monotonic() - failover
    before = len(acked)
    wait_until(lambda: len(acked) > before + 50, timeout=120, what="records acknowledged after the failover")
    stop.set()
    writer.join()
    producer.flush(120)

    consumer = Consumer({**conf, "group.id": f"external-{run}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(SECURE_TOPIC, p, OFFSET_BEGINNING) for p in metadata.topics[SECURE_TOPIC].partitions])
    read: set[str] = set()
    deadline = time.monotonic() + 120
    while not acked <= read and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=1):
            if not msg.error() and msg.value().startswith(run.encode()):
                read.add(msg.value().decode().rstrip())
    consumer.close()
    lost = acked - read
    measure("external listener: host client across the leader's pod deletion",
            f"{len(acked)} acknowledged, {len(read)} read, {len(lost)} lost, {len(failed)} not acknowledged; "
            f"{victim} back in {back:.0f} s")
    assert not lost, sorted(lost)[:10]
    wait_until(lambda: ready(kube, "tsc", SECURE), timeout=300, what="the secured cluster Ready again")


def test_users_and_cluster_go_and_helm_uninstall_keeps_the_crds(secured):
    """The suite's last test: a deleted user's ACLs go (finalizer), then the cluster, then the release."""
    secured.kubectl("delete", "tsu", "app", "nobody", "--timeout=120s", timeout=180)
    secured.kubectl("delete", "pod", SECURE_CLIENT_POD, "--wait=false")
    secured.kubectl("delete", "tst", SECURE_TOPIC, "--timeout=120s", timeout=180)
    secured.kubectl("delete", "tsc", SECURE, "--timeout=300s", timeout=360)
    secured.helm("uninstall", "ts", "--wait", "--timeout", "3m", timeout=240)
    # CRDs stay (Helm never deletes crds/): custom resources of other releases survive an uninstall.
    crds = secured.kubectl("get", "crd", "-o", "name", namespace=None).stdout
    assert "topics.tinystream.io" in crds and "tinystreamusers.tinystream.io" in crds
