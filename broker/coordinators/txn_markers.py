"""Transaction markers: written here when this broker leads the partition, else sent to its leader.

`write_local_markers` is the leader's side of WriteTxnMarkers (also used by
the WriteTxnMarkers handler): append each marker (`ReplicaManager.append_markers`),
wait until it is replicated (acks=all, as Kafka appends markers), then tell the
group coordinator about markers in __consumer_offsets, so transactional
offsets become visible on COMMIT (Kafka's scheduleHandleTxnCompletion).

`MarkerChannel.verify` is a partition leader's KIP-890 question to another
broker's coordinator (AddPartitionsToTxn v4 verify_only) before it appends a
transactional batch that opens a transaction in one of its partitions.

`MarkerChannel` is the transaction coordinator's `MarkerWriter`: partitions
led here go through `write_local_markers`; the others are grouped by leader
and sent as WriteTxnMarkers v1 over one broker-to-broker connection per
leader (`protocol.client.KafkaClient`). A partition without a known leader,
or a leader we cannot reach, answers NOT_LEADER_OR_FOLLOWER / a network
error, and the coordinator retries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from tinystream.broker.coordinators.group_service import GroupService
from tinystream.broker.errors import ErrorCode
from tinystream.broker.metadata.cluster import ClusterView
from tinystream.broker.metadata.topics import OFFSETS_TOPIC
from tinystream.broker.protocol.client import KafkaClient, SaslLogin
from tinystream.broker.protocol.codec import schemas
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.security.listener import InterBrokerCredentials
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.topics.manager import TopicManager

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
MARKERS_VERSION = 1
ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 4  # the batched broker form with verify_only (KIP-890)
#: How long a marker may wait for its replicas (Kafka bounds it by request.timeout.ms).
MARKER_TIMEOUT_MS = 30_000

Marker = tuple[TopicPartition, int, int, bool, int]  # tp, producer id, epoch, commit, coordinator epoch


async def write_local_markers(
    replicas: ReplicaManager, groups: GroupService | None, markers: Iterable[Marker]
) -> dict[TopicPartition, ErrorCode]:
    """Append markers as leader, wait for acks=all, then complete transactional offsets."""
    markers = list(markers)
    outcomes = replicas.append_markers(markers)
    outcomes = await replicas.wait_replicated(outcomes, MARKER_TIMEOUT_MS)
    for tp, producer_id, _epoch, commit, _coordinator_epoch in markers:
        if tp.topic == OFFSETS_TOPIC and groups is not None and outcomes[tp].error == ErrorCode.none:
            groups.coordinator.complete_txn(tp.partition, producer_id, commit)
    return {tp: o.error for tp, o in outcomes.items()}


class MarkerChannel:
    def __init__(
        self, *, replicas: ReplicaManager, topics: TopicManager, cluster: ClusterView, groups: GroupService | None
    ) -> None:
        self._replicas = replicas
        self._topics = topics
        self._cluster = cluster
        self._groups = groups
        self._clients: dict[int, KafkaClient] = {}
        # One connection per broker, made once: requests on it are answered in order, which keeps
        # concurrent verifications of one producer's pipelined produces in order.
        self._connecting = asyncio.Lock()
        # How to reach the other brokers' listener (TLS, SASL), as the replica fetchers do; set in replicated mode.
        self.credentials: InterBrokerCredentials | None = None

    async def write_markers(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        me = self._cluster.broker_id
        local: list[Marker] = []
        remote: dict[int, list[tuple[str, int]]] = {}
        results: dict[tuple[str, int], ErrorCode] = {}
        for topic, index in partitions:
            tp = TopicPartition(topic, index)
            if self._topics.get(topic) is None:
                results[(topic, index)] = ErrorCode.unknown_topic_or_partition
                continue
            leader = self._topics.partition_state(tp).leader
            if leader == me:
                local.append((tp, producer_id, producer_epoch, commit, coordinator_epoch))
            elif leader >= 0:
                remote.setdefault(leader, []).append((topic, index))
            else:
                results[(topic, index)] = ErrorCode.not_leader_or_follower
        if local:
            written = await write_local_markers(self._replicas, self._groups, local)
            results.update({(tp.topic, tp.partition): e for tp, e in written.items()})
        for leader, tps in remote.items():
            results.update(await self._send(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch))
        return results

    async def _send(
        self, leader: int, tps: list[tuple[str, int]], producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> dict[tuple[str, int], ErrorCode]:
        api = schemas(WRITE_TXN_MARKERS, MARKERS_VERSION)
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        request = api.request_type(markers=(
            api.request_class("WritableTxnMarker")(producer_id=producer_id, producer_epoch=epoch, transaction_result=commit,
                        coordinator_epoch=coordinator_epoch, topics=tuple(
                            api.request_class("WritableTxnMarkerTopic")(name=t, partition_indexes=tuple(ids))
                            for t, ids in by_topic.items())),
        ))
        try:
            client = await self._client(leader)
            response = await client.request(request, timeout=MARKER_TIMEOUT_MS / 1000 + 5)
        except (OSError, ConnectionError, TimeoutError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            await self._drop(leader)
            return {tp: ErrorCode.network_exception for tp in tps}
        out: dict[tuple[str, int], ErrorCode] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    out[(topic.name, p.partition_index)] = p.error_code
        return {tp: out.get(tp, ErrorCode.unknown_server_error) for tp in tps}

    async def verify(
        self, coordinator: int, *, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890: ask the id's coordinator (another broker) whether each partition is in the Ongoing
        transaction (AddPartitionsToTxn v4, verify_only). Unreachable: COORDINATOR_NOT_AVAILABLE each."""
        api = schemas(ADD_PARTITIONS_TO_TXN, VERIFY_VERSION)
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        topic_cls = api.request_class("AddPartitionsToTxnTopic")
        request = api.request_type(transactions=(api.request_class("AddPartitionsToTxnTransaction")(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=tuple(topic_cls(name=t, partitions=tuple(ids)) for t, ids in by_topic.items()),
        ),))
        try:
            client = await self._client(coordinator)
            response = await client.request(request, timeout=10)
        except (OSError, ConnectionError, TimeoutError) as exc:
            log.info("verifying %r with broker %d failed: %s", transactional_id, coordinator, exc)
            await self._drop(coordinator)
            return {tp: ErrorCode.coordinator_not_available for tp in partitions}
        out: dict[tuple[str, int], ErrorCode] = {}
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    out[(topic.name, p.partition_index)] = p.partition_error_code
        fallback = response.error_code if response.error_code != ErrorCode.none else ErrorCode.unknown_server_error
        return {tp: out.get(tp, fallback) for tp in partitions}

    async def _client(self, broker_id: int) -> KafkaClient:
        client = self._clients.get(broker_id)
        if client is not None and not client.closed.is_set():
            return client
        async with self._connecting:
            client = self._clients.get(broker_id)
            if client is None or client.closed.is_set():
                endpoint = self._cluster.peer_endpoint(broker_id)
                if endpoint is None:
                    raise ConnectionError(f"broker {broker_id} is not in the cluster view")
                creds = self.credentials
                login = None
                if creds is not None and creds.mechanism and creds.username and creds.password is not None:
                    login = SaslLogin(creds.mechanism, creds.username, creds.password)
                client = await asyncio.wait_for(KafkaClient.connect(
                    endpoint.host, endpoint.port, client_id=f"txn-markers-{self._cluster.broker_id}",
                    ssl_context=creds.ssl_context if creds else None, sasl=login), 10)
                self._clients[broker_id] = client
            return client

    async def _drop(self, broker_id: int) -> None:
        client = self._clients.pop(broker_id, None)
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def close(self) -> None:
        for broker_id in list(self._clients):
            await self._drop(broker_id)
