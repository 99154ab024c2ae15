"""Topic admin requests of a broker under a controller: forwarded, answered once applied here.

CreateTopics, DeleteTopics, CreatePartitions and the config alters go to the
controller (KIP-590's forwarding, over the controller API); the answer waits
until this broker has applied the image that holds the change, so a client
that then asks this broker for Metadata sees it. A controller refusal comes
back as its Kafka error code. Preferred elections, reassignments, client
quota and dynamic broker config changes go the same way. `handlers/shared/topic_routing.py` picks this or the
standalone `TopicManager`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from tinystream.broker.broker_configs.dynamic import Change, Op
from tinystream.broker.control.image import topic_spec
from tinystream.broker.control.session import ControllerSession
from tinystream.broker.errors import ErrorCode
from tinystream.broker.metadata.cluster import ClusterView
from tinystream.broker.metadata.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from tinystream.broker.quotas.entities import Entity
from tinystream.broker.topics.manager import (
    OFFSETS_TOPIC_CONFIG,
    TRANSACTION_STATE_TOPIC_CONFIG,
    TopicManager,
    TopicResult,
)
from tinystream.config.settings import BrokerSettings
from tinystream.controller_client import ControllerClient, ControllerClientError


def error_code(exc: ControllerClientError) -> ErrorCode:
    """The Kafka error code a controller refusal names (by name first, then number)."""
    name = (exc.error or "").lower()
    try:
        return ErrorCode[name]
    except KeyError:
        if exc.code is not None:
            with contextlib.suppress(ValueError):
                return ErrorCode(exc.code)
        return ErrorCode.unknown_server_error


class ForwardedTopicAdmin:
    """The topic admin of a broker under a controller (the same calls as `TopicManager`'s)."""

    def __init__(
        self,
        *,
        settings: BrokerSettings,
        controller: ControllerClient,
        session: ControllerSession,
        cluster: ClusterView,
        topics: TopicManager,
    ) -> None:
        self.settings = settings
        self.controller = controller
        self.session = session
        self.cluster = cluster
        self.topics = topics

    async def _forward(self, name: str, call: Awaitable[Any], *, validate_only: bool = False) -> TopicResult:
        try:
            reply = await call
        except ControllerClientError as exc:
            return TopicResult(error_code(exc), exc.message)
        if not validate_only and not await self.session.wait_for_version(reply.metadata_version):
            return TopicResult(ErrorCode.request_timed_out, "the change did not reach this broker in time")
        spec = self.topics.get(name)
        if validate_only and getattr(reply, "topic", None) is not None:
            t = reply.topic
            spec = topic_spec(name=t.name, topic_id=t.topic_id, replicas=[p.replicas for p in t.partitions],
                              config=dict(t.config))
        return TopicResult(ErrorCode.none, spec=spec)

    async def elect_preferred_leaders(self, partitions: list[tuple[str, int]]) -> tuple[ErrorCode, str | None]:
        """ElectLeaders (preferred): the controller moves each leader to its first replica where that one
        is in sync; answered once this broker applied the result."""
        try:
            reply = await self.controller.elect_preferred_leaders(partitions)
        except ControllerClientError as exc:
            return error_code(exc), exc.message
        if not await self.session.wait_for_version(reply.metadata_version):
            return ErrorCode.request_timed_out, "the election did not reach this broker in time"
        return ErrorCode.none, None

    async def reassign_partitions(self, assignments: Mapping[tuple[str, int], tuple[int, ...] | None]
                                  ) -> tuple[ErrorCode, str | None]:
        """AlterPartitionReassignments (KIP-455): the controller starts (or, for None, cancels) each move,
        all or none; answered once this broker applied the result."""
        try:
            reply = await self.controller.reassign_partitions(assignments)
        except ControllerClientError as exc:
            return error_code(exc), exc.message
        if not await self.session.wait_for_version(reply.metadata_version):
            return ErrorCode.request_timed_out, "the reassignment did not reach this broker in time"
        return ErrorCode.none, None

    async def alter_client_quotas(self, changes: Sequence[tuple[Entity, Sequence[tuple[str, float, bool]]]], *,
                                  validate_only: bool = False) -> tuple[ErrorCode, str | None]:
        """AlterClientQuotas (KIP-546): the controller changes the quotas in its image, all or none; answered
        once this broker applied the result (so a DescribeClientQuotas here then shows it)."""
        alterations = [{"entity": entity.to_json(),
                        "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]} for entity, ops in changes]
        try:
            reply = await self.controller.alter_client_quotas(alterations, validate_only=validate_only)
        except ControllerClientError as exc:
            return error_code(exc), exc.message
        if not validate_only and not await self.session.wait_for_version(reply.metadata_version):
            return ErrorCode.request_timed_out, "the quota change did not reach this broker in time"
        return ErrorCode.none, None

    async def alter_broker_configs(self, resource: str, changes: Sequence[Change], *,
                                   validate_only: bool = False) -> tuple[ErrorCode, str | None]:
        """IncrementalAlterConfigs on one BROKER resource ("" the cluster default, else a broker id): the
        controller changes its image, all or none; answered once this broker applied the result (so a
        DescribeConfigs here then shows it)."""
        ops = [{"key": c.key, "op": Op(c.op).name, "value": c.value}
               for c in changes]
        try:
            reply = await self.controller.alter_broker_configs([{"resource": resource, "ops": ops}],
                                                               validate_only=validate_only)
        except ControllerClientError as exc:
            return error_code(exc), exc.message
        if not validate_only and not await self.session.wait_for_version(reply.metadata_version):
            return ErrorCode.request_timed_out, "the broker config change did not reach this broker in time"
        return ErrorCode.none, None

    async def _refresh(self) -> None:
        with contextlib.suppress(ControllerClientError):
            await self.session.pull(wait_ms=0)

    async def create_topic(
        self,
        name: str,
        *,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        assignments: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicResult:
        replica_assignment = [assignments[i] for i in sorted(assignments)] if assignments else None
        return await self._forward(name, self.controller.create_topic(
            name,
            partitions=None if num_partitions == -1 or replica_assignment else num_partitions,
            replication_factor=None if replication_factor == -1 or replica_assignment else replication_factor,
            config={k: v for k, v in (configs or {}).items() if v is not None},
            replica_assignment=replica_assignment,
            validate_only=validate_only,
        ), validate_only=validate_only)

    async def auto_create(self, name: str) -> TopicResult:
        if name == OFFSETS_TOPIC:
            return await self.ensure_offsets_topic()
        if name == TRANSACTION_STATE_TOPIC:
            return await self.ensure_transaction_state_topic()
        result = await self.create_topic(name)
        if result.error == ErrorCode.topic_already_exists:
            await self.session.pull(wait_ms=0)
            return TopicResult(ErrorCode.none, spec=self.topics.get(name))
        return result

    async def ensure_offsets_topic(self) -> TopicResult:
        spec = self.topics.get(OFFSETS_TOPIC)
        if spec is not None:
            return TopicResult(ErrorCode.none, spec=spec)
        live = len(self.cluster.brokers())
        result = await self._forward(OFFSETS_TOPIC, self.controller.create_topic(
            OFFSETS_TOPIC,
            partitions=self.settings.offsets_topic_num_partitions,
            replication_factor=max(min(self.settings.offsets_topic_replication_factor, live), 1),
            config=OFFSETS_TOPIC_CONFIG,
        ))
        if result.error == ErrorCode.topic_already_exists:
            await self._refresh()
            return TopicResult(ErrorCode.none, spec=self.topics.get(OFFSETS_TOPIC))
        return result

    async def ensure_transaction_state_topic(self) -> TopicResult:
        spec = self.topics.get(TRANSACTION_STATE_TOPIC)
        if spec is not None:
            return TopicResult(ErrorCode.none, spec=spec)
        live = len(self.cluster.brokers())
        result = await self._forward(TRANSACTION_STATE_TOPIC, self.controller.create_topic(
            TRANSACTION_STATE_TOPIC,
            partitions=self.settings.transaction_state_log_num_partitions,
            replication_factor=max(min(self.settings.transaction_state_log_replication_factor, live), 1),
            config=TRANSACTION_STATE_TOPIC_CONFIG,
        ))
        if result.error == ErrorCode.topic_already_exists:
            await self._refresh()
            return TopicResult(ErrorCode.none, spec=self.topics.get(TRANSACTION_STATE_TOPIC))
        return result

    async def delete_topic(self, name: str) -> TopicResult:
        spec = self.topics.get(name)
        result = await self._forward(name, self.controller.delete_topic(name))
        return TopicResult(result.error, result.message, spec if result.error == ErrorCode.none else None)

    async def create_partitions(
        self, name: str, count: int, *, assignments: list[list[int]] | None = None, validate_only: bool = False
    ) -> TopicResult:
        return await self._forward(name, self.controller.create_partitions(
            name, count=count, replica_assignment=assignments, validate_only=validate_only,
        ), validate_only=validate_only)

    async def set_configs(self, name: str, overrides: Mapping[str, str], *, validate_only: bool = False) -> TopicResult:
        """Replace the topic's overrides (AlterConfigs / IncrementalAlterConfigs computed the whole set)."""
        return await self._forward(name, self.controller.alter_topic_config(
            name, dict(overrides), replace=True, validate_only=validate_only,
        ), validate_only=validate_only)
