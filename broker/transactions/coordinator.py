"""TransactionCoordinator: the asyncio layer over the pure transaction state machine.

Flow of one request (Kafka's TransactionCoordinator, TV1): check that this
broker coordinates the transactional id (its __transaction_state partition is
loaded here), ask the pure `TransactionMetadata` for a decision, append the
transit it returns to __transaction_state (acks=all, through `TxnStateLog`),
apply it, answer.

EndTxn answers once PrepareCommit / PrepareAbort is durable; the markers
then go out in the background (`MarkerWriter`: WriteTxnMarkers to every
partition leader of the transaction, retried until each is written or the
coordinator loses the partition), and CompleteCommit / CompleteAbort is
written last. Until then the id answers CONCURRENT_TRANSACTIONS, which
clients retry.

Failover: loading a partition rebuilds every id from its last value; one
found in PrepareCommit / PrepareAbort has its markers sent again (markers
are idempotent for a partition: a second COMMIT for a closed transaction
changes nothing), so a coordinator crash between prepare and complete still
finishes the transaction. Ongoing ones are aborted when they time out.

Timeouts: every `abort_check_interval_ms`, Ongoing transactions older than
their timeout are fenced (epoch + 1) and aborted, as Kafka's
abortTimedOutTransactions does; transactional ids idle past
transactional.id.expiration.ms with nothing open are forgotten (a tombstone
in __transaction_state, so the compacted topic and the coordinator's memory
do not grow with every id ever used).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from tinystream.broker.errors import ErrorCode
from tinystream.broker.transactions.errors import RecordDecodeError, TxnLogError, append_error_for_client
from tinystream.broker.transactions.records import decode_key, decode_value, encode_key, encode_value
from tinystream.broker.transactions.state import (
    TopicPartitionKey,
    TransactionMetadata,
    TxnState,
    TxnTransit,
)

__all__ = ["MarkerWriter", "TransactionCoordinator", "TxnDescription", "TxnStateLog"]

log = logging.getLogger(__name__)

_OK = ErrorCode.none
Record = tuple[bytes, bytes | None]

#: transaction.max.timeout.ms (Kafka's default: 15 minutes).
MAX_TIMEOUT_MS = 900_000
#: transaction.abort.timed.out.transaction.cleanup.interval.ms (Kafka: 10 s).
ABORT_CHECK_INTERVAL_MS = 10_000
#: transactional.id.expiration.ms (Kafka: 7 days).
ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000
_MARKER_RETRY_S = 0.1
_MARKER_DONE = {ErrorCode.none, ErrorCode.unknown_topic_or_partition}  # a deleted topic has nothing to mark
_MARKER_GIVE_UP = {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced}


class TxnStateLog(Protocol):
    """The __transaction_state partitions as the coordinator sees them."""

    async def append(self, partition: int, records: list[Record]) -> None:
        """Write `records` as one batch; return once durable; raise TxnLogError(code) otherwise."""
        ...

    def read(self, partition: int) -> Iterable[Record]:
        """Every record of `partition` in offset order, for loading."""
        ...


class MarkerWriter(Protocol):
    async def write_markers(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: list[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """Write a COMMIT/ABORT marker to each partition through its leader; an error code per partition."""
        ...


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """DescribeTransactions / ListTransactions / the CLI."""

    transactional_id: str
    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    txn_start_ms: int
    partitions: tuple[TopicPartitionKey, ...]


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(
        self,
        *,
        state_log: TxnStateLog,
        markers: MarkerWriter,
        next_producer_id: Callable[[], Awaitable[int]],
        partition_for: Callable[[str], int],
        clock: Callable[[], int] = _wall_clock_ms,
        max_timeout_ms: int = MAX_TIMEOUT_MS,
        abort_check_interval_ms: int = ABORT_CHECK_INTERVAL_MS,
        id_expiration_ms: int = ID_EXPIRATION_MS,
    ) -> None:
        self._log = state_log
        self._markers = markers
        self._next_producer_id = next_producer_id
        self._partition_for = partition_for
        self._clock = clock
        self._max_timeout_ms = max_timeout_ms
        self._abort_check_s = abort_check_interval_ms / 1000
        self._id_expiration_ms = id_expiration_ms
        self._partitions: dict[int, int | None] = {}  # loaded partition -> coordinator epoch (None: loading)
        self._txns: dict[str, TransactionMetadata] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.Task[None] | None = None

    # ================================================================ lifecycle

    async def start(self) -> None:
        if self._timer is None:
            self._timer = asyncio.ensure_future(self._abort_loop())

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            await asyncio.gather(self._timer, return_exceptions=True)
            self._timer = None
        for partition in list(self._partitions):
            self.unload_partition(partition)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def load_partition(self, partition: int, coordinator_epoch: int) -> None:
        """Become coordinator for `partition` at `coordinator_epoch` (its leader epoch): rebuild from the log,
        then finish any transaction caught between prepare and complete."""
        if self._partitions.get(partition, -1) == coordinator_epoch:
            return
        self._drop_ids(partition)
        self._partitions[partition] = None
        values: dict[str, TxnTransit | None] = {}
        try:
            for key_bytes, value_bytes in self._log.read(partition):
                try:
                    txn_id = decode_key(key_bytes)
                    values[txn_id] = decode_value(value_bytes) if value_bytes is not None else None
                except RecordDecodeError as exc:
                    log.warning("__transaction_state-%d: skipping an unreadable record: %s", partition, exc)
        except Exception:
            self._partitions.pop(partition, None)
            raise
        if self._partitions.get(partition, -1) is not None:
            return  # unloaded or reloaded meanwhile
        for txn_id, transit in values.items():
            if transit is not None and transit.state is not TxnState.DEAD:
                self._txns[txn_id] = TransactionMetadata.from_transit(txn_id, transit)
        self._partitions[partition] = coordinator_epoch
        resumed = 0
        for meta in self._ids_of(partition):
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._spawn(self._finish(meta, coordinator_epoch))
                resumed += 1
        log.info("__transaction_state-%d loaded at coordinator epoch %d: %d transactional ids, %d to complete",
                 partition, coordinator_epoch, len(self._ids_of(partition)), resumed)

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition` (leadership moved): its ids are forgotten here."""
        self._partitions.pop(partition, None)
        self._drop_ids(partition)

    def owned_partitions(self) -> dict[int, int]:
        return {p: e for p, e in self._partitions.items() if e is not None}

    def _drop_ids(self, partition: int) -> None:
        for txn_id in [t for t in self._txns if self._partition_for(t) == partition]:
            del self._txns[txn_id]

    def _ids_of(self, partition: int) -> list[TransactionMetadata]:
        return [m for t, m in self._txns.items() if self._partition_for(t) == partition]

    def _status(self, transactional_id: str) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        partition = self._partition_for(transactional_id)
        if partition not in self._partitions:
            return ErrorCode.not_coordinator
        if self._partitions[partition] is None:
            return ErrorCode.coordinator_load_in_progress
        return _OK

    def _epoch_of(self, transactional_id: str) -> int:
        epoch = self._partitions.get(self._partition_for(transactional_id))
        return -1 if epoch is None else epoch

    # ================================================================ requests

    async def init_producer_id(
        self, *, transactional_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        error = self._status(transactional_id)
        if error is not _OK:
            return error, -1, -1
        if not 0 < timeout_ms <= self._max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, -1, -1
        meta = self._txns.get(transactional_id)
        new_id: int | None = None
        if meta is None or meta.epoch_exhausted:
            try:
                new_id = await self._next_producer_id()
            except Exception as exc:  # no id block now (controller away): retriable
                log.warning("no producer id for %r: %s", transactional_id, exc)
                return ErrorCode.coordinator_load_in_progress, -1, -1
            error = self._status(transactional_id)
            if error is not _OK:
                return error, -1, -1
            meta = self._txns.get(transactional_id)
            if meta is None:
                meta = TransactionMetadata(transactional_id, new_id, timeout_ms=timeout_ms, last_update_ms=self._clock())
                self._txns[transactional_id] = meta
        decision = meta.init_producer_id(
            timeout_ms=timeout_ms, expected_producer_id=producer_id, expected_epoch=producer_epoch,
            now=self._clock(), new_producer_id=new_id,
        )
        if decision.fence:
            await self._fence_and_abort(meta)
            return ErrorCode.concurrent_transactions, -1, -1
        if decision.transit is None:
            return decision.error, -1, -1
        error = await self._write(meta, decision.transit)
        if error is not _OK:
            return error, -1, -1
        return _OK, meta.producer_id, meta.producer_epoch

    async def add_partitions(
        self, *, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartitionKey]
    ) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's __consumer_offsets partition)."""
        error = self._status(transactional_id)
        if error is not _OK:
            return error
        meta = self._txns.get(transactional_id)
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping
        decision = meta.add_partitions(
            producer_id=producer_id, producer_epoch=producer_epoch, partitions=set(partitions), now=self._clock()
        )
        if decision.transit is None:
            return decision.error
        return await self._write(meta, decision.transit)

    def verify_partitions(
        self, *, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """KIP-890: is each partition part of the Ongoing transaction? (no write)."""
        error = self._status(transactional_id)
        meta = self._txns.get(transactional_id)
        if error is _OK and meta is None:
            error = ErrorCode.invalid_producer_id_mapping
        if error is not _OK or meta is None:
            return {tp: error for tp in partitions}
        return meta.verify_partitions(producer_id=producer_id, producer_epoch=producer_epoch, partitions=partitions)

    def coordinates(self, transactional_id: str) -> bool:
        """True when this coordinator has the id's partition loaded (a produce can be verified here)."""
        return self._status(transactional_id) is _OK

    async def end_txn(self, *, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        """EndTxn: answered once PrepareCommit/PrepareAbort is durable; markers follow."""
        error = self._status(transactional_id)
        if error is not _OK:
            return error
        meta = self._txns.get(transactional_id)
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping
        decision = meta.end_txn(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                now=self._clock())
        if decision.transit is None:
            return decision.error
        return await self._prepare_and_finish(meta, decision.transit)

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        error = self._status(transactional_id)
        if error is not _OK:
            return error, None
        meta = self._txns.get(transactional_id)
        if meta is None:
            return ErrorCode.transactional_id_not_found, None
        return _OK, self._describe(meta)

    def list_transactions(self) -> list[TxnDescription]:
        return [self._describe(m) for m in self._txns.values()]

    @staticmethod
    def _describe(meta: TransactionMetadata) -> TxnDescription:
        return TxnDescription(
            transactional_id=meta.transactional_id, state=meta.state, producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch, timeout_ms=meta.timeout_ms, txn_start_ms=meta.txn_start_ms,
            partitions=tuple(sorted(meta.partitions)),
        )

    # ================================================================ timeouts

    async def abort_timed_out(self) -> int:
        """Fence and abort every Ongoing transaction past its timeout; returns how many."""
        now = self._clock()
        expired = [m for t, m in self._txns.items() if self._status(t) is _OK and m.timed_out(now)]
        for meta in expired:
            log.info("transaction %r timed out after %d ms: aborting", meta.transactional_id, meta.timeout_ms)
            await self._fence_and_abort(meta)
        return len(expired)

    async def expire_transactional_ids(self) -> int:
        """Forget ids idle past transactional.id.expiration.ms (tombstone first); returns how many."""
        now = self._clock()
        expired = [m for t, m in self._txns.items() if self._status(t) is _OK and m.expired(now, self._id_expiration_ms)]
        forgotten = 0
        for meta in expired:
            txn_id = meta.transactional_id
            partition = self._partition_for(txn_id)
            epoch = self._partitions.get(partition)
            meta.prepare(TxnState.DEAD, event="expire", now=now)
            try:
                await self._log.append(partition, [(encode_key(txn_id), None)])
            except Exception as exc:
                log.warning("expiring transactional id %r failed: %s", txn_id, exc)
                meta.abandon()
                continue
            if self._partitions.get(partition) == epoch and self._txns.get(txn_id) is meta:
                del self._txns[txn_id]
                forgotten += 1
        return forgotten

    async def _abort_loop(self) -> None:
        while True:
            await asyncio.sleep(self._abort_check_s)
            try:
                await self.abort_timed_out()
                await self.expire_transactional_ids()
            except Exception:
                log.exception("aborting timed-out transactions or expiring ids failed")

    # ================================================================ internals

    async def _fence_and_abort(self, meta: TransactionMetadata) -> None:
        """Bump the epoch of an Ongoing transaction (fencing its producer) and abort it."""
        if meta.state is TxnState.ONGOING and meta.pending is None:
            meta.fence()
        decision = meta.end_txn(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, commit=False,
                                now=self._clock(), from_client=False)
        if decision.transit is not None:
            await self._prepare_and_finish(meta, decision.transit)

    async def _prepare_and_finish(self, meta: TransactionMetadata, transit: TxnTransit) -> ErrorCode:
        epoch = self._epoch_of(meta.transactional_id)
        error = await self._write(meta, transit)
        if error is _OK:
            self._spawn(self._finish(meta, epoch))
        return error

    async def _write(self, meta: TransactionMetadata, transit: TxnTransit) -> ErrorCode:
        """Append the transit; apply it when durable (and this broker still coordinates the id)."""
        txn_id = meta.transactional_id
        partition = self._partition_for(txn_id)
        epoch = self._partitions.get(partition)
        try:
            await self._log.append(partition, [(encode_key(txn_id), encode_value(transit))])
        except TxnLogError as exc:
            meta.abandon()
            return append_error_for_client(exc.error)
        except Exception:
            log.exception("writing the state of %r failed", txn_id)
            meta.abandon()
            return ErrorCode.unknown_server_error
        if self._partitions.get(partition) != epoch or self._txns.get(txn_id) is not meta:
            meta.abandon()
            return ErrorCode.not_coordinator
        meta.complete(transit)
        return _OK

    async def _finish(self, meta: TransactionMetadata, coordinator_epoch: int) -> None:
        """Send the markers of a prepared transaction until all are written, then write Complete*."""
        txn_id = meta.transactional_id
        commit = meta.state is TxnState.PREPARE_COMMIT
        remaining = sorted(meta.partitions)

        def still_mine() -> bool:
            return self._epoch_of(txn_id) == coordinator_epoch and self._txns.get(txn_id) is meta

        while remaining and still_mine():
            try:
                results = await self._markers.write_markers(
                    producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, commit=commit,
                    coordinator_epoch=coordinator_epoch, partitions=remaining,
                )
            except Exception:
                log.exception("sending markers for %r failed", txn_id)
                results = {}
            given_up = [tp for tp, e in results.items() if e in _MARKER_GIVE_UP]
            if given_up:
                log.warning("transaction %r: markers refused for %s (%s): a newer coordinator or epoch owns them",
                            txn_id, given_up, {results[tp].name for tp in given_up})
            remaining = [tp for tp in remaining if results.get(tp) not in _MARKER_DONE | _MARKER_GIVE_UP]
            if remaining:
                await asyncio.sleep(_MARKER_RETRY_S)
        while still_mine() and meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if meta.pending is not None:
                await asyncio.sleep(_MARKER_RETRY_S)
                continue
            error = await self._write(meta, meta.complete_markers(self._clock()))
            if error is not _OK:
                await asyncio.sleep(_MARKER_RETRY_S)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
