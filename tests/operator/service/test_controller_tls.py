"""`tinystream controller` over HTTPS (controller.ssl.keystore.location), and brokers that verify it.

The Kubernetes operator's TLS is in tests/operator/k8s/test_controller_tls.py;
this is the same contract for the local controller: clients that trust its CA
get answers, a plain-HTTP or unverified caller gets none, a keystore that
cannot be loaded is a clear error, and a dev cluster's broker registers over
TLS trusting the CA it was given.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tinystream.cli.status_cmd import status
from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import ADMIN, read_secret, token_for
from tinystream.controller_client import ControllerClient, ControllerUnavailable, controller_ssl_context
from tinystream.dev.cluster import LocalCluster
from tinystream.operator.dashboard import HttpClusterSource
from tinystream.operator.service.app import ControllerServer
from tinystream.operator.service.tls import pinned_client_context
from tinystream.testing.broker import ThrowawayPki

pytest.importorskip("trustme")


@pytest.fixture
def pki(tmp_path: Path) -> ThrowawayPki:
    return ThrowawayPki(tmp_path / "pki")


def settings(tmp_path: Path, keystore: Path) -> ControllerSettings:
    return ControllerSettings.model_validate({"host": "127.0.0.1", "port": 0, "dashboard.enabled": False,
                                              "state.file": str(tmp_path / "state.json"),
                                              "controller.ssl.keystore.location": str(keystore)})


async def test_the_api_answers_over_tls_only_to_callers_that_verify_it(tmp_path, pki):
    keystore = pki.issue("controller", "127.0.0.1", "localhost")
    server = ControllerServer(settings(tmp_path, keystore))
    info = await server.start()
    try:
        assert info.url.startswith("https://127.0.0.1:")
        trusted = controller_ssl_context(info.url, str(pki.ca_pem))
        async with ControllerClient(info.url, token=info.admin_token, ssl_context=trusted) as client:
            assert (await client.metadata(since=-1)).image["cluster_id"] == info.cluster_id
        for base, context in ((info.url.replace("https", "http"), None), (info.url, None)):  # plain; system CAs
            async with ControllerClient(base, token=info.admin_token, ssl_context=context) as client:
                with pytest.raises(ControllerUnavailable):
                    await client.metadata(since=-1)

        # The dashboard's pin: its own keystore's certificate verifies, another's does not.
        own = HttpClusterSource(info.url, controller_token=info.admin_token,
                                controller_ssl=pinned_client_context(str(keystore)))
        stranger = HttpClusterSource(info.url, controller_token=info.admin_token,
                                     controller_ssl=pinned_client_context(str(pki.issue("other"))))
        try:
            assert (await own.snapshot()).controller_up
            refused = await stranger.snapshot()
            assert not refused.controller_up and "certificate" in (refused.controller_error or "").lower()
        finally:
            await own.close()
            await stranger.close()
    finally:
        await server.stop()


async def test_a_keystore_that_cannot_be_loaded_is_named(tmp_path):
    (tmp_path / "junk.pem").write_text("not a certificate")
    server = ControllerServer(settings(tmp_path, tmp_path / "junk.pem"))
    with pytest.raises(ValueError, match="controller.ssl.keystore.location .*junk.pem"):
        await server.start()


def test_a_dev_cluster_registers_its_brokers_over_tls(tmp_path, pki):
    keystore = pki.issue("controller", "127.0.0.1", "localhost")
    cluster = LocalCluster(brokers=1, data_dir=tmp_path / "data", first_port=0, echo=lambda _: None,
                           overrides=[f"controller.ssl.keystore.location={keystore}",
                                      f"controller.ssl.truststore.location={pki.ca_pem}"])
    cluster.open()
    try:
        assert cluster.controller_url.startswith("https://")  # what the brokers were given
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415

        admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap, "log_level": 0})
        deadline = time.monotonic() + 20
        while not admin.list_topics(timeout=5).brokers:
            assert time.monotonic() < deadline, "the broker never registered over TLS"
            time.sleep(0.2)
        assert list(admin.list_topics(timeout=5).brokers) == [0]

        # `tinystream status` reads the same https controller with --controller-ca; without it, nothing.
        secret = read_secret(str(tmp_path / "data" / "controller" / "controller.secret"))
        token_file = tmp_path / "admin.token"
        token_file.write_text(token_for(secret, ADMIN))
        args = ["--controller", cluster.controller_url, "--controller-token-file", str(token_file), "--json"]
        shown = CliRunner().invoke(status, [*args, "--controller-ca", str(pki.ca_pem)])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.output)["overview"]["controller"]["up"] is True
        unverified = CliRunner().invoke(status, args)
        assert json.loads(unverified.output)["overview"]["controller"]["up"] is False
    finally:
        cluster.close()
