"""The controller core with time, a lock and a disk: one writer, nothing lost.

`ControllerService` owns the current `ControllerState` and is the only code
that changes it. Every change, from an HTTP request or from the driver's own
timers, takes the same path::

    submit(event)  ->  under the lock: apply(state, event, clock())
                   ->  refused? answer the error, the state is untouched
                   ->  persist if needed (below), *then* adopt the new state
                   ->  wake long-polling metadata readers if the image changed

so a client is never told about a change the disk does not hold, and the
store is written by one coroutine at a time. A save that fails (disk full,
read-only) leaves the old state in memory and on disk and answers
KAFKA_STORAGE_ERROR (503): the caller retries, nothing diverges.

What is persisted, and when: the state is saved whenever the image changed
(topics, partitions, brokers, fencing: everything brokers act on) or an id
source moved (the topic-id source, or `next_producer_id_start` after an
AllocateProducerIds, whose image does not change: a block handed out and
not saved could be handed out again after a restart). Heartbeats that only renew a session are *not* saved: sessions
are liveness, not metadata, and a state loaded at start-up gets
`ControllerActivated`, which restarts every session at "now" anyway (KRaft
keeps heartbeats in memory for the same reason). Saving them would mean one
fsync per broker per heartbeat for information the next start throws away.

Time is a monotonic millisecond clock, injected. The driver loop sends
`AdvanceTime` every `tick_interval_s` (the core's advice: about once a
second; a silent broker is fenced between timeout and timeout + tick) and
`ElectPreferredLeaders` every `preferred_election_interval_s` (Kafka's
auto.leader.rebalance with leader.imbalance.check.interval.seconds = 300).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from tinystream.operator.controller import (
    AdvanceTime,
    ControllerActivated,
    ControllerConfig,
    ControllerError,
    ControllerState,
    Decision,
    ElectPreferredLeaders,
    Event,
    MetadataImage,
    apply,
)
from tinystream.operator.service.errors import ApiError
from tinystream.operator.service.state_store import StateStore

log = logging.getLogger(__name__)

Clock = Callable[[], int]


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def new_cluster_id() -> str:
    """Kafka's form: a random UUID in URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverTiming:
    tick_interval_s: float = 0.25  # AdvanceTime cadence: fencing lags the session timeout by at most this
    preferred_election_interval_s: float = 300.0  # Kafka: leader.imbalance.check.interval.seconds
    max_wait_ms: int = 30_000  # longest metadata long-poll; below common HTTP client timeouts


def must_persist(old: ControllerState, decision: Decision) -> bool:
    """Save when brokers could act on the change or a restart could not rebuild it."""
    new = decision.state
    return (
        decision.image_changed
        or new.ids != old.ids
        or new.config != old.config
        or new.next_producer_id_start != old.next_producer_id_start
    )


class ControllerService:
    """The single writer of the controller state; see the module docstring."""

    def __init__(
        self,
        *,
        store: StateStore,
        state: ControllerState,
        clock: Clock = monotonic_ms,
        timing: DriverTiming = DriverTiming(),
    ) -> None:
        self._store = store
        self._state = state
        self.clock = clock
        self.timing = timing
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self._closing = False
        self._image_json: tuple[int, bytes] | None = None
        # Read by the metrics collector (metrics.py) at scrape time; plain ints keep Prometheus out of here.
        self.saves = 0
        self.save_failures = 0

    @classmethod
    async def open(
        cls,
        store: StateStore,
        *,
        config_overrides: Mapping[str, Any] | None = None,
        clock: Clock = monotonic_ms,
        timing: DriverTiming = DriverTiming(),
        cluster_id: str | None = None,
        seed: int | None = None,
    ) -> ControllerService:
        """Load the saved state (restarting every session) or bootstrap a new cluster.

        `config_overrides` are ControllerConfig fields the driver's settings
        own; they replace the saved values, other saved settings are kept.
        `cluster_id` and `seed` only matter for a new cluster (random if None).
        """
        overrides = dict(config_overrides or {})
        loaded = await store.load()
        if loaded is None:
            state = ControllerState.bootstrap(
                cluster_id=cluster_id or new_cluster_id(),
                seed=seed if seed is not None else int.from_bytes(os.urandom(8), "big"),
                config=ControllerConfig(**overrides),
            )
            await store.save(state)  # the cluster id must not change on the next start
            log.info("new cluster %s", state.image.cluster_id)
        else:
            config = dataclasses.replace(loaded.config, **overrides)
            state = loaded if config == loaded.config else dataclasses.replace(loaded, config=config)
            state = apply(state, ControllerActivated(), clock()).state
            if state.config != loaded.config:
                await store.save(state)
            log.info(
                "loaded cluster %s at metadata version %d (%d brokers, %d topics); sessions restarted",
                state.image.cluster_id,
                state.image.version,
                len(state.image.brokers),
                len(state.image.topics),
            )
        return cls(store=store, state=state, clock=clock, timing=timing)

    # -- reading -------------------------------------------------------------

    @property
    def state(self) -> ControllerState:
        return self._state

    @property
    def image(self) -> MetadataImage:
        return self._state.image

    def image_json(self) -> bytes:
        """The current image as JSON, serialised once per version (many brokers poll it)."""
        image = self._state.image
        cached = self._image_json
        if cached is None or cached[0] != image.version:
            cached = (image.version, orjson.dumps(image.to_dict()))
            self._image_json = cached
        return cached[1]

    async def wait_for_change(self, since: int, *, wait_ms: int) -> MetadataImage:
        """The image once its version differs from `since`, or after `wait_ms`, or at shutdown."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(wait_ms, self.timing.max_wait_ms) / 1000
        while self._state.image.version == since and not self._closing:
            changed = self._changed
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                break
        return self._state.image

    def preview(self, event: Event) -> Decision:
        """What `event` would do now, changing nothing (validate_only requests)."""
        return apply(self._state, event, self.clock())

    # -- writing -------------------------------------------------------------

    async def submit(self, event: Event) -> Decision:
        """Apply, persist, adopt; a refusal comes back as `Decision.error`.

        Shielded: a client that hangs up mid-way cannot leave a saved state
        unadopted. Raises ApiError: KAFKA_STORAGE_ERROR when the save failed,
        NOT_CONTROLLER when the service is shutting down.
        """
        if self._closing:
            raise ApiError.from_controller(ControllerError.NOT_CONTROLLER, "the controller is shutting down")
        task = asyncio.ensure_future(self._submit(event))
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def _submit(self, event: Event) -> Decision:
        async with self._lock:
            old = self._state
            decision = apply(old, event, self.clock())
            if decision.error is not None:
                return decision
            if must_persist(old, decision):
                try:
                    await self._store.save(decision.state)
                except OSError as exc:
                    self.save_failures += 1
                    log.error("cannot save the controller state (%s); %s not applied", exc, type(event).__name__)
                    raise ApiError.storage(f"cannot save the controller state: {exc}") from exc
                self.saves += 1
            self._state = decision.state
            for action in decision.actions:
                log.info("%s", _describe(action.to_dict()))
            if decision.image_changed:
                self._wake()
            return decision

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- the driver loop -----------------------------------------------------

    async def run_driver(self) -> None:
        """Session checks every tick, preferred-leader elections now and then; until cancelled."""
        loop = asyncio.get_running_loop()
        next_election = loop.time() + self.timing.preferred_election_interval_s
        while True:
            await asyncio.sleep(self.timing.tick_interval_s)
            await self._tick(AdvanceTime())
            if loop.time() >= next_election:
                next_election = loop.time() + self.timing.preferred_election_interval_s
                await self._tick(ElectPreferredLeaders())

    async def _tick(self, event: Event) -> None:
        try:
            decision = await self.submit(event)
        except ApiError as exc:  # a failed save: the next tick tries again
            log.warning("%s not applied: %s", type(event).__name__, exc)
            return
        if decision.error is not None:  # pragma: no cover - timer events are never refused
            log.warning("%s refused: %s %s", type(event).__name__, decision.error.name, decision.message)

    # -- shutdown ------------------------------------------------------------

    def begin_close(self) -> None:
        """Refuse new changes and release every long-poll (they answer "unchanged")."""
        self._closing = True
        self._wake()

    async def close(self) -> None:
        """Wait for the change in progress, if any, then release the store."""
        self.begin_close()
        async with self._lock:
            await self._store.close()


def _retrieve(task: asyncio.Task[Any]) -> None:
    # The shielded task's exception is re-raised to the waiting caller; if
    # that caller was cancelled, fetching it here keeps asyncio from warning.
    if not task.cancelled():
        task.exception()


def _describe(action: dict[str, Any]) -> str:
    kind = action.pop("type")
    return kind + " " + " ".join(f"{k}={v}" for k, v in action.items())
