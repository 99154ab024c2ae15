"""Fixtures for the group coordinator tests: a manual clock, an in-memory
__consumer_offsets and a harness that drives members through the protocol."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups import GroupCoordinator, InMemoryOffsetsTopic, JoinGroupResult, SyncGroupResult
from tinystream.broker.groups.timers import ManualScheduler

NUM_PARTITIONS = 4
SESSION_MS = 10_000
REBALANCE_MS = 30_000
INITIAL_DELAY_MS = 3_000


class Harness:
    """One coordinator over one topic, time moved by hand."""

    NUM_PARTITIONS = NUM_PARTITIONS
    SESSION_MS = SESSION_MS
    REBALANCE_MS = REBALANCE_MS
    INITIAL_DELAY_MS = INITIAL_DELAY_MS

    def __init__(self, sched: ManualScheduler, topic: InMemoryOffsetsTopic) -> None:
        self.sched = sched
        self.topic = topic
        self._ids = itertools.count(1)
        self.coord = self.new_coordinator()

    def new_coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(
            offsets_topic=self.topic,
            num_partitions=NUM_PARTITIONS,
            clock=self.sched.now,
            scheduler=self.sched,
            initial_rebalance_delay_ms=INITIAL_DELAY_MS,
            member_id_factory=lambda client_id: f"{client_id}-m{next(self._ids)}",
        )

    async def start(self, coord: GroupCoordinator | None = None) -> GroupCoordinator:
        coord = coord or self.coord
        for p in range(NUM_PARTITIONS):
            await coord.load_partition(p)
        await coord.start()
        return coord

    async def restart(self) -> GroupCoordinator:
        """Stop this coordinator and bring up a new one over the same topic."""
        await self.coord.stop()
        self.coord = self.new_coordinator()
        return await self.start()

    @staticmethod
    async def settle() -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def advance(self, ms: int) -> None:
        await self.settle()
        self.sched.advance(ms)
        await self.settle()

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        client_id: str = "c",
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        require_known: bool = False,
    ) -> asyncio.Task[JoinGroupResult]:
        return asyncio.create_task(
            self.coord.join_group(
                group_id=group,
                member_id=member_id,
                group_instance_id=instance,
                protocol_type=protocol_type,
                protocols=protocols if protocols is not None else [("range", b"sub-" + client_id.encode())],
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                client_id=client_id,
                client_host="/127.0.0.1",
                require_known_member_id=require_known,
            )
        )

    def sync(
        self,
        result: JoinGroupResult,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
        generation: int | None = None,
    ) -> asyncio.Task[SyncGroupResult]:
        return asyncio.create_task(
            self.coord.sync_group(
                group_id=group,
                generation_id=result.generation_id if generation is None else generation,
                member_id=result.member_id,
                group_instance_id=instance,
                protocol_type="consumer",
                protocol_name=result.protocol_name,
                assignments=list((assignments or {}).items()),
            )
        )

    async def heartbeat(self, result: JoinGroupResult, *, group: str = "g", instance: str | None = None) -> ErrorCode:
        return await self.coord.heartbeat(
            group_id=group, generation_id=result.generation_id, member_id=result.member_id, group_instance_id=instance
        )

    async def form(
        self, clients: list[str], *, group: str = "g", instances: list[str | None] | None = None
    ) -> tuple[list[JoinGroupResult], list[SyncGroupResult]]:
        """Join `clients` together, let the initial delay pass, sync with the
        leader assigning b"assign-<client>" to each. Returns (joins, syncs)."""
        instances = instances or [None] * len(clients)
        tasks = [self.join(group=group, client_id=c, instance=i) for c, i in zip(clients, instances)]
        await self.settle()
        for _ in range(REBALANCE_MS // INITIAL_DELAY_MS + 1):
            if all(t.done() for t in tasks):
                break
            await self.advance(INITIAL_DELAY_MS)
        joins = [t.result() for t in tasks]
        assert all(j.error is ErrorCode.none for j in joins), joins
        leader = joins[0].leader
        assignments = {j.member_id: b"assign-" + c.encode() for j, c in zip(joins, clients)}
        sync_tasks = [
            self.sync(j, assignments if j.member_id == leader else None, group=group, instance=i)
            for j, i in zip(joins, instances)
        ]
        await self.settle()
        syncs = [t.result() for t in sync_tasks]
        return joins, syncs


@pytest.fixture
def sched() -> ManualScheduler:
    return ManualScheduler()


@pytest.fixture
def topic() -> InMemoryOffsetsTopic:
    return InMemoryOffsetsTopic()


@pytest.fixture
async def h(sched: ManualScheduler, topic: InMemoryOffsetsTopic):
    harness = Harness(sched, topic)
    await harness.start()
    yield harness
    await harness.coord.stop()


_HERE = __file__.rsplit("/", 1)[0]


def pytest_collection_modifyitems(items) -> None:
    """A parked request that is never answered must fail the test fast, not hang it."""
    for item in items:
        if str(item.fspath).startswith(_HERE) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(10))
