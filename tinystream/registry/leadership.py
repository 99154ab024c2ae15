"""Who writes `_schemas`: one instance alone, or the leader a Kafka consumer group elects among several.

`Standalone` is today's single instance: it always writes. `GroupLeadership`
joins a consumer group on the cluster (aiokafka's group client: JoinGroup,
SyncGroup, Heartbeat through the broker's coordinator) with its own
assignment protocol, `tinystream-registry`: members send election.py's
metadata, the group leader's client runs `choose_leader`, and every member
reads the choice from its assignment. No partitions are assigned; the group
is only the election and the liveness check (a member that stops
heartbeating is out after the session timeout, a stopped one leaves at once).

Why a group and not a claim record in `_schemas`: the broker already does the
liveness part (session timeouts, generations), so nothing here writes
heartbeats into the compacted topic, and Confluent's registry elects the same
way. A member that becomes leader reads `_schemas` to its end before it
writes (`catch_up`), so the ids it allocates follow every id already there.
While a rebalance runs (revocation until assignment) no one is leader here,
and writes wait up to `wait_s` for one. A leader cut off from the group may
still believe it leads until it notices (at most a session timeout); two
writers are then possible, and the topic's first-record-wins rule in
state.py keeps ids unique anyway (the loser's record is refused by every
reader and its writer plans again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError

from tinystream.registry.election import (
    PROTOCOL_VERSION,
    assignment_data,
    choose_leader,
    member_metadata,
    parse_assignment,
    parse_member,
)

log = logging.getLogger(__name__)

GROUP_ID = "schema-registry"  # Confluent's schema.registry.group.id default
ASSIGNMENT_PROTOCOL = "tinystream-registry"


class Standalone:
    """One instance, or instances that each write (no group): this one always writes."""

    def __init__(self) -> None:
        self.own_url = ""

    async def start(self, own_url: str) -> None:
        self.own_url = own_url

    async def stop(self) -> None:
        pass

    @property
    def leader_url(self) -> str | None:
        return self.own_url or None

    async def writer(self, wait_s: float) -> str | None:
        return self.own_url


class GroupLeadership:
    def __init__(self, *, bootstrap: str, group_id: str, topic: str, eligible: bool,
                 catch_up: Callable[[], Awaitable[None]], client_options: dict[str, Any] | None = None,
                 session_timeout_ms: int = 10_000) -> None:
        self.bootstrap, self.group_id, self.topic, self.eligible = bootstrap, group_id, topic, eligible
        self.options = dict(client_options or {})
        self.session_timeout_ms = session_timeout_ms
        self._catch_up = catch_up
        self.own_url = ""
        self.leader_url: str | None = None  # set once known (and, when it is this one, once caught up)
        self._last_leader: str | None = None  # sent as `seen_leader` so that a join keeps the leader
        self._known = asyncio.Event()
        self._generation = 0
        self._consumer: AIOKafkaConsumer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, own_url: str) -> None:
        self.own_url = own_url
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group_id, enable_auto_commit=False,
            partition_assignment_strategy=(self._assignor(),), session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=max(100, self.session_timeout_ms // 5), **self.options)
        await self._consumer.start()
        self._consumer.subscribe([self.topic], listener=_Rebalance(self))
        self._spawn(self._keep_polling())

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._consumer is not None:
            await self._consumer.stop()  # LeaveGroup: the others elect at once
        self._consumer = None

    async def writer(self, wait_s: float) -> str | None:
        """The leader's URL, waiting up to `wait_s` while none is known; None if still none."""
        if self.leader_url is None:
            try:
                await asyncio.wait_for(self._known.wait(), wait_s)
            except TimeoutError:
                return None
        return self.leader_url

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _keep_polling(self) -> None:
        """aiokafka leaves the group of a consumer not polled for max.poll.interval.ms; nothing is assigned, so
        this returns empty every second."""
        assert self._consumer is not None
        while True:
            try:
                await self._consumer.getmany(timeout_ms=1000)
            except KafkaError as exc:
                log.warning("registry group %s: %s; retrying", self.group_id, exc)
                await asyncio.sleep(1.0)

    # -- called by aiokafka's group coordinator ---------------------------------------------
    def _revoked(self) -> None:
        """A rebalance began: until the new assignment, nobody is known to lead."""
        self._generation += 1
        self.leader_url = None
        self._known.clear()

    def _assigned(self, leader: str | None) -> None:
        self._revoked()
        self._last_leader = leader
        if leader is None:
            log.warning("registry group %s: no member may lead; writes are refused (50004)", self.group_id)
        elif leader == self.own_url:
            self._spawn(self._lead(self._generation))
        else:
            log.info("registry group %s: leader is %s", self.group_id, leader)
            self.leader_url = leader
            self._known.set()

    async def _lead(self, generation: int) -> None:
        """Read `_schemas` to its end, then take writes (unless another rebalance came meanwhile)."""
        while generation == self._generation:
            try:
                await self._catch_up()
            except Exception as exc:  # a broker that does not answer yet: try again, writes wait meanwhile
                log.warning("registry leader could not read to the end (%s); retrying", exc)
                await asyncio.sleep(1.0)
                continue
            if generation == self._generation:
                log.info("registry group %s: this instance (%s) leads", self.group_id, self.own_url)
                self.leader_url = self.own_url
                self._known.set()
            return

    def _assignor(self) -> type[AbstractPartitionAssignor]:
        """An assignor class bound to this instance (aiokafka calls assignors through classmethods)."""
        election = self

        class LeaderAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
            name = ASSIGNMENT_PROTOCOL
            version = PROTOCOL_VERSION

            @classmethod
            def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
                data = member_metadata(election.own_url, eligible=election.eligible, seen_leader=election._last_leader)
                return ConsumerProtocolMemberMetadata(PROTOCOL_VERSION, sorted(topics), data)

            @classmethod
            def assign(cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata],
                       ) -> dict[str, ConsumerProtocolMemberAssignment]:
                leader = choose_leader([parse_member(member_id, meta.user_data) for member_id, meta in members.items()])
                data = assignment_data(leader)
                return {member_id: ConsumerProtocolMemberAssignment(PROTOCOL_VERSION, [], data) for member_id in members}

            @classmethod
            def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
                election._assigned(parse_assignment(assignment.user_data))

        return LeaderAssignor


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, leadership: GroupLeadership) -> None:
        self.leadership = leadership

    def on_partitions_revoked(self, revoked: object) -> None:
        self.leadership._revoked()

    def on_partitions_assigned(self, assigned: object) -> None:
        pass
