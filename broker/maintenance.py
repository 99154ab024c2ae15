"""The broker's background work, each on its own timer.

| task | every | what |
|---|---|---|
| retention | log.retention.check.interval.ms | delete segments past retention.ms / retention.bytes (never past the HW) |
| roll | min(retention check, 10 s) | roll active segments older than segment.ms |
| flush | 1 s | fsync logs whose flush.ms passed (flush.messages is checked on append) |
| compaction | log.cleaner.backoff.ms | clean compacted topics (when storage.cleaner exists) |
| producer state | 60 s | expire idle producer ids; snapshot producer state |

The log passes (retention, roll, flush, compaction) run in a worker thread
when the logs are file-backed: SegmentedLog serialises its writers with a
lock, so an fsync or a segment deletion never stalls the event loop. MemoryLog
has no lock, so with it everything runs on the loop, as does the producer-state
pass (its tables belong to the loop). A failing pass is logged and retried at
its next tick; it never stops the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.config.settings import BrokerSettings

log = logging.getLogger(__name__)

FLUSH_CHECK_S = 1.0
PRODUCER_STATE_S = 60.0
MAX_ROLL_CHECK_S = 10.0


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    interval_s: float
    run: Callable[[], object]
    threaded: bool = False


def jobs(settings: BrokerSettings, replicas: ReplicaManager) -> list[Job]:
    retention_s = settings.log_retention_check_interval_ms / 1000.0
    threaded = not replicas.logs.in_memory

    def producer_state() -> None:
        replicas.expire_producers()
        replicas.write_snapshots()

    return [
        Job("retention", retention_s, replicas.enforce_retention, threaded),
        Job("roll", min(retention_s, MAX_ROLL_CHECK_S), replicas.roll_segments, threaded),
        Job("flush", FLUSH_CHECK_S, replicas.flush_due, threaded),
        Job("compaction", max(settings.log_cleaner_backoff_ms / 1000.0, 0.1), replicas.compact, threaded),
        Job("producer-state", PRODUCER_STATE_S, producer_state),
    ]


class Maintenance:
    def __init__(self, jobs: list[Job]) -> None:
        self._jobs = jobs
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._loop(job), name=f"maintenance-{job.name}") for job in self._jobs]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    @staticmethod
    async def _loop(job: Job) -> None:
        while True:
            await asyncio.sleep(job.interval_s)
            try:
                if job.threaded:
                    await asyncio.to_thread(job.run)
                else:
                    job.run()
            except Exception:
                log.exception("maintenance job %s failed", job.name)
