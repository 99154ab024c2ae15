"""A TinyStream cluster secured by default on a real Kubernetes: TLS, SCRAM-SHA-512, ACLs, users, certificate rotation.

Runs after test_kind.py in the same kind cluster (its operator; its own
cluster `secure` in the same namespace). The operator runs the cluster's CA
and issues the broker certificate; TinyStreamUsers applied with kubectl get
their password Secrets and their ACLs; a client pod authenticates with what
an application gets (the CA's Secret and its user's Secret). Then the broker
certificate is renewed (annotation) while an acks=all writer runs: new
connections see the new certificate without a broker restart, and no
acknowledged record is lost. Brokers replicate on their own listener (mTLS with the broker certificate),
which a NetworkPolicy opens to broker pods only.
"""

from __future__ import annotations

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from kind_helpers import IMAGE_REPO, IMAGE_TAGS, Kube, measure
from kind_workload import Client, Writer, wait_until
from manifests import NAMESPACE, SECURE, SECURE_CLIENT_POD, SECURE_TOPIC, secure_client_pod, secured_cluster, users

pytestmark = [pytest.mark.kind, pytest.mark.timeout(1800)]

CA = ("KAFKA_CAFILE", "/etc/tinystream-ca/ca.crt")
BOOTSTRAP = f"{SECURE}-kafka:9092"


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
    assert '"listener.security.protocol.map" = "CLIENT:SASL_SSL,REPLICATION:SSL"' in config
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
                secured.json("pods", "-l", f"tinystream.io/cluster={SECURE}")["items"]}
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
           secured.json("pods", "-l", f"tinystream.io/cluster={SECURE}")["items"]}
    assert now == restarts  # the same pods: renewed without a restart


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
