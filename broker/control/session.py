"""This broker's session with the controller (`controller.url` set): register, heartbeat, follow the image.

Flow (operator/service/README.md, "For brokers"; KIP-631):

1. `start`: register with a fresh incarnation id (fenced), adopt the
   controller's cluster id (refusing log dirs of another cluster), pull the
   full image (`since=-1`) and apply it (`image.py`), then run three loops:
   - heartbeat every broker.heartbeat.interval.ms with the applied image
     version (the first one unfences us); STALE_BROKER_EPOCH /
     BROKER_ID_NOT_REGISTERED re-register with the same incarnation id;
   - metadata long-poll (`since=<applied>`), applying each newer image;
   - replication tick: ISR shrink / expand via AlterPartition (KIP-497) for
     partitions we lead, and the HW checkpoint.
2. Client admin requests are forwarded by `forwarding.py`, which waits here
   (`wait_for_version`) until the image holding the change is applied.

`stop(fence=True)` sends a last heartbeat with want_fence so the controller
moves leadership away at once (Kafka's controlled shutdown); `fence=False`
behaves like a crash (tests use it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from tinystream.broker.control.image import ImageApplier
from tinystream.broker.coordinators.producer_ids import ProducerIdsUnavailable
from tinystream.broker.metadata.cluster import ClusterView
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.replication.replica_fetcher import ReplicaFetcherManager
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.topics.manager import TopicManager
from tinystream.config.settings import BrokerSettings
from tinystream.controller_client import (
    REREGISTER_ERRORS,
    ControllerClient,
    ControllerClientError,
    ControllerRefused,
    ControllerUnavailable,
)

log = logging.getLogger(__name__)

METADATA_WAIT_MS = 5000
RETRY_S = 0.2
#: AlterPartition refusals after which this leadership stands as it was (Kafka's: the request itself was
#: wrong or named a replica the controller will not add); any other refusal may mean the controller moved on.
SETTLED_REFUSALS = frozenset({"INVALID_REQUEST", "INELIGIBLE_REPLICA", "UNKNOWN_TOPIC_OR_PARTITION"})
#: How long an admin request waits for its change to reach this broker's image.
ADMIN_WAIT_S = 10.0
#: The controller's session until it tells us its own (broker.session.timeout.ms's default).
DEFAULT_SESSION_TIMEOUT_MS = 9000


def heartbeat_timeout_s(session_timeout_ms: int) -> float:
    """How long one heartbeat (or metadata) call may take: a third of the session, at least 0.5 s.

    Heartbeats go one at a time, so a call that hangs holds back the next. A connection that went silent
    (the controller's pod gone without a reset, its keep-alive connection still pooled here) hangs until
    the call's timeout: longer than the session, and the controller that took over fences this broker.
    Within a third, the next heartbeat (on a new connection) still lands inside the session, as long as
    broker.heartbeat.interval.ms is under a third of it too (the defaults: 2 s of 9 s).
    """
    return max(session_timeout_ms / 3000, 0.5)


class ControllerSession:
    """Registration, heartbeats, the metadata long-poll and ISR reports of one broker."""

    def __init__(
        self,
        *,
        settings: BrokerSettings,
        controller: ControllerClient,
        cluster: ClusterView,
        topics: TopicManager,
        replicas: ReplicaManager,
        fetchers: ReplicaFetcherManager,
        applier: ImageApplier,
        clock: Callable[[], int],
        adopt_cluster_id: Callable[[str], None] | None = None,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.controller = controller
        self.cluster = cluster
        self.topics = topics
        self.replicas = replicas
        self.fetchers = fetchers
        self.applier = applier
        self.clock = clock
        self._adopt_cluster_id = adopt_cluster_id
        self._joined = False  # the controller's cluster id adopted
        # Called (once) when this broker must stop: the controller now names another cluster.
        self._on_fatal = on_fatal
        self.fatal_error: str | None = None  # set: nothing more is applied, so nothing is deleted
        self.broker_id = settings.broker_id
        self.incarnation_id = uuid.uuid4().hex
        self.broker_epoch = -1
        self.session_timeout_ms = DEFAULT_SESSION_TIMEOUT_MS  # the controller's, from each registration
        self._applied = asyncio.Condition()
        self._tasks: list[asyncio.Task[Any]] = []
        self._altering: set[TopicPartition] = set()
        self._alter_tasks: set[asyncio.Task[Any]] = set()

    @property
    def version(self) -> int:
        """The applied image's version (-1 before the first)."""
        return self.applier.version

    @property
    def image(self) -> dict[str, Any] | None:
        return self.applier.image

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        cluster_id = await self._register()
        if self._adopt_cluster_id is not None:
            self._adopt_cluster_id(cluster_id)  # raises before any partition is opened
        else:
            self.cluster.cluster_id = cluster_id
        self._joined = True
        while True:
            try:
                reply = await self.controller.metadata(since=-1)
                break
            except ControllerUnavailable as exc:
                log.warning("controller unavailable (%s); retrying", exc)
                await asyncio.sleep(RETRY_S)
        assert reply.image is not None
        await self._apply(reply.image)
        self._tasks = [
            asyncio.ensure_future(self._heartbeat_loop()),
            asyncio.ensure_future(self._metadata_loop()),
            asyncio.ensure_future(self._replication_loop()),
        ]
        # One heartbeat now so we are unfenced before clients are told we are ready.
        with contextlib.suppress(ControllerClientError):
            await self._heartbeat()

    async def stop(self, *, fence: bool = True) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for task in list(self._alter_tasks):
            task.cancel()
        self.applier.cancel()
        await self.fetchers.stop()
        if fence and self.broker_epoch >= 0:
            with contextlib.suppress(ControllerClientError, asyncio.TimeoutError):
                await asyncio.wait_for(self.controller.heartbeat(
                    self.broker_id, broker_epoch=self.broker_epoch, metadata_version=self.version, want_fence=True,
                ), 2.0)
        await self.controller.close()

    async def _register(self) -> str:
        """Register (again); returns the controller's cluster id."""
        local = self.cluster.local
        while True:
            try:
                reply = await self.controller.register_broker(
                    broker_id=self.broker_id, incarnation_id=self.incarnation_id,
                    host=local.host, port=local.port, rack=local.rack,
                    endpoints=[{"name": a.name, "host": a.host, "port": a.port, "security_protocol": a.security_protocol}
                               for a in local.listeners],
                )
                self.broker_epoch = reply.broker_epoch
                self.session_timeout_ms = reply.session_timeout_ms
                log.info("broker %d registered with the controller, epoch %d", self.broker_id, self.broker_epoch)
                if self._joined and reply.cluster_id != self.cluster.cluster_id:
                    self._fail(reply.cluster_id)
                return reply.cluster_id
            except ControllerUnavailable as exc:
                log.warning("controller unavailable (%s); retrying registration", exc)
                await asyncio.sleep(RETRY_S)

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """The next producer-id block from the controller (KIP-730): (start, length).

        A stale epoch is left to the heartbeat loop, which re-registers; the
        caller gets a retriable ProducerIdsUnavailable meanwhile.
        """
        try:
            block = await self.controller.allocate_producer_ids(self.broker_id, self.broker_epoch)
        except ControllerClientError as exc:
            raise ProducerIdsUnavailable(f"the controller gave no producer ids: {exc}") from exc
        return block.producer_id_start, block.producer_id_len

    # -- loops ------------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        try:
            reply = await self.controller.heartbeat(
                self.broker_id, broker_epoch=self.broker_epoch, metadata_version=self.version,
                timeout_s=heartbeat_timeout_s(self.session_timeout_ms),
            )
        except ControllerRefused as exc:
            if exc.error in REREGISTER_ERRORS:
                await self._register()
                return
            raise
        if reply.newer_image_available:
            await self.pull(wait_ms=0)

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.broker_heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._heartbeat()
            except ControllerClientError as exc:
                log.debug("heartbeat failed: %s", exc)

    async def pull(self, *, wait_ms: int) -> None:
        """Fetch and apply a newer image, waiting up to `wait_ms` for one (the call bounded as a heartbeat)."""
        reply = await self.controller.metadata(since=self.version, wait_ms=wait_ms,
                                               timeout_s=heartbeat_timeout_s(self.session_timeout_ms))
        if reply.image is not None and reply.version > self.version:
            await self._apply(reply.image)

    async def _metadata_loop(self) -> None:
        while True:
            try:
                await self.pull(wait_ms=METADATA_WAIT_MS)
            except asyncio.CancelledError:
                raise
            except ControllerClientError as exc:
                log.debug("metadata pull failed: %s", exc)
                await asyncio.sleep(RETRY_S)
            except Exception:
                log.exception("applying a metadata image failed")
                await asyncio.sleep(RETRY_S)

    async def _replication_loop(self) -> None:
        lag = self.settings.replica_lag_time_max_ms
        period = min(max(lag / 4000, 0.1), 1.0)
        ticks = 0
        while True:
            await asyncio.sleep(period)
            ticks += 1
            now = self.clock()
            eligible = self.applier.eligible_for_isr()
            for partition in self.replicas.partitions():
                if partition.tp in self._altering:
                    continue
                isr = partition.isr_change(now, lag, eligible)
                if isr is None:
                    self.replicas.settle_isr_change(partition)  # none in flight, none wanted: the committed ISR counts
                else:
                    partition.isr_change_sent(isr)
                    self._altering.add(partition.tp)
                    task = asyncio.ensure_future(self._alter_isr(partition.tp, isr))
                    self._alter_tasks.add(task)
                    task.add_done_callback(self._alter_tasks.discard)
            if ticks % max(int(5 / period), 1) == 0:
                self.replicas.write_hw_checkpoint()

    async def _alter_isr(self, tp: TopicPartition, isr: tuple[int, ...]) -> None:
        try:
            partition = self.replicas.get(tp)
            epoch = self.applier.partition_epochs.get(tp)
            if partition is None or epoch is None or not partition.is_leader:
                return
            log.info("%s: asking the controller for ISR %s (was %s)", tp, list(isr), list(partition.state.isr))
            try:
                reply = await self.controller.alter_partition(
                    broker_id=self.broker_id, broker_epoch=self.broker_epoch, topic=tp.topic,
                    partition=tp.partition, leader_epoch=partition.leader_epoch, partition_epoch=epoch, isr=isr,
                )
            except ControllerClientError as exc:
                log.info("%s: AlterPartition refused (%s); waiting for newer metadata", tp, exc)
                if exc.error in SETTLED_REFUSALS:  # this leadership stands: the committed ISR counts again
                    self.replicas.settle_isr_change(partition)
                # Else (fenced, stale, no answer) the controller may have moved on: the maximal ISR holds
                # until newer metadata ends this leader epoch or the next pass asks again.
                await asyncio.sleep(RETRY_S)
                return
            new = reply.partition
            current = self.replicas.get(tp)
            if current is None or current.leader_epoch != new.leader_epoch or new.leader != self.broker_id:
                return  # moved on: the metadata image with the new epoch ends the maximal ISR
            state = PartitionState(new.leader, new.leader_epoch, tuple(new.replicas), tuple(new.isr))
            self.applier.partition_epochs[tp] = new.partition_epoch
            self.topics.image_states[tp] = state
            current.update_state(state, now_ms=self.clock())
            current.isr_change_settled()
            self.replicas.notify_changed(tp)
        finally:
            self._altering.discard(tp)

    # -- the applied image ------------------------------------------------------------------

    def _fail(self, cluster_id: object) -> None:
        """The controller names another cluster (its state reset, or a wrong controller.url): stop, keep the data.

        Applying that cluster's image would delete every partition it does not
        list, which is all of them: acknowledged data lost by one reset status.
        """
        if self.fatal_error is None:
            self.fatal_error = (f"the controller now names cluster {cluster_id}, but this broker's data belongs to "
                                f"cluster {self.cluster.cluster_id}; stopping without applying its metadata (no data "
                                "is deleted). Restore the controller's state, or point controller.url at its cluster")
            log.critical("%s", self.fatal_error)
            if self._on_fatal is not None:
                self._on_fatal(self.fatal_error)

    async def _apply(self, image: dict[str, Any]) -> None:
        if self.fatal_error is not None or int(image["version"]) <= self.version:
            return
        if self._joined and image.get("cluster_id") not in (None, self.cluster.cluster_id):
            self._fail(image.get("cluster_id"))
            return
        self.applier.apply(image)
        async with self._applied:
            self._applied.notify_all()

    async def wait_for_version(self, version: int, timeout_s: float = ADMIN_WAIT_S) -> bool:
        """Whether this broker applied an image at least `version` within `timeout_s`."""
        async def reached() -> None:
            async with self._applied:
                await self._applied.wait_for(lambda: self.version >= version)

        if self.version >= version:
            return True
        with contextlib.suppress(ControllerClientError):
            await self.pull(wait_ms=0)
        try:
            await asyncio.wait_for(reached(), timeout_s)
            return True
        except TimeoutError:
            return False
