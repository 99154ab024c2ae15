"""Plain-Python reference of Spark's windowed aggregation with a watermark.

Each round of events is one micro-batch (Trigger.AvailableNow with no rate
limit), followed by the no-data batch that moves the watermark. Within a
batch every row sees the watermark left by the earlier batches:

    watermark = max(0, max(event time of earlier batches) - delay)
    a row is dropped when its window ends at or before the watermark
    a window is emitted (append mode) once the watermark reaches its end
    update mode writes, after each batch, every window that batch changed
    the side output holds exactly the (event, window) pairs that were dropped

Sessions: a row makes the session [t, t + gap); sessions of one key that
overlap merge; a row is dropped when its own [t, t + gap) ends at or before
the watermark; a merged session is emitted once the watermark reaches its end.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from tinystream.spark.events import TICK_USER, Event


def _windows(ts: int, size: int, slide: int) -> list[tuple[int, int]]:
    # Spark's window(): every window [start, start + size) with start = k * slide that holds ts.
    last_start = ts - ts % slide
    out = []
    start = last_start
    while start > ts - size:
        out.append((start, start + size))
        start -= slide
    return sorted(out)


def watermarks(rounds: Sequence[Sequence[Event]], *, delay_ms: int) -> list[int]:
    """The watermark in force for each batch, then the one left after the last (len(rounds) + 1 values)."""
    out = [0]
    max_seen: int | None = None
    for batch in rounds:
        batch_max = max(e.ts for e in batch)
        max_seen = batch_max if max_seen is None else max(max_seen, batch_max)
        out.append(max(out[-1], max_seen - delay_ms))
    return out


def windowed(
    rounds: Sequence[Sequence[Event]],
    *,
    size_ms: int,
    slide_ms: int | None = None,
    delay_ms: int,
    key: Callable[[Event], Any],
) -> dict[tuple[int, int, Any], tuple[int, int]]:
    """{(window_start, window_end, key): (count, sum of amount_cents)} of the emitted windows (append mode)."""
    slide = slide_ms or size_ms
    marks = watermarks(rounds, delay_ms=delay_ms)
    state: dict[tuple[int, int, Any], list[int]] = defaultdict(lambda: [0, 0])
    emitted: dict[tuple[int, int, Any], tuple[int, int]] = {}
    for batch, watermark, next_watermark in zip(rounds, marks, marks[1:], strict=False):
        for e in batch:
            if e.user == TICK_USER:
                continue
            for start, end in _windows(e.ts, size_ms, slide):
                if end <= watermark:
                    continue
                cell = state[(start, end, key(e))]
                cell[0] += 1
                cell[1] += e.amount_cents
        for k in [k for k in state if k[1] <= next_watermark]:
            emitted[k] = tuple(state.pop(k))
    return emitted


def windowed_updates(
    rounds: Sequence[Sequence[Event]],
    *,
    size_ms: int,
    slide_ms: int | None = None,
    delay_ms: int,
    key: Callable[[Event], Any],
) -> list[tuple[int, int, Any, int, int]]:
    """Update mode: each batch writes (start, end, key, count, sum) of every window it changed.

    The tick is a row like any other here: its window is written in the batch that reads it.
    A window is forgotten (never written again) once the watermark passes its end.
    """
    slide = slide_ms or size_ms
    marks = watermarks(rounds, delay_ms=delay_ms)
    state: dict[tuple[int, int, Any], list[int]] = defaultdict(lambda: [0, 0])
    written: list[tuple[int, int, Any, int, int]] = []
    for batch, watermark, next_watermark in zip(rounds, marks, marks[1:], strict=False):
        changed = set()
        for e in batch:
            for start, end in _windows(e.ts, size_ms, slide):
                if end > watermark:
                    cell = state[(start, end, key(e))]
                    cell[0] += 1
                    cell[1] += e.amount_cents
                    changed.add((start, end, key(e)))
        written.extend((*k, *state[k]) for k in sorted(changed, key=repr))
        for k in [k for k in state if k[1] <= next_watermark]:
            del state[k]
    return written


def late_windows(
    rounds: Sequence[Sequence[Event]], *, size_ms: int, slide_ms: int | None = None, delay_ms: int
) -> set[tuple[int, int, int, int]]:
    """The side output: (seq, window_start, window_end, watermark) of every (event, window) Spark drops."""
    slide = slide_ms or size_ms
    marks = watermarks(rounds, delay_ms=delay_ms)
    return {(e.seq, start, end, watermark)
            for batch, watermark in zip(rounds, marks, strict=False) for e in batch
            for start, end in _windows(e.ts, size_ms, slide) if end <= watermark}


def late_sessions(rounds: Sequence[Sequence[Event]], *, gap_ms: int, delay_ms: int) -> set[tuple[int, int, int, int]]:
    """The side output of session windows: events whose own [t, t + gap) ends at or before the watermark."""
    marks = watermarks(rounds, delay_ms=delay_ms)
    return {(e.seq, e.ts, e.ts + gap_ms, watermark)
            for batch, watermark in zip(rounds, marks, strict=False) for e in batch if e.ts + gap_ms <= watermark}


def sessions(
    rounds: Sequence[Sequence[Event]], *, gap_ms: int, delay_ms: int
) -> dict[tuple[int, int, str], tuple[int, int]]:
    """{(session_start, session_end, user): (count, sum)} of the emitted sessions."""
    marks = watermarks(rounds, delay_ms=delay_ms)
    open_sessions: dict[str, list[list[int]]] = defaultdict(list)  # user -> [[start, end, count, sum]]
    emitted: dict[tuple[int, int, str], tuple[int, int]] = {}
    for batch, watermark, next_watermark in zip(rounds, marks, marks[1:], strict=False):
        for e in batch:
            if e.user == TICK_USER or e.ts + gap_ms <= watermark:
                continue
            merged = [e.ts, e.ts + gap_ms, 1, e.amount_cents]
            keep = []
            for s in open_sessions[e.user]:
                if s[0] < merged[1] and merged[0] < s[1]:
                    merged = [min(s[0], merged[0]), max(s[1], merged[1]), s[2] + merged[2], s[3] + merged[3]]
                else:
                    keep.append(s)
            # A merge can bridge sessions that now overlap the grown one.
            changed = True
            while changed:
                changed = False
                for s in list(keep):
                    if s[0] < merged[1] and merged[0] < s[1]:
                        merged = [min(s[0], merged[0]), max(s[1], merged[1]), s[2] + merged[2], s[3] + merged[3]]
                        keep.remove(s)
                        changed = True
            open_sessions[e.user] = [*keep, merged]
        for user, items in open_sessions.items():
            still = []
            for s in items:
                if s[1] <= next_watermark:
                    emitted[(s[0], s[1], user)] = (s[2], s[3])
                else:
                    still.append(s)
            open_sessions[user] = still
    return emitted
