"""On an authenticated listener only brokers write transaction markers (Kafka's ClusterAction).

WriteTxnMarkers ends transactions in partitions, so a client that could send
it could commit or abort anyone's transaction: from a non-broker principal it
is refused with CLUSTER_AUTHORIZATION_FAILED, as is AddPartitionsToTxn's
broker form (v4+, KIP-890 verification).
"""

from __future__ import annotations

import ssl

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient, SaslLogin
from tinystream.testing.broker import create_topics_request, entity, request, sasl_ssl_settings


async def test_only_brokers_write_markers(tmp_path):
    pytest.importorskip("trustme")
    (tmp_path / "broker.password").write_text("b")
    settings, truststore = sasl_ssl_settings(tmp_path / "b", users={"alice": "a", "broker": "b"}, **{
        "inter.broker.sasl.username": "broker", "inter.broker.sasl.password.file": str(tmp_path / "broker.password")})
    broker = Broker(settings)
    await broker.start()
    context = ssl.create_default_context(cafile=str(truststore))
    try:
        async def login(user: str, password: str) -> KafkaClient:
            assert broker.info is not None
            return await KafkaClient.connect(broker.info.host, broker.info.port, ssl_context=context,
                                             sasl=SaslLogin("SCRAM-SHA-512", user, password))

        alice, peer = await login("alice", "a"), await login("broker", "b")
        created = await alice.request(create_topics_request([("t", 1, 1)]))
        assert created.topics[0].error_code == ErrorCode.none
        markers = request(27, 1, markers=(entity(27, 1, "WritableTxnMarker", producer_id=5, producer_epoch=0,
                                                 transaction_result=False, coordinator_epoch=0, topics=(
                                                     entity(27, 1, "WritableTxnMarkerTopic", name="t",
                                                            partition_indexes=(0,)),)),))
        refused = await alice.request(markers)
        assert refused.markers[0].topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
        written = await peer.request(markers)
        assert written.markers[0].topics[0].partitions[0].error_code == ErrorCode.none
        verify = request(24, 4, transactions=(entity(24, 4, "AddPartitionsToTxnTransaction", transactional_id="x",
                                                     producer_id=5, producer_epoch=0, verify_only=True, topics=()),))
        assert (await alice.request(verify)).error_code == ErrorCode.cluster_authorization_failed
        for client in (alice, peer):
            await client.close()
    finally:
        await broker.stop()
