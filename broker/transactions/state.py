"""One transactional id's state, and what each request does to it: pure, time passed in.

States are Kafka's TransactionState (their numbers are the status byte in
__transaction_state)::

    Empty ──AddPartitions──► Ongoing ──EndTxn(commit)──► PrepareCommit ──markers──► CompleteCommit
      ▲                        │  └───EndTxn(abort)───► PrepareAbort ──markers──► CompleteAbort
      │                        └─timeout / InitProducerId─► PrepareEpochFence ─► PrepareAbort
      └────────────── InitProducerId (epoch + 1) ◄── CompleteCommit / CompleteAbort / Empty

`_VALID_PREVIOUS` is the table (target state -> states it may follow, as
Kafka's TransactionState.validPreviousStates); anything else raises
`IllegalTransition` naming the transactional id, the state and the event.

A change is two-phase, as in Kafka's TransactionMetadata: a decision
`prepare`s a `TxnTransit` (the metadata after the change, which the
coordinator appends to __transaction_state) and marks the metadata pending,
so concurrent requests get CONCURRENT_TRANSACTIONS; once the append is
durable the coordinator calls `complete(transit)`, or `abandon()` if it failed.

Fencing (KIP-98, KIP-360, KIP-588): every InitProducerId bumps the epoch, so
requests carrying an older one get PRODUCER_FENCED; an InitProducerId that
finds a transaction Ongoing fences it first (epoch + 1, abort) and answers
CONCURRENT_TRANSACTIONS until the abort is complete; the client retries.
A transaction older than its timeout is aborted the same way.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tinystream.broker.errors import ErrorCode
from tinystream.broker.transactions.errors import IllegalTransition

__all__ = [
    "MAX_EPOCH",
    "Decision",
    "InitDecision",
    "TransactionMetadata",
    "TxnState",
    "TxnTransit",
]

TopicPartitionKey = tuple[str, int]

#: Kafka's isProducerEpochExhausted: Short.MaxValue - 1; a bump past it rotates to a new producer id.
MAX_EPOCH = 32766
NO_PRODUCER_EPOCH = -1
_OK = ErrorCode.none


class TxnState(enum.IntEnum):
    """Kafka's transaction states; the value is the status byte stored in __transaction_state."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's tools print (DescribeTransactions, ListTransactions)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


_S = TxnState
_COMPLETE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: _COMPLETE,
    _S.ONGOING: _COMPLETE | {_S.ONGOING},
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: _COMPLETE | {_S.ONGOING, _S.PREPARE_EPOCH_FENCE},
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: _COMPLETE,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The metadata after a change: what is written to __transaction_state, then applied."""

    event: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartitionKey]
    txn_start_ms: int
    last_update_ms: int


@dataclass(frozen=True, slots=True)
class Decision:
    """A request's outcome: an error to answer now, or a transit to write first (then answer NONE)."""

    error: ErrorCode = _OK
    transit: TxnTransit | None = None


@dataclass(frozen=True, slots=True)
class InitDecision:
    """InitProducerId's outcome. `fence`: abort the Ongoing transaction first, answer CONCURRENT_TRANSACTIONS."""

    error: ErrorCode = _OK
    transit: TxnTransit | None = None
    fence: bool = False


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartitionKey] = field(default_factory=set)
    txn_start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump (KIP-360 retries)
    pending: TxnState | None = None  # a transit being written

    # ------------------------------------------------------------ the two-phase change

    def prepare(
        self,
        target: TxnState,
        *,
        event: str,
        now: int,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: frozenset[TopicPartitionKey] | None = None,
        txn_start_ms: int | None = None,
    ) -> TxnTransit:
        """Check the table, mark pending, return the transit to write."""
        self._check(target, event)
        if self.pending is not None:
            raise IllegalTransition(self.transactional_id, f"{self.state.kafka_name} (pending {self.pending.kafka_name})",
                                    event)
        epoch = self.producer_epoch if producer_epoch is None else producer_epoch
        pid = self.producer_id if producer_id is None else producer_id
        transit = TxnTransit(
            event=event,
            producer_id=pid,
            producer_epoch=epoch,
            last_producer_epoch=self.producer_epoch if epoch != self.producer_epoch or pid != self.producer_id
            else self.last_producer_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=target,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            txn_start_ms=self.txn_start_ms if txn_start_ms is None else txn_start_ms,
            last_update_ms=now,
        )
        self.pending = target
        return transit

    def complete(self, transit: TxnTransit) -> None:
        """The transit is durable: apply it."""
        if self.pending is not transit.state:
            raise IllegalTransition(self.transactional_id, self.state.kafka_name, f"complete {transit.event}")
        self.producer_id = transit.producer_id
        self.last_producer_epoch = transit.last_producer_epoch
        self.producer_epoch = transit.producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.txn_start_ms = transit.txn_start_ms
        self.last_update_ms = transit.last_update_ms
        self.pending = None

    def abandon(self) -> None:
        """The transit's append failed: nothing changed."""
        self.pending = None

    def _check(self, target: TxnState, event: str) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalTransition(self.transactional_id, self.state.kafka_name, event)

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH

    # ------------------------------------------------------------ decisions

    def init_producer_id(
        self,
        *,
        timeout_ms: int,
        expected_producer_id: int,
        expected_epoch: int,
        now: int,
        new_producer_id: int | None = None,
    ) -> InitDecision:
        """InitProducerId with this transactional id (Kafka's handleInitProducerId, TV1).

        `expected_*` are -1 unless a KIP-360 client asks to bump its own
        epoch. `new_producer_id` is needed only when the epoch is exhausted.
        """
        if self.pending is not None:
            return InitDecision(ErrorCode.concurrent_transactions)
        if expected_producer_id >= 0:
            if expected_producer_id != self.producer_id:
                return InitDecision(ErrorCode.producer_fenced)
            if expected_epoch not in (self.producer_epoch, self.last_producer_epoch):
                return InitDecision(ErrorCode.producer_fenced)
        state = self.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return InitDecision(ErrorCode.concurrent_transactions)
        if state is TxnState.ONGOING:
            return InitDecision(ErrorCode.concurrent_transactions, fence=True)
        if state is TxnState.DEAD:
            return InitDecision(ErrorCode.concurrent_transactions)
        if expected_producer_id >= 0 and expected_epoch == self.last_producer_epoch and expected_epoch >= 0:
            pid, epoch = self.producer_id, self.producer_epoch  # a retry of a bump that happened: same answer
        elif self.epoch_exhausted:
            if new_producer_id is None:
                raise ValueError("the epoch is exhausted: a new producer id is needed")
            pid, epoch = new_producer_id, 0
        else:
            pid, epoch = self.producer_id, self.producer_epoch + 1
        transit = self.prepare(
            TxnState.EMPTY, event="InitProducerId", now=now, producer_id=pid, producer_epoch=epoch,
            timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1,
        )
        return InitDecision(transit=transit)

    def _check_producer(self, producer_id: int, producer_epoch: int) -> ErrorCode:
        if producer_id != self.producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch != self.producer_epoch:
            return ErrorCode.producer_fenced
        return _OK

    def add_partitions(
        self, *, producer_id: int, producer_epoch: int, partitions: set[TopicPartitionKey], now: int
    ) -> Decision:
        """AddPartitionsToTxn / AddOffsetsToTxn: the transaction becomes (or stays) Ongoing."""
        error = self._check_producer(producer_id, producer_epoch)
        if error is not _OK:
            return Decision(error)
        if self.pending is not None or self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return Decision(ErrorCode.concurrent_transactions)
        if self.state in (TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return Decision(ErrorCode.producer_fenced if self.state is TxnState.PREPARE_EPOCH_FENCE
                            else ErrorCode.invalid_txn_state)
        if self.state is TxnState.ONGOING and partitions <= self.partitions:
            return Decision()  # nothing new: no write
        start = self.txn_start_ms if self.state is TxnState.ONGOING else now
        transit = self.prepare(
            TxnState.ONGOING, event="AddPartitionsToTxn", now=now,
            partitions=frozenset(self.partitions | partitions), txn_start_ms=start,
        )
        return Decision(transit=transit)

    def verify_partitions(
        self, *, producer_id: int, producer_epoch: int, partitions: list[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """KIP-890 verification (AddPartitionsToTxn verify_only, and a leader's produce check).

        INVALID_TXN_STATE for a partition not in the Ongoing transaction.
        """
        error = self._check_producer(producer_id, producer_epoch)
        if error is not _OK:
            return {tp: error for tp in partitions}
        ongoing = self.state is TxnState.ONGOING
        return {tp: _OK if ongoing and tp in self.partitions else ErrorCode.invalid_txn_state for tp in partitions}

    def end_txn(self, *, producer_id: int, producer_epoch: int, commit: bool, now: int,
                from_client: bool = True) -> Decision:
        """EndTxn (or the coordinator's own abort): Ongoing -> PrepareCommit/PrepareAbort.

        Retries of a finished end answer NONE; the opposite result is
        INVALID_TXN_STATE; an end still being written is CONCURRENT_TRANSACTIONS.
        """
        if producer_id != self.producer_id:
            return Decision(ErrorCode.invalid_producer_id_mapping)
        if from_client and producer_epoch != self.producer_epoch:
            return Decision(ErrorCode.producer_fenced)
        if self.pending is not None:
            return Decision(ErrorCode.concurrent_transactions)
        state = self.state
        if state is TxnState.ONGOING or (state is TxnState.PREPARE_EPOCH_FENCE and not commit and not from_client):
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return Decision(transit=self.prepare(target, event="EndTxn(commit)" if commit else "EndTxn(abort)",
                                                 now=now))
        if state is TxnState.COMPLETE_COMMIT:
            return Decision(_OK if commit else ErrorCode.invalid_txn_state)
        if state is TxnState.COMPLETE_ABORT:
            return Decision(ErrorCode.invalid_txn_state if commit else _OK)
        if state is TxnState.PREPARE_COMMIT:
            return Decision(ErrorCode.concurrent_transactions if commit else ErrorCode.invalid_txn_state)
        if state is TxnState.PREPARE_ABORT:
            return Decision(ErrorCode.invalid_txn_state if commit else ErrorCode.concurrent_transactions)
        if state is TxnState.PREPARE_EPOCH_FENCE:
            return Decision(ErrorCode.producer_fenced)
        return Decision(ErrorCode.invalid_txn_state)  # Empty, Dead

    def fence(self) -> None:
        """Bump the epoch of an Ongoing transaction in memory, so its producer is fenced;
        the abort that follows (`end_txn(..., from_client=False)`) writes the new epoch."""
        self._check(TxnState.PREPARE_EPOCH_FENCE, "fence")
        if self.pending is not None:
            raise IllegalTransition(self.transactional_id, self.state.kafka_name, "fence (pending)")
        self.last_producer_epoch = self.producer_epoch
        self.producer_epoch += 1
        self.state = TxnState.PREPARE_EPOCH_FENCE

    def complete_markers(self, now: int) -> TxnTransit:
        """Every marker is written: PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort."""
        if self.state is TxnState.PREPARE_COMMIT:
            target = TxnState.COMPLETE_COMMIT
        elif self.state is TxnState.PREPARE_ABORT:
            target = TxnState.COMPLETE_ABORT
        else:
            raise IllegalTransition(self.transactional_id, self.state.kafka_name, "markers written")
        return self.prepare(target, event="markers written", now=now, partitions=frozenset())

    def expired(self, now: int, expiration_ms: int) -> bool:
        """Idle past transactional.id.expiration.ms with no transaction open: the id may be forgotten (Dead)."""
        return (
            self.state in _COMPLETE and self.pending is None and self.last_update_ms >= 0
            and now - self.last_update_ms > expiration_ms
        )

    def timed_out(self, now: int) -> bool:
        """An Ongoing transaction older than its timeout (Kafka's abortTimedOutTransactions)."""
        return (
            self.state is TxnState.ONGOING and self.pending is None and self.txn_start_ms >= 0
            and now > self.txn_start_ms + self.timeout_ms
        )

    @classmethod
    def from_transit(cls, transactional_id: str, transit: TxnTransit) -> TransactionMetadata:
        """Metadata as loaded from __transaction_state (the last value written for the id)."""
        return cls(
            transactional_id=transactional_id,
            producer_id=transit.producer_id,
            producer_epoch=transit.producer_epoch,
            timeout_ms=transit.timeout_ms,
            state=transit.state,
            partitions=set(transit.partitions),
            txn_start_ms=transit.txn_start_ms,
            last_update_ms=transit.last_update_ms,
            last_producer_epoch=transit.last_producer_epoch,
        )
