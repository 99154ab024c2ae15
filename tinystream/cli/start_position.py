"""Where `tinystream consume` starts: an offset (earliest, latest, N) or a time (ISO-8601, or relative like -15m).

Pure parsing, so the CLI's rules are tested without a broker; the command
turns a position into a seek (an offset, or ListOffsets by timestamp).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

_RELATIVE = re.compile(r"^-(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class BadPosition(ValueError):
    """An --offset or --from-time a person must fix (the message says how)."""


@dataclass(frozen=True, slots=True)
class StartPosition:
    """Exactly one of: `edge` ("earliest" or "latest"), `offset`, `timestamp_ms`."""

    edge: str | None = None
    offset: int | None = None
    timestamp_ms: int | None = None


def parse_offset(text: str) -> StartPosition:
    if text in ("earliest", "latest"):
        return StartPosition(edge=text)
    try:
        offset = int(text)
    except ValueError:
        raise BadPosition(f"--offset takes earliest, latest or a number, not {text!r}") from None
    if offset < 0:
        raise BadPosition(f"--offset {offset}: offsets start at 0")
    return StartPosition(offset=offset)


def parse_time(text: str, *, now_ms: int) -> StartPosition:
    """An ISO-8601 time (UTC when it names no zone) or a relative one: -30s, -15m, -2h, -1d, -500ms."""
    relative = _RELATIVE.match(text.strip())
    if relative:
        return StartPosition(timestamp_ms=now_ms - int(relative.group(1)) * _UNIT_MS[relative.group(2)])
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadPosition(
            f"--from-time takes an ISO-8601 time (2026-11-24T10:00:00Z) or a relative one (-15m, -2h), not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return StartPosition(timestamp_ms=int(moment.timestamp() * 1000))
