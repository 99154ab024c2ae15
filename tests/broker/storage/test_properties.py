"""Property test: SegmentedLog behaves exactly like MemoryLog (the model) under random operations.

Random sequences of appends (leader and follower), reads, truncations,
rolls, retention, log-start moves, compaction and reopen (the file log is
closed and recovered) run against both logs; after every step their
observable state must be identical, and every read byte for byte.

The default profile is small (a few seconds); ``TestLogModelSlow`` runs the
same machine much longer under ``-m slow``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tinystream.broker.storage.base import LogConfig, OffsetOutOfRangeError
from tinystream.broker.storage.batch import Record, build_batch
from tinystream.broker.storage.cleaner import LogCleaner
from tinystream.broker.storage.memory import MemoryLog
from tinystream.broker.storage.segmented import SegmentedLog

KEYS = [b"a", b"b", b"c", b"d", None]


def _outcome(call):
    """(result, None) or (None, exception type): both logs must agree on either."""
    try:
        return call(), None
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return None, type(exc)


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="tinystream-prop-"))
        self.clock = 0
        self.epoch = 0

    @initialize(
        segment_bytes=st.integers(250, 900),
        interval=st.integers(1, 300),
        retention_ms=st.sampled_from([-1, 50, 400]),
        retention_bytes=st.sampled_from([-1, 600, 2000]),
        segment_ms=st.sampled_from([50, 10**9]),
        policy=st.sampled_from(["delete", "compact,delete", "compact"]),
    )
    def setup(self, segment_bytes, interval, retention_ms, retention_bytes, segment_ms, policy):
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            segment_ms=segment_ms,
            cleanup_policy=policy,
            delete_retention_ms=100,
        )
        self.model = MemoryLog(self.config, now_ms=0)
        self.log = SegmentedLog.open(self.directory, self.config, now_ms=0)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def both(self, name, *args, **kwargs):
        expected = _outcome(lambda: getattr(self.model, name)(*args, **kwargs))
        actual = _outcome(lambda: getattr(self.log, name)(*args, **kwargs))
        assert actual == expected, (name, args, kwargs, actual, expected)
        return expected[0]

    # ------------------------------------------------------------------ rules
    @rule(
        count=st.integers(1, 4),
        value_size=st.integers(0, 80),
        keys=st.lists(st.sampled_from(KEYS), min_size=4, max_size=4),
        tombstone=st.booleans(),
        tick=st.integers(0, 30),
        ts_jitter=st.integers(-40, 40),
        bump_epoch=st.booleans(),
    )
    def append(self, count, value_size, keys, tombstone, tick, ts_jitter, bump_epoch):
        self.clock += tick
        self.epoch += bump_epoch
        records = [
            Record(keys[i], None if tombstone and i == 0 else bytes([97 + i]) * value_size, timestamp_delta=i)
            for i in range(count)
        ]
        data = build_batch(records, base_timestamp=max(0, self.clock + ts_jitter))
        self.both("append", data, leader_epoch=self.epoch, now_ms=self.clock)

    @rule(gap=st.integers(0, 3), count=st.integers(1, 3), cut=st.booleans(), epoch_step=st.integers(0, 1))
    def append_replicated(self, gap, count, cut, epoch_step):
        self.epoch += epoch_step
        base = self.model.log_end_offset + gap
        first = build_batch(
            [Record(b"r", b"x" * 20)] * count, base_offset=base, partition_leader_epoch=self.epoch,
            base_timestamp=self.clock,
        )
        second = build_batch(
            [Record(b"s", b"y")], base_offset=base + count, partition_leader_epoch=self.epoch, base_timestamp=self.clock
        )
        data = first + (second[:-3] if cut else second)
        self.both("append_replicated", data)

    @rule(data=st.data(), max_bytes=st.integers(0, 1200), min_one=st.booleans(), use_limit=st.booleans())
    def read(self, data, max_bytes, min_one, use_limit):
        start, end = self.model.log_start_offset, self.model.log_end_offset
        offset = data.draw(st.integers(max(0, start - 1), end + 1))
        max_offset = data.draw(st.integers(start, end + 1)) if use_limit else None
        expected = _outcome(lambda: self.model.read(offset, max_bytes, max_offset=max_offset, min_one=min_one))
        actual = _outcome(lambda: self.log.read(offset, max_bytes, max_offset=max_offset, min_one=min_one))
        if expected[1] or actual[1]:
            assert actual[1] == expected[1] == OffsetOutOfRangeError
            return
        e, a = expected[0], actual[0]
        assert (bytes(a.data), a.first_offset, a.next_offset, a.log_start_offset, a.log_end_offset) == (
            bytes(e.data), e.first_offset, e.next_offset, e.log_start_offset, e.log_end_offset
        ), (offset, max_bytes, max_offset, min_one)

    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(0, self.model.log_end_offset + 2))
        self.both("truncate_to", offset)

    @rule(data=st.data())
    def advance_log_start(self, data):
        offset = data.draw(st.integers(0, self.model.log_end_offset + 1))
        self.both("advance_log_start", offset)

    @rule(tick=st.integers(0, 100))
    def roll(self, tick):
        self.clock += tick
        self.both("roll", self.clock)

    @rule(tick=st.integers(0, 100))
    def maybe_roll(self, tick):
        self.clock += tick
        self.both("maybe_roll", self.clock)

    @rule(tick=st.integers(0, 300), use_hw=st.booleans(), data=st.data())
    def retention(self, tick, use_hw, data):
        self.clock += tick
        hw = data.draw(st.integers(self.model.log_start_offset, self.model.log_end_offset)) if use_hw else None
        self.both("enforce_retention", self.clock, high_watermark=hw)

    @precondition(lambda self: self.config.compacted)
    @rule(tick=st.integers(0, 300))
    def clean(self, tick):
        self.clock += tick
        expected = LogCleaner().clean(self.model, self.clock)
        actual = LogCleaner().clean(self.log, self.clock)
        assert actual == expected

    @rule()
    def reopen(self):
        self.log.close()
        self.log = SegmentedLog.open(self.directory, self.config, now_ms=self.clock)
        self.model._now_ms = self.clock  # the reopened log's clock reading; the model's must match

    @rule()
    def crash_and_recover(self):
        # Like reopen, without close: nothing sealed, indexes never written.
        for segment in self.log._segments:
            segment.close()
        self.log = SegmentedLog.open(self.directory, self.config, now_ms=self.clock)
        self.model._now_ms = self.clock

    # ------------------------------------------------------------------ invariants
    @invariant()
    def same_state(self):
        if not hasattr(self, "log"):
            return
        m, s = self.model, self.log
        assert (s.log_start_offset, s.log_end_offset) == (m.log_start_offset, m.log_end_offset)
        assert s.segment_base_offsets() == m.segment_base_offsets()
        assert s.size_bytes() == m.size_bytes()
        assert s.epoch_entries() == m.epoch_entries()
        assert m.log_start_offset <= m.log_end_offset
        for epoch in range(-1, self.epoch + 2):
            assert s.end_offset_for_epoch(epoch) == m.end_offset_for_epoch(epoch)
        for timestamp in (0, self.clock // 2, self.clock):
            assert s.offset_for_timestamp(timestamp) == m.offset_for_timestamp(timestamp)


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.slow
class TestLogModelSlow(LogModel.TestCase):
    settings = settings(
        max_examples=500, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
