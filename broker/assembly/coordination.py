"""Stage 4: the group and transaction coordinators (transactions need groups: TxnOffsetCommit and the
markers on __consumer_offsets)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinystream.broker.assembly.storage import Storage
from tinystream.broker.coordinators.group_service import GroupService
from tinystream.broker.coordinators.producer_ids import ProducerIdManager
from tinystream.broker.coordinators.txn_service import TransactionService
from tinystream.config.settings import BrokerSettings


@dataclass(frozen=True, slots=True)
class Coordination:
    groups: GroupService | None  # None: a broker built without a group coordinator (tests)
    transactions: TransactionService | None

    async def start(self, *, local: bool) -> None:
        """Local: load every coordinator partition now; under a controller they load as leadership comes."""
        if self.groups is not None:
            if local:
                await self.groups.start()
            else:
                await self.groups.coordinator.start()
        if self.transactions is not None:
            await self.transactions.start(load_local=local)

    async def stop(self) -> None:
        if self.transactions is not None:
            await self.transactions.stop()
        if self.groups is not None:
            await self.groups.stop()


def build_coordination(settings: BrokerSettings, storage: Storage, producer_ids: ProducerIdManager, *,
                       clock: Callable[[], int], with_groups: bool) -> Coordination:
    if not with_groups:
        return Coordination(groups=None, transactions=None)
    groups = GroupService(settings=settings, topics=storage.topics, replicas=storage.replicas, clock=clock)
    transactions = TransactionService(
        settings=settings, topics=storage.topics, replicas=storage.replicas, cluster=storage.cluster,
        producer_ids=lambda: producer_ids, groups=groups, clock=clock,
    )
    return Coordination(groups=groups, transactions=transactions)
