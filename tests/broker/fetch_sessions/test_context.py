"""FetchSessionManager and FetchSessionHandler: the request/answer computation of KIP-227, no sockets.

The broker side and the fetcher side are run against each other here: what
the handler sends is what the manager reads, so a mismatch in either shows.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from uuid import uuid4

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import INVALID_SESSION_ID, FetchSessionCache, PartitionRequest
from tinystream.broker.fetch_sessions.client import FetchSessionHandler
from tinystream.broker.fetch_sessions.context import ContextKind, FetchContext, FetchSessionManager
from tinystream.broker.storage.topic_partition import TopicPartition


@dataclass(frozen=True)
class Read:
    """What a read returned for one partition (the shape of replica_manager.FetchedPartition)."""

    tp: TopicPartition
    error: ErrorCode = ErrorCode.none
    high_watermark: int = 10
    last_stable_offset: int = 10
    log_start_offset: int = 0
    size: int = 0


def tp(i: int) -> TopicPartition:
    return TopicPartition("t", i)


def req(offset: int = 0) -> PartitionRequest:
    return PartitionRequest(fetch_offset=offset, partition_max_bytes=1024)


def manager(slots: int = 10) -> FetchSessionManager:
    ids = itertools.count(101)
    return FetchSessionManager(FetchSessionCache(max_slots=slots, new_id=lambda: next(ids)))


def read_all(context: FetchContext, **changes: Read) -> list[Read]:
    """A quiet read of every partition the context names, with `changes` by partition name."""
    return [changes.get(f"p{t.partition}", Read(t)) for t, _ in context.partitions]


def open_session(m: FetchSessionManager, n: int, *, owner: str = "") -> int:
    ctx = m.new_context(session_id=0, epoch=0, partitions=[(tp(i), req()) for i in range(n)], owner=owner, now_ms=0)
    answer = m.answer(ctx, read_all(ctx), now_ms=0)
    assert ctx.kind is ContextKind.FULL and len(answer.results) == n and answer.session_id == 101
    return answer.session_id


def test_sessionless_full_fetch_answers_everything_and_keeps_nothing():
    m = manager()
    ctx = m.new_context(session_id=0, epoch=-1, partitions=[(tp(0), req()), (tp(1), req())], now_ms=0)
    answer = m.answer(ctx, read_all(ctx), now_ms=0)
    assert ctx.kind is ContextKind.SESSIONLESS
    assert answer.session_id == INVALID_SESSION_ID and len(answer.results) == 2 and len(m.cache) == 0


def test_incremental_answer_carries_only_partitions_with_news():
    m = manager()
    sid = open_session(m, 1000)
    ctx = m.new_context(session_id=sid, epoch=1, partitions=[], now_ms=5)
    assert ctx.kind is ContextKind.INCREMENTAL and len(ctx.partitions) == 1000  # the session's partitions are read
    quiet = m.answer(ctx, read_all(ctx), now_ms=5)
    assert quiet.session_id == sid and quiet.results == []
    ctx = m.new_context(session_id=sid, epoch=2, partitions=[], now_ms=6)
    news = read_all(ctx, p3=Read(tp(3), size=100, high_watermark=11), p7=Read(tp(7), high_watermark=12),
                    p8=Read(tp(8), log_start_offset=4), p9=Read(tp(9), last_stable_offset=9),
                    p5=Read(tp(5), error=ErrorCode.not_leader_or_follower))
    answer = m.answer(ctx, news, must_include={tp(11)}, now_ms=6)
    assert sorted(r.tp.partition for r in answer.results) == [3, 5, 7, 8, 9, 11]
    # What was sent is remembered: the same read again carries only the erroring partition.
    ctx = m.new_context(session_id=sid, epoch=3, partitions=[], now_ms=7)
    again = m.answer(ctx, read_all(ctx, p3=Read(tp(3), high_watermark=11), p7=Read(tp(7), high_watermark=12),
                                   p8=Read(tp(8), log_start_offset=4), p9=Read(tp(9), last_stable_offset=9),
                                   p5=Read(tp(5), error=ErrorCode.not_leader_or_follower)), now_ms=7)
    assert [r.tp.partition for r in again.results] == [5]
    # Once the error clears, the partition is sent again even with the old high watermark.
    ctx = m.new_context(session_id=sid, epoch=4, partitions=[], now_ms=8)
    cleared = m.answer(ctx, read_all(ctx, p3=Read(tp(3), high_watermark=11), p7=Read(tp(7), high_watermark=12),
                                     p8=Read(tp(8), log_start_offset=4), p9=Read(tp(9), last_stable_offset=9)),
                       now_ms=8)
    assert [r.tp.partition for r in cleared.results] == [5]


def test_incremental_request_updates_adds_and_forgets():
    m = manager()
    sid = open_session(m, 3)
    ctx = m.new_context(session_id=sid, epoch=1, partitions=[(tp(1), req(5)), (tp(9), req(0))],
                        forgotten=[tp(0)], now_ms=1)
    assert dict(ctx.partitions) == {tp(1): req(5), tp(2): req(), tp(9): req(0)}
    answer = m.answer(ctx, read_all(ctx), now_ms=1)
    assert [r.tp for r in answer.results] == [tp(9)]  # new to the session: its first answer carries it


def test_partitions_with_data_rotate_to_the_back():
    m = manager()
    sid = open_session(m, 3)
    ctx = m.new_context(session_id=sid, epoch=1, partitions=[], now_ms=1)
    m.answer(ctx, read_all(ctx, p0=Read(tp(0), size=10, high_watermark=11)), now_ms=1)
    ctx = m.new_context(session_id=sid, epoch=2, partitions=[], now_ms=2)
    assert [t.partition for t, _ in ctx.partitions] == [1, 2, 0]


@pytest.mark.parametrize(("session_id", "epoch", "error"), [
    (999, 1, ErrorCode.fetch_session_id_not_found),
    (101, 2, ErrorCode.invalid_fetch_session_epoch),
    (0, 3, ErrorCode.invalid_fetch_session_epoch),
    (101, -2, ErrorCode.invalid_fetch_session_epoch),
])
def test_session_errors(session_id, epoch, error):
    m = manager()
    open_session(m, 2)
    ctx = m.new_context(session_id=session_id, epoch=epoch, partitions=[], now_ms=1)
    answer = m.answer(ctx, [], now_ms=1)
    assert ctx.kind is ContextKind.ERROR and answer.error == error and answer.session_id == 0


def test_a_replayed_epoch_is_refused():
    m = manager()
    sid = open_session(m, 2)
    ctx = m.new_context(session_id=sid, epoch=1, partitions=[], now_ms=1)
    m.answer(ctx, read_all(ctx), now_ms=1)
    assert m.new_context(session_id=sid, epoch=1, partitions=[], now_ms=2).error == ErrorCode.invalid_fetch_session_epoch


def test_the_epoch_moving_during_a_long_poll_fails_the_older_answer():
    m = manager()
    sid = open_session(m, 2)
    waiting = m.new_context(session_id=sid, epoch=1, partitions=[], now_ms=1)
    m.new_context(session_id=sid, epoch=2, partitions=[], now_ms=2)  # a second request overtook it
    assert m.answer(waiting, read_all(waiting), now_ms=3).error == ErrorCode.invalid_fetch_session_epoch


def test_final_epoch_closes_the_session_and_fetches_sessionless():
    m = manager()
    sid = open_session(m, 2)
    ctx = m.new_context(session_id=sid, epoch=-1, partitions=[(tp(0), req())], now_ms=1)
    assert ctx.kind is ContextKind.SESSIONLESS and m.cache.get(sid) is None
    assert m.answer(ctx, read_all(ctx), now_ms=1).session_id == 0


def test_epoch_zero_on_a_session_replaces_it():
    m = manager()
    sid = open_session(m, 2)
    ctx = m.new_context(session_id=sid, epoch=0, partitions=[(tp(0), req())], now_ms=1)
    new = m.answer(ctx, read_all(ctx), now_ms=1).session_id
    assert m.cache.get(sid) is None and new not in (0, sid) and len(m.cache) == 1


def test_forgetting_every_partition_closes_the_session():
    m = manager()
    sid = open_session(m, 2)
    ctx = m.new_context(session_id=sid, epoch=1, partitions=[], forgotten=[tp(0), tp(1)], now_ms=1)
    assert ctx.kind is ContextKind.SESSIONLESS and m.cache.get(sid) is None


def test_a_session_belongs_to_its_principal():
    m = manager()
    sid = open_session(m, 2, owner="User:alice")
    stolen = m.new_context(session_id=sid, epoch=1, partitions=[], owner="User:mallory", now_ms=1)
    assert stolen.error == ErrorCode.fetch_session_id_not_found
    # Nor can another principal close it.
    m.new_context(session_id=sid, epoch=-1, partitions=[], owner="User:mallory", now_ms=1)
    assert m.new_context(session_id=sid, epoch=1, partitions=[], owner="User:alice", now_ms=2).kind is ContextKind.INCREMENTAL


def test_topic_id_use_must_match_the_session():
    m = manager()
    ctx = m.new_context(session_id=0, epoch=0, partitions=[(tp(0), PartitionRequest(0, 1, topic_id=uuid4()))],
                        uses_topic_ids=True, now_ms=0)
    sid = m.answer(ctx, read_all(ctx), now_ms=0).session_id
    old_version = m.new_context(session_id=sid, epoch=1, partitions=[], uses_topic_ids=False, now_ms=1)
    assert old_version.error == ErrorCode.fetch_session_topic_id_error


def test_no_room_answers_session_zero():
    m = manager(slots=0)
    ctx = m.new_context(session_id=0, epoch=0, partitions=[(tp(0), req())], now_ms=0)
    assert m.answer(ctx, read_all(ctx), now_ms=0).session_id == INVALID_SESSION_ID


# -- the fetcher's side against the broker's ------------------------------------------------


def roundtrip(m: FetchSessionManager, h: FetchSessionHandler, wanted: dict, now: int, **changes: Read):
    plan = h.build(wanted)
    ctx = m.new_context(session_id=plan.session_id, epoch=plan.epoch, partitions=list(plan.to_send.items()),
                        forgotten=plan.forgotten, now_ms=now)
    answer = m.answer(ctx, read_all(ctx, **changes), now_ms=now)
    h.handle_response(answer.error, answer.session_id)
    return plan, ctx, answer


def test_handler_sends_full_then_only_changes():
    m, h = manager(), FetchSessionHandler()
    wanted = {tp(i): req() for i in range(100)}
    plan, _, answer = roundtrip(m, h, wanted, 0)
    assert plan.full and len(plan.to_send) == 100 and answer.session_id == 101
    plan, ctx, answer = roundtrip(m, h, wanted, 1)
    assert (plan.epoch, plan.to_send, plan.forgotten) == (1, {}, ()) and len(ctx.partitions) == 100
    wanted = {**{t: r for t, r in wanted.items() if t != tp(0)}, tp(5): req(7), tp(200): req()}
    plan, ctx, answer = roundtrip(m, h, wanted, 2)
    assert plan.epoch == 2 and plan.to_send == {tp(5): req(7), tp(200): req()} and plan.forgotten == (tp(0),)
    assert dict(ctx.partitions) == wanted


def test_handler_restarts_after_session_errors():
    m, h = manager(), FetchSessionHandler()
    wanted = {tp(0): req()}
    roundtrip(m, h, wanted, 0)
    m.cache.remove(101)  # evicted behind the fetcher's back
    plan, _, answer = roundtrip(m, h, wanted, 1)
    assert answer.error == ErrorCode.fetch_session_id_not_found and not plan.full
    plan, _, answer = roundtrip(m, h, wanted, 2)
    assert plan.full and plan.session_id == 0 and answer.session_id == 102
    h.handle_error()  # a lost connection: close and reopen on the next request
    plan, _, answer = roundtrip(m, h, wanted, 3)
    assert plan.full and plan.session_id == 102 and answer.session_id == 103 and m.cache.get(102) is None


def test_handler_without_room_keeps_sending_full_requests():
    m, h = manager(slots=0), FetchSessionHandler()
    for now in range(3):
        plan, _, answer = roundtrip(m, h, {tp(0): req()}, now)
        assert plan.full and plan.session_id == 0 and answer.session_id == 0


def test_requests_are_counted_by_context():
    m = manager()
    sid = open_session(m, 1)
    m.new_context(session_id=sid, epoch=1, partitions=[], now_ms=1)
    m.new_context(session_id=sid, epoch=9, partitions=[], now_ms=1)
    m.new_context(session_id=0, epoch=-1, partitions=[], now_ms=1)
    assert {k.value: n for k, n in m.requests.items()} == {"full": 1, "incremental": 1, "error": 1, "sessionless": 1}
