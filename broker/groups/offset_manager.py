"""OffsetManager: committed offsets over __consumer_offsets (Kafka's OffsetMetadataManager).

OffsetCommit: the group (either protocol, `group_manager`) checks the member (generation or
member epoch), the offsets are appended, and only once they are durable do they become the
group's committed offsets and is the commit answered. A group id nobody manages (generation -1)
gets an Empty classic group that keeps offsets only.

Transactional offsets (KIP-98, KIP-447): TxnOffsetCommit appends the offsets inside the
producer's transaction and keeps them pending under (producer id, group) (`offsets.
PendingTxnOffsets`); `complete_txn`, called when the transaction coordinator's marker lands in the
group's __consumer_offsets partition, makes them committed (COMMIT) or drops them (ABORT).
OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition with a pending
transactional offset. Offsets are shared by both group types: a consumer group (KIP-848) checks
commits and fetches by member epoch.

The decisions are in the pure `offsets` module; this one adds the gate, the appends and the groups.
"""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.consumer_group import ConsumerGroup
from tinystream.broker.groups.errors import offset_commit_error
from tinystream.broker.groups.group import Group
from tinystream.broker.groups.group_manager import GroupManager
from tinystream.broker.groups.offsets import (
    OffsetRequest,
    PendingTxnOffsets,
    TopicPartitionOffsets,
    accept_commit,
    commit_records,
    fetch_answer,
)
from tinystream.broker.groups.replay import PartitionReplay
from tinystream.broker.groups.results import FetchOffsetsResult
from tinystream.broker.groups.runtime import CoordinatorRuntime

__all__ = ["OffsetManager"]

_OK = ErrorCode.none
# A transactional append refused for the producer itself: the client must see that, not a coordinator error.
_PRODUCER_ERRORS = (ErrorCode.invalid_producer_epoch, ErrorCode.invalid_txn_state)


class OffsetManager:
    """Committed and pending transactional offsets of the groups coordinated here."""

    def __init__(self, *, runtime: CoordinatorRuntime, groups: GroupManager, metadata_max_bytes: int) -> None:
        self._runtime = runtime
        self._groups = groups
        self._metadata_max = metadata_max_bytes
        self._pending = PendingTxnOffsets()

    # ================================================================ loading, unloading

    def install(self, replay: PartitionReplay) -> None:
        """Transactions still open in a partition just loaded."""
        for producer_id, group_id, offsets in replay.open_transactions():
            self._pending.install(producer_id, group_id, offsets)

    def loaded(self, partition: int) -> None:
        """The partition is loaded: markers that landed meanwhile complete now, in arrival order."""
        for producer_id, commit in self._pending.take_deferred(partition):
            self.complete_txn(partition, producer_id, commit)

    def unload(self, partition: int) -> None:
        self._pending.drop(lambda gid: self._runtime.partition(gid) == partition)
        self._pending.drop_deferred(partition)

    # ================================================================ OffsetCommit

    async def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: OffsetRequest,
        api_version: int = 9,
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit: (offset, leader epoch, metadata) per partition; answered once durable.

        For a consumer group (KIP-848) `generation_id` is the member epoch (OffsetCommit v9+).
        """
        error = self._runtime.status(group_id, allow_empty_id=True)
        cgroup = self._groups.consumer_group(group_id) if error is _OK else None
        if cgroup is not None:
            error = cgroup.validate_commit(member_id=member_id, member_epoch=generation_id, api_version=api_version)
            if error is not _OK:
                return {tp: error for tp in offsets}
            results = await self._store_offsets(group_id, cgroup, offsets)
            self._groups.reschedule(cgroup)
            return results
        group = self._groups.classic(group_id)
        if error is _OK and group is None:
            if generation_id < 0:
                # Not using group management (standalone consumer): keep offsets only.
                group = self._groups.new_group(group_id)
            else:
                # Kafka: a member of a generation of a group we do not know.
                error = ErrorCode.illegal_generation
        now = self._runtime.clock()
        if error is _OK and group is not None:
            error = group.validate_commit(
                member_id=member_id,
                group_instance_id=group_instance_id,
                generation_id=generation_id,
                now=now,
            )
        if error is not _OK or group is None:
            if group is not None:
                self._groups.discard_if_pristine(group)
            return {tp: error for tp in offsets}
        results = await self._store_offsets(group_id, group, offsets)
        self._groups.reschedule(group)
        self._groups.discard_if_pristine(group)
        return results

    async def _store_offsets(
        self, group_id: str, group: Group | ConsumerGroup, offsets: OffsetRequest
    ) -> dict[tuple[str, int], ErrorCode]:
        """Append the offsets, then make them the group's committed offsets; the error per partition."""
        results, accepted = accept_commit(offsets, metadata_max=self._metadata_max, now=self._runtime.clock())
        if accepted:
            append = self._runtime.append(self._runtime.partition(group_id), commit_records(group_id, accepted))
            append_error = await self._runtime.await_append(append)
            if append_error is _OK:
                if self._groups.lookup(group_id) is group:
                    group.apply_offsets(accepted)
            else:
                mapped = offset_commit_error(append_error)
                for tp in accepted:
                    results[tp] = mapped
        return {tp: results[tp] for tp in offsets}

    # ================================================================ TxnOffsetCommit and markers

    async def txn_offset_commit(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: OffsetRequest,
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: offsets appended inside the producer's transaction, visible on its COMMIT marker.

        KIP-447: a generation / member id, when given, is checked as for
        OffsetCommit; without one (generation -1) any group may be written,
        and an unknown group is created (Kafka's getOrMaybeCreateGroup).
        """
        group, error, now = self._txn_commit_group(group_id, generation_id=generation_id, member_id=member_id,
                                                   group_instance_id=group_instance_id)
        if error is not _OK or group is None:
            if isinstance(group, Group):
                self._groups.discard_if_pristine(group)
            return {tp: error for tp in offsets}
        results, accepted = accept_commit(offsets, metadata_max=self._metadata_max, now=now)
        if accepted:
            append = self._runtime.append_transactional(
                self._runtime.partition(group_id), commit_records(group_id, accepted),
                producer_id=producer_id, producer_epoch=producer_epoch,
            )
            append_error = await self._runtime.await_append(append)
            if append_error is _OK:
                self._pending.add(producer_id, group_id, accepted)
            else:
                mapped = append_error if append_error in _PRODUCER_ERRORS else offset_commit_error(append_error)
                for tp in accepted:
                    results[tp] = mapped
        self._groups.reschedule(group)
        return {tp: results[tp] for tp in offsets}

    def _txn_commit_group(
        self, group_id: str, *, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> tuple[Group | ConsumerGroup | None, ErrorCode, int]:
        """The group a TxnOffsetCommit writes to (made if unknown), the gate's error, and the time
        the commit is stamped with: a member that names itself is checked like an OffsetCommit's
        (a consumer group's by member epoch)."""
        error = self._runtime.status(group_id, allow_empty_id=False)
        group: Group | ConsumerGroup | None = self._groups.lookup(group_id)
        if error is _OK and group is None:
            group = self._groups.new_group(group_id)
        now = self._runtime.clock()
        if error is _OK and isinstance(group, ConsumerGroup):
            error = group.validate_commit(member_id=member_id, member_epoch=generation_id, api_version=9,
                                          transactional=True, instance_id=group_instance_id)
        elif error is _OK and isinstance(group, Group) and generation_id >= 0:
            error = group.validate_commit(
                member_id=member_id, group_instance_id=group_instance_id, generation_id=generation_id, now=now
            )
        return group, error, now

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> int:
        """The marker of `producer_id`'s transaction is in __consumer_offsets-`partition`:
        apply (COMMIT) or drop (ABORT) its pending offsets there; returns how many groups changed.

        While the partition is loading the completion waits for the load's end: the load's read of
        the log may have stopped before this marker, and its pending offsets are not installed yet.
        """
        if self._runtime.is_loading(partition):
            self._pending.defer(partition, producer_id, commit)
            return 0
        done = self._pending.take(producer_id, lambda gid: self._runtime.partition(gid) == partition)
        if commit:
            for gid, offsets in done.items():
                self._apply_committed(gid, offsets)
        return len(done)

    def _apply_committed(self, group_id: str, offsets: TopicPartitionOffsets) -> None:
        """A committed transaction's offsets become the group's, if the group is still here."""
        group = self._groups.lookup(group_id)
        if group is not None:
            group.apply_offsets(offsets)
            self._groups.reschedule(group)

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        return self._pending.has_pending(group_id, tp)

    # ================================================================ OffsetFetch, lag

    async def fetch_offsets(
        self,
        *,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchOffsetsResult:
        """OffsetFetch; `partitions=None` means every partition the group committed.

        require_stable (KIP-447): a partition with a pending transactional
        offset answers UNSTABLE_OFFSET_COMMIT (retriable) instead of an offset.
        A member of a consumer group (OffsetFetch v9+) is checked by its member epoch.
        """
        error = self._runtime.status(group_id, allow_empty_id=True)
        group = self._groups.lookup(group_id) if error is _OK else None
        if isinstance(group, ConsumerGroup):
            error = group.validate_fetch(member_id=member_id, member_epoch=member_epoch)
        if error is not _OK:
            return FetchOffsetsResult(error=error)
        committed = group.offsets if group is not None else {}
        return fetch_answer(committed, partitions,
                            unstable=lambda tp: require_stable and self._pending.has_pending(group_id, tp))

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        """Committed offsets of a group coordinated here (for lag reporting); {} otherwise."""
        group = self._groups.lookup(group_id)
        if group is None or not self._runtime.is_loaded(self._runtime.partition(group_id)):
            return {}
        return {tp: c.offset for tp, c in group.offsets.items()}
