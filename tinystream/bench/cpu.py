"""The CPU time a broker spends on a workload: the honest cost figure on a small machine.

Throughput on two cores mostly says who gets the second core; CPU seconds per
GB moved says what the work costs. A broker the benchmark started runs in its
own process group (testing.peers.process starts it with start_new_session), so
its cost is the user + system time of every process in that group: our broker,
or Kafka's JVM and whatever wrapper launched it. Read from /proc (Linux); where
there is no /proc, or the broker was not started here (--bootstrap), the figure
is simply absent.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat this module reads (see proc(5))."""

    pgid: int
    utime_ticks: int
    stime_ticks: int


def parse_stat(text: str) -> ProcStat:
    """One /proc/PID/stat line. The command name (field 2) may hold spaces and parentheses, so the fields
    are counted from its last closing parenthesis."""
    rest = text[text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state): pgrp is field 5, utime 14, stime 15.
    return ProcStat(pgid=int(rest[2]), utime_ticks=int(rest[11]), stime_ticks=int(rest[12]))


def group_cpu_seconds(pgid: int, proc: Path = PROC) -> float | None:
    """User + system seconds of the live processes in process group `pgid`; None without /proc."""
    return groups_cpu_seconds((pgid,), proc)


def groups_cpu_seconds(pgids: Collection[int], proc: Path = PROC) -> float | None:
    """The same for several groups in one pass over /proc: a cluster's brokers (and controller), each
    started in its own session."""
    if not proc.is_dir():
        return None
    ticks = sum(stat.utime_ticks + stat.stime_ticks for _, stat in group_processes(pgids, proc))
    return ticks / os.sysconf("SC_CLK_TCK")


def group_processes(pgids: Collection[int], proc: Path = PROC) -> Iterator[tuple[Path, ProcStat]]:
    """(/proc/PID, its stat) of every live process in `pgids` (memory.py reads their status too)."""
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = parse_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not a process
            continue
        if stat.pgid in pgids:
            yield entry, stat


@dataclass
class CpuMeter:
    """CPU seconds a process group (and `more` groups: the rest of a cluster) used between entering and
    leaving `measure()`."""

    pgid: int | None
    seconds: float | None = None
    more: tuple[int, ...] = ()

    def _now(self) -> float | None:
        return None if self.pgid is None else groups_cpu_seconds({self.pgid, *self.more})

    @contextlib.contextmanager
    def measure(self) -> Iterator[CpuMeter]:
        before = self._now()
        try:
            yield self
        finally:
            after = self._now()
            self.seconds = None if before is None or after is None else max(0.0, after - before)
