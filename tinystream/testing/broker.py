"""Helpers for tests (and benchmarks) that run a real broker.

- `test_settings(log_dir, **overrides)`: BrokerSettings for a throwaway broker:
  port 0 (any free port), admin port 0, no initial rebalance delay, a small
  offsets topic; overrides use Kafka names (`{"auto.create.topics.enable": False}`).
- `BrokerThread`: a broker on its own event loop in a background thread, for
  blocking clients (kafka-python, confluent-kafka); `restart()` stops it and
  starts a new one on the same log dirs.
- `request(api_key, version, **fields)` / `entity(api_key, version, name, **fields)`:
  kio request entities by API and version, fields missing in that version dropped.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tinystream.broker.app import Broker, BrokerInfo
from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import build, millis, schemas
from tinystream.broker.storage.batch import build_batch
from tinystream.config.settings import BrokerSettings


def test_settings(log_dir: Path | str, **overrides: Any) -> BrokerSettings:
    values: dict[str, Any] = {
        "log.dirs": str(log_dir),
        "port": 0,
        "admin.port": 0,
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 4,
    }
    values.update(overrides)
    return BrokerSettings(**values)


test_settings.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def request(api_key: int, version: int, /, **fields: Any) -> Any:
    return build(schemas(api_key, version).request_type, fields)


def entity(api_key: int, version: int, name: str, /, **fields: Any) -> Any:
    return build(schemas(api_key, version).request_class(name), fields)


class BrokerThread:
    """A broker running in a daemon thread with its own loop."""
    def __init__(self, settings: BrokerSettings, *, in_memory: bool = False) -> None:
        self.settings = settings
        self.in_memory = in_memory
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker: Broker | None = None
        self.info: BrokerInfo | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> BrokerInfo:
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            try:
                self.broker = Broker(self.settings, in_memory=self.in_memory)
                self.info = loop.run_until_complete(self.broker.start())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self.broker.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="tinystream-broker", daemon=True)
        self._thread.start()
        if not started.wait(timeout):
            raise TimeoutError("broker did not start")
        if failure:
            raise failure[0]
        assert self.info is not None
        return self.info

    @property
    def bootstrap(self) -> str:
        assert self.info is not None
        return self.info.bootstrap

    def call(self, fn: Any, timeout: float = 30.0) -> Any:
        """Run `fn(broker)` on the broker's loop (a coroutine function or a plain one)."""
        assert self.loop is not None and self.broker is not None

        async def run() -> Any:
            result = fn(self.broker)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self.loop is not None and self._thread is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        self._thread = None

    def restart(self) -> BrokerInfo:
        """Stop, then start on the same log dirs and the same port."""
        port = self.info.port if self.info is not None else self.settings.port
        self.stop()
        self.settings = self.settings.model_copy(update={"port": port})
        return self.start()

    def __enter__(self) -> BrokerThread:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# -- request builders for the common cases ----------------------------------------


def now_batch(records: Any, **kwargs: Any) -> bytes:
    """`storage.batch.build_batch` stamped with the current time.

    (A batch with an old timestamp makes the log roll a new segment before it,
    Kafka's segment.ms rule, which tests rarely want.)
    """

    kwargs.setdefault("base_timestamp", int(time.time() * 1000))
    return build_batch(records, **kwargs)


def produce_request(
    topic: str, partition: int, records: bytes | None, *, version: int = 9, acks: int = 1, timeout_ms: int = 5000,
    transactional_id: str | None = None,
) -> Any:
    return request(
        0, version,
        transactional_id=transactional_id, acks=acks, timeout=millis(timeout_ms),
        topic_data=(
            entity(0, version, "TopicProduceData", name=topic,
                   partition_data=(entity(0, version, "PartitionProduceData", index=partition, records=records),)),
        ),
    )


def fetch_request(
    partitions: list[tuple[str, int, int]],
    *,
    version: int = 11,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
    replica_id: int = -1,
    isolation_level: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
    current_leader_epoch: int = -1,
    last_fetched_epoch: int = -1,
    forgotten: Sequence[tuple[str, int]] = (),
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    rack_id: str = "",
) -> Any:
    """Fetch (topic, partition, offset) triples, grouped by topic in the order given; `forgotten`
    (topic, partition) pairs leave an incremental fetch session (KIP-227); v13+ names topics by
    `topic_ids` (KIP-516); v11+ says the client's `rack_id` (KIP-392)."""
    ids = topic_ids or {}
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append(
            entity(1, version, "FetchPartition", partition=partition, fetch_offset=offset,
                   partition_max_bytes=partition_max_bytes, log_start_offset=-1,
                   current_leader_epoch=current_leader_epoch, last_fetched_epoch=last_fetched_epoch)
        )
    return request(
        1, version,
        replica_id=replica_id, max_wait=millis(max_wait_ms), min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
        topics=tuple(entity(1, version, "FetchTopic", topic=t, topic_id=ids.get(t), partitions=tuple(ps))
                     for t, ps in by_topic.items()),
        forgotten_topics_data=tuple(
            entity(1, version, "ForgottenTopic", topic=t, topic_id=ids.get(t),
                   partitions=tuple(p for tt, p in forgotten if tt == t))
            for t in dict.fromkeys(t for t, _ in forgotten)
        ),
        rack_id=rack_id,
    )


def alter_client_quotas_request(*entries: Any, validate_only: bool = False, version: int = 1) -> Any:
    """AlterClientQuotas: each entry ([(entity type, name or None), ...], [(key, value, remove), ...])."""
    return request(49, version, validate_only=validate_only, entries=tuple(
        entity(49, version, "EntryData",
               entity=tuple(entity(49, version, "EntityData", entity_type=t, entity_name=n) for t, n in comps),
               ops=tuple(entity(49, version, "OpData", key=k, value=v, remove=r) for k, v, r in ops))
        for comps, ops in entries))


def describe_client_quotas_request(components: Any = (), *, strict: bool = False, version: int = 1) -> Any:
    """DescribeClientQuotas: components (entity type, match type 0 exact / 1 default / 2 any, name)."""
    return request(48, version, strict=strict, components=tuple(
        entity(48, version, "ComponentData", entity_type=t, match_type=m, match=n) for t, m, n in components))


def create_topics_request(
    topics: list[tuple[str, int, int]] | list[tuple[str, int, int, dict[str, str]]],
    *,
    version: int = 7,
    validate_only: bool = False,
) -> Any:
    """CreateTopics for (name, partitions, replication factor[, configs]) tuples."""
    items = []
    for spec in topics:
        name, partitions, rf = spec[0], spec[1], spec[2]
        configs = spec[3] if len(spec) > 3 else {}  # type: ignore[misc]
        items.append(
            entity(19, version, "CreatableTopic", name=name, num_partitions=partitions, replication_factor=rf,
                   assignments=(),
                   configs=tuple(entity(19, version, "CreatableTopicConfig", name=k, value=v) for k, v in configs.items()))
        )
    return request(19, version, topics=tuple(items), timeout=millis(5000), validate_only=validate_only)


async def create_topic(client: Any, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> Any:
    """Create one topic through `client` (a protocol.client.KafkaClient); asserts success."""
    response = await client.request(create_topics_request([(name, partitions, 1, configs or {})]))
    assert response.topics[0].error_code == ErrorCode.none, response
    return response.topics[0]


async def init_transactional_producer(client: Any, transactional_id: str) -> tuple[int, int]:
    """FindCoordinator + InitProducerId for `transactional_id` on a one-broker cluster: (producer id, epoch)."""
    found = await client.request(request(10, 3, key=transactional_id, key_type=1))
    assert found.error_code == ErrorCode.none, found
    for _ in range(50):
        init = await client.request(request(22, 4, transactional_id=transactional_id,
                                            transaction_timeout=millis(60000), producer_id=-1, producer_epoch=-1))
        if init.error_code != ErrorCode.coordinator_load_in_progress:
            break
        await asyncio.sleep(0.05)
    assert init.error_code == ErrorCode.none, init
    return init.producer_id, init.producer_epoch


async def add_partitions_to_txn(client: Any, transactional_id: str, producer: tuple[int, int], topic: str,
                                partitions: Sequence[int]) -> Any:
    """AddPartitionsToTxn v3 (a client's call): the answer."""
    return await client.request(request(
        24, 3, v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=(entity(24, 3, "AddPartitionsToTxnTopic", name=topic, partitions=tuple(partitions)),),
    ))


def throwaway_tls(folder: Path) -> tuple[Path, Path]:
    """A CA (trustme, the test extra) and a certificate for 127.0.0.1: (keystore PEM, truststore PEM)."""
    import trustme

    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    keystore, truststore = folder / "broker.pem", folder / "ca.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(truststore))
    return keystore, truststore


def sasl_plaintext_settings(folder: Path, *, users: dict[str, str], **overrides: Any) -> BrokerSettings:
    """Settings of a broker on SASL_PLAINTEXT://127.0.0.1:0 with these users (no TLS: handler tests)."""
    from tinystream.scram_users import UserStore

    folder.mkdir(parents=True, exist_ok=True)
    store = UserStore()
    for name, password in users.items():
        store.set_password(name, password)
    store.save(folder / "users.json")
    return test_settings(folder / "data", **{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.users.file": str(folder / "users.json"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN", **overrides})


def acl_creation(resource_type: str, name: str, principal: str, operation: str, *, permission: str = "ALLOW",
                 pattern: str = "LITERAL", host: str = "*", version: int = 3) -> Any:
    """One CreateAcls entry by Kafka's enum names (tinystream.acls)."""
    from tinystream.acls import AclBinding

    b = AclBinding.of(resource_type, name, pattern, principal, host, operation, permission)
    return entity(30, version, "AclCreation", resource_type=b.resource_type, resource_name=b.resource_name,
                  resource_pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                  operation=b.operation, permission_type=b.permission)


def create_acls_request(*creations: Any, version: int = 3) -> Any:
    return request(30, version, creations=tuple(creations))


def sasl_ssl_settings(folder: Path, *, users: dict[str, str], tls: tuple[Path, Path] | None = None,
                      mechanisms: str = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
                      **overrides: Any) -> tuple[BrokerSettings, Path]:
    """Settings of a broker on SASL_SSL://127.0.0.1:0 with these users (and a new CA unless `tls` is given).

    Returns the settings and the CA's PEM (the clients' truststore).
    """
    from tinystream.scram_users import UserStore

    keystore, truststore = tls or throwaway_tls(folder)
    folder.mkdir(parents=True, exist_ok=True)
    store = UserStore()
    for name, password in users.items():
        store.set_password(name, password)
    store.save(folder / "users.json")
    settings = test_settings(folder / "data", **{
        "listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(truststore), "sasl.users.file": str(folder / "users.json"),
        "sasl.enabled.mechanisms": mechanisms, **overrides})
    return settings, truststore


class ThrowawayPki:
    """A throwaway CA (trustme) that issues PEM files every client reads: PKCS#8 key + certificate chain.

    Python's ssl, librdkafka and Java's PEM keystore (`ssl.keystore.type=PEM`) all load the files
    `issue` writes; `ca_pem` is the truststore.
    """

    def __init__(self, folder: Path, *, organization: str = "tinystream-tests") -> None:
        import trustme

        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name=organization)
        self.ca_pem = folder / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))

    def issue(self, name: str, *identities: str, common_name: str | None = None,
              unit: str | None = None, folder: Path | None = None) -> Path:
        from cryptography.hazmat.primitives import serialization

        leaf = self.ca.issue_cert(*(identities or ("127.0.0.1", "localhost")), common_name=common_name,
                                  organization_unit_name=unit)
        key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
        pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
        path = (folder or self.folder) / f"{name}.pem"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pkcs8 + b"".join(p.bytes() for p in leaf.cert_chain_pems))
        return path


def open_log_fds(topic: str) -> int:
    """This process's open descriptors on the topic's segment files: the logs' own (a Fetch's file ranges
    share them, storage/file_range.py, and keep a deleted segment's open until they close). A test compares
    it before and after Fetches, with file_range.ranges_held() for the ranges themselves."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if f"/{topic}-" in target and target.endswith(".log"):
            count += 1
    return count


def raw_connection(bootstrap: str, *, rcvbuf: int | None = None, timeout: float = 20) -> socket.socket:
    """A plain TCP socket to `bootstrap` (host:port); `rcvbuf` set before connecting, so the TCP window a
    slow reader advertises follows it."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((host, int(port)))
    sock.settimeout(timeout)
    return sock
