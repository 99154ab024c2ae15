"""The `_schemas` topic as the registry's log: read to the end on start, then follow; write with acks=all.

Flow: `start()` creates the topic if missing (one partition, so one order;
cleanup.policy=compact), reads it from the beginning to its end offset and
applies every record to the state, then keeps following it. `write(records)`
produces them (acks=all, in order, one partition) and returns once the
follower has applied them, so an answer never runs ahead of the state that
every other instance will also rebuild. The client is aiokafka (the
well-kept asyncio Kafka client); nothing here speaks the protocol by hand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from tinystream.registry.errors import ErrorCode, RegistryError
from tinystream.registry.records import Record
from tinystream.registry.state import RegistryState

log = logging.getLogger(__name__)

TOPIC = "_schemas"  # Confluent's kafkastore.topic default


class SchemaLog:
    def __init__(self, state: RegistryState, *, bootstrap: str, topic: str = TOPIC, replication_factor: int = 1,
                 client_options: dict[str, Any] | None = None, write_timeout_s: float = 30.0) -> None:
        self.state = state
        self.bootstrap = bootstrap
        self.topic = topic
        self.replication_factor = replication_factor
        self.options = dict(client_options or {})
        self.write_timeout_s = write_timeout_s
        self.partition = TopicPartition(topic, 0)
        self.applied = -1  # offset of the last record applied
        self._changed = asyncio.Condition()
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._follower: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._ensure_topic()
        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", **self.options)
        await self._producer.start()
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                          group_id=None, **self.options)
        await self._consumer.start()
        self._consumer.assign([self.partition])
        await self._consumer.seek_to_beginning(self.partition)
        end = (await self._consumer.end_offsets([self.partition]))[self.partition]
        self._follower = asyncio.create_task(self._follow(), name="schemas-follower")
        await self.wait_applied(end - 1, timeout_s=self.write_timeout_s)
        log.info("schema registry read %s to offset %d: %d schemas, %d subjects", self.topic, end,
                 len(self.state.schemas), len(self.state.subjects))

    async def stop(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            await asyncio.gather(self._follower, return_exceptions=True)
        for client in (self._consumer, self._producer):
            if client is not None:
                await client.stop()

    async def _ensure_topic(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self.options)
        await admin.start()
        try:
            topic = NewTopic(self.topic, num_partitions=1, replication_factor=self.replication_factor,
                             topic_configs={"cleanup.policy": "compact"})
            await admin.create_topics([topic])
        except TopicAlreadyExistsError:
            pass
        finally:
            await admin.close()

    async def _follow(self) -> None:
        """Apply records as they come; a broker error is logged and retried (writes wait meanwhile, then time out)."""
        while True:
            try:
                await self._follow_once()
            except KafkaError as exc:
                log.warning("reading %s failed (%s); retrying in 1 s", self.topic, exc)
                await asyncio.sleep(1.0)

    async def _follow_once(self) -> None:
        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(self.partition, timeout_ms=500)
            messages = batches.get(self.partition, [])
            for message in messages:
                record = Record.decode(message.key, message.value)
                if record is not None and not self.state.apply(record):
                    log.warning("refused %s at offset %d (an id already names another schema)", record.key, message.offset)
            if messages:
                async with self._changed:
                    self.applied = messages[-1].offset
                    self._changed.notify_all()
            else:
                # An empty fetch at the end: position says how far the topic goes (compaction leaves gaps).
                position = await self._consumer.position(self.partition)
                if position - 1 > self.applied:
                    async with self._changed:
                        self.applied = position - 1
                        self._changed.notify_all()

    async def wait_applied(self, offset: int, *, timeout_s: float) -> None:
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self.applied >= offset)
        try:
            await asyncio.wait_for(reached(), timeout_s)
        except TimeoutError:
            raise RegistryError(ErrorCode.STORE_TIMEOUT, f"{self.topic} not read to offset {offset} in time") from None

    async def read_to_end(self) -> None:
        """Wait until every record in the topic now has been applied (a new leader does, before it writes)."""
        assert self._consumer is not None
        end = (await self._consumer.end_offsets([self.partition]))[self.partition]
        await self.wait_applied(end - 1, timeout_s=self.write_timeout_s)

    async def write(self, records: Sequence[Record]) -> None:
        """Produce `records` in order and wait until the follower has applied them."""
        if not records:
            return
        assert self._producer is not None
        try:
            futures = [await self._producer.send(self.topic, key=r.key_bytes(), value=r.value_bytes(), partition=0)
                       for r in records]
            last = (await asyncio.gather(*futures))[-1]
        except KafkaError as exc:
            raise RegistryError(ErrorCode.STORE_ERROR, f"Error writing to {self.topic}: {exc}") from exc
        await self.wait_applied(last.offset, timeout_s=self.write_timeout_s)
