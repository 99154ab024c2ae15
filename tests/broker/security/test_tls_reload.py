"""Certificates replaced on disk without a restart (issue 12): new connections get the new one, old ones go on.

Files are laid out as Kubernetes mounts a Secret: `tls.pem -> ..data/tls.pem`, `..data -> ..<timestamp>/`,
and an update swaps the `..data` symlink. A producer writes over SSL the whole time; the broker's
certificate is replaced by one from a new CA (the clients' truststore holds the old and the new CA);
nothing is lost, and a new connection sees the new certificate. A half-written file is logged and the last
good certificate stays.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
import uuid
from pathlib import Path

import pytest
from cryptography import x509

from tinystream.broker.security.tls_reload import ReloadingContext
from tinystream.testing.broker import BrokerThread, ThrowawayPki, test_settings


class MountedSecret:
    """A folder laid out like a mounted Kubernetes Secret; `update` swaps it as the kubelet does."""

    def __init__(self, folder: Path, files: dict[str, bytes]) -> None:
        self.folder = folder
        folder.mkdir(parents=True)
        self._generation = 0
        self.update(files)
        for name in files:
            os.symlink(f"..data/{name}", folder / name)

    def update(self, files: dict[str, bytes]) -> None:
        self._generation += 1
        version = self.folder / f"..2026_11_25_{self._generation:04d}"
        version.mkdir()
        for name, data in files.items():
            (version / name).write_bytes(data)
        link = self.folder / "..data_tmp"
        os.symlink(version.name, link)
        os.replace(link, self.folder / "..data")

    def path(self, name: str) -> str:
        return str(self.folder / name)


def serial_seen(host: str, port: int, cafile: str) -> int:
    """The serial number of the certificate a new TLS connection is shown."""
    context = ssl.create_default_context(cafile=cafile)
    with socket.create_connection((host, port), timeout=10) as raw, context.wrap_socket(raw, server_hostname=host) as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def serial_of(pem: Path) -> int:
    return x509.load_pem_x509_certificate(pem.read_bytes()).serial_number  # the first certificate: the leaf


def test_a_context_swaps_only_for_a_whole_new_certificate(tmp_path, caplog):
    pytest.importorskip("trustme")
    old, new = ThrowawayPki(tmp_path / "old"), ThrowawayPki(tmp_path / "new")
    first, second = old.issue("broker"), new.issue("broker")
    secret = MountedSecret(tmp_path / "secret", {"tls.pem": first.read_bytes()})
    built = []

    def build() -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(secret.path("tls.pem"))
        built.append(context)
        return context

    reloading = ReloadingContext(build, (secret.path("tls.pem"),), name="test", server=True)
    assert not reloading.check()  # nothing changed
    secret.update({"tls.pem": second.read_bytes()[:200]})  # half written
    with caplog.at_level(logging.WARNING):
        assert not reloading.check()
    assert reloading.current is built[0] and reloading.failures == 1
    assert "keeping the old ones" in caplog.text
    assert not reloading.check() and reloading.failures == 1  # the same bad file is not retried every poll
    secret.update({"tls.pem": second.read_bytes()})
    assert reloading.check() and reloading.current is built[-1] and reloading.reloads == 1
    assert reloading.outer is built[0]  # the listening socket keeps its context; the SNI callback swaps


def test_a_producer_writes_through_a_certificate_rotation_to_a_new_ca(tmp_path):
    from confluent_kafka import Consumer, Producer  # noqa: PLC0415

    pytest.importorskip("trustme")
    old_ca, new_ca = ThrowawayPki(tmp_path / "old-ca"), ThrowawayPki(tmp_path / "new-ca")
    old_cert, new_cert = old_ca.issue("broker"), new_ca.issue("broker")
    bundle = tmp_path / "trusted.pem"  # what clients trust during the rotation: the old and the new CA
    bundle.write_bytes(old_ca.ca_pem.read_bytes() + new_ca.ca_pem.read_bytes())
    secret = MountedSecret(tmp_path / "secret", {"tls.pem": old_cert.read_bytes(), "ca.pem": bundle.read_bytes()})
    settings = test_settings(tmp_path / "data", **{
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": secret.path("tls.pem"),
        "ssl.truststore.location": secret.path("ca.pem"), "ssl.reload.interval.ms": 100})
    topic = f"rotate-{uuid.uuid4().hex[:6]}"
    with BrokerThread(settings) as broker:
        host, port = broker.info.host, broker.info.port
        assert serial_seen(host, port, str(bundle)) == serial_of(old_cert)
        conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(bundle),
                "log_level": 0}
        producer = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        delivered: list[int] = []
        failed: list[str] = []
        stop = threading.Event()

        def on_delivery(err, msg):
            (failed.append(str(err)) if err else delivered.append(int(msg.value())))

        def write() -> None:
            i = 0
            while not stop.is_set():
                producer.produce(topic, value=str(i).encode(), on_delivery=on_delivery)
                producer.poll(0)
                i += 1
                time.sleep(0.002)
            producer.flush(30)

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(1.0)
        before = broker.call(lambda b: {c._id for c in b.server._connections})
        secret.update({"tls.pem": new_cert.read_bytes(), "ca.pem": bundle.read_bytes()})
        deadline = time.monotonic() + 10
        while serial_seen(host, port, str(bundle)) != serial_of(new_cert):
            assert time.monotonic() < deadline, "new connections never got the new certificate"
            time.sleep(0.1)
        secret.update({"tls.pem": b"-----BEGIN PRIVATE KEY-----\ntruncat", "ca.pem": bundle.read_bytes()})
        time.sleep(0.5)  # several polls: the broken file is refused, the new certificate stays
        assert serial_seen(host, port, str(bundle)) == serial_of(new_cert)
        only_new = new_ca.ca_pem  # a client that trusts nothing but the new CA gets in too
        assert serial_seen(host, port, str(only_new)) == serial_of(new_cert)
        time.sleep(1.0)
        kept_before_stop = broker.call(lambda b: {c._id for c in b.server._connections}) & before
        stop.set()
        writer.join(60)
        assert kept_before_stop, "the producer's connections made before the rotation were dropped"
        assert not failed, failed[:5]
        assert len(delivered) > 100
        consumer = Consumer({**conf, "group.id": "check", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        while len(seen) < len(delivered) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(int(msg.value()))
        consumer.close()
        assert seen == set(delivered)  # nothing acknowledged was lost
        reloading = broker.call(lambda b: b.tls_contexts[0])
        assert reloading.reloads == 1 and reloading.failures >= 1


def test_replica_fetchers_connect_with_the_newest_truststore_and_certificate(tmp_path):
    from tinystream.broker.security.listener import inter_broker_credentials  # noqa: PLC0415
    from tinystream.broker.security.listener_config import plan_listeners  # noqa: PLC0415
    from tinystream.config.settings import BrokerSettings  # noqa: PLC0415

    pytest.importorskip("trustme")
    old_ca, new_ca = ThrowawayPki(tmp_path / "old-ca"), ThrowawayPki(tmp_path / "new-ca")
    secret = MountedSecret(tmp_path / "secret", {"tls.pem": old_ca.issue("b").read_bytes(),
                                                 "ca.pem": old_ca.ca_pem.read_bytes()})
    plan = plan_listeners(BrokerSettings(**{
        "listeners": "REPLICATION://127.0.0.1:0", "listener.security.protocol.map": "REPLICATION:SSL",
        "ssl.keystore.location": secret.path("tls.pem"), "ssl.truststore.location": secret.path("ca.pem"),
        "ssl.client.auth": "required"}))
    credentials = inter_broker_credentials(plan.inter_broker)
    before = credentials.ssl_context
    secret.update({"tls.pem": new_ca.issue("b").read_bytes(),
                   "ca.pem": old_ca.ca_pem.read_bytes() + new_ca.ca_pem.read_bytes()})
    assert credentials.tls.check()
    assert credentials.ssl_context is not before
    assert len(before.get_ca_certs()) == 1 and len(credentials.ssl_context.get_ca_certs()) == 2  # both CAs now
