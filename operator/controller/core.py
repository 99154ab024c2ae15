"""`apply(state, event, now_ms) -> Decision`: the controller, as one function.

Flow of one call:

1. the handler for the event's type validates it against the state; a
   refusal returns a Decision with the Kafka error and the *same* state;
2. it changes a working copy (builder.py): brokers, topics, partitions;
3. every partition is settled (settle.py) whenever brokers, configs or
   partitions changed, so leaders, ISRs and reassignments always obey the
   rules in invariants.py;
4. the builder freezes the next image (version + 1) if anything in it
   changed, bumping epochs and listing partition actions.

No I/O, no clock, no randomness: time comes in as `now_ms`, randomness from
the state's IdSource. The same state and events always give the same result,
so a driver can replay, test and persist it freely.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tinystream.config.broker_configs import Refused
from tinystream.operator.controller.access import (
    acl_problem,
    binding,
    binding_filter,
    credential_problem,
    matching,
    record,
)
from tinystream.operator.controller.actions import (
    AclsCreated,
    AclsDeleted,
    Action,
    BrokerConfigsChanged,
    BrokerDrained,
    BrokerFenced,
    BrokerRegistered,
    BrokerUndrained,
    BrokerUnfenced,
    BrokerUnregistered,
    ClientQuotasChanged,
    FenceReason,
    PartitionsCreated,
    ProducerIdsAllocated,
    ReassignmentCancelled,
    ReassignmentStarted,
    ScramCredentialsChanged,
    TopicConfigChanged,
    TopicCreated,
    TopicDeleted,
)
from tinystream.operator.controller.broker_configs import fold as fold_broker_configs
from tinystream.operator.controller.builder import ImageBuilder
from tinystream.operator.controller.config import PreferredElection
from tinystream.operator.controller.election import elect_leader
from tinystream.operator.controller.errors import ControllerError, PlacementError
from tinystream.operator.controller.events import (
    AdvanceTime,
    AllocateProducerIds,
    AlterBrokerConfigs,
    AlterClientQuotas,
    AlterPartition,
    AlterScramCredentials,
    AlterTopicConfig,
    BrokerHeartbeat,
    ControllerActivated,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    DeleteAcls,
    DeleteTopic,
    DrainBroker,
    ElectPreferredLeaders,
    Event,
    ExpireSession,
    ReassignPartitions,
    RegisterBroker,
    UndrainBroker,
    UnregisterBroker,
)
from tinystream.operator.controller.image import (
    SECURITY_PROTOCOLS,
    BrokerRecord,
    MetadataImage,
    PartitionRecord,
    TopicRecord,
)
from tinystream.operator.controller.isr import check_alter_partition
from tinystream.operator.controller.liveness import BrokerSession, caught_up, expired_brokers
from tinystream.operator.controller.placement import assign_replicas
from tinystream.operator.controller.quotas import alteration_problem, altered, entity_name
from tinystream.operator.controller.reassignment import revert_reassignment, start_reassignment
from tinystream.operator.controller.settle import settle_partition
from tinystream.operator.controller.state import ControllerState
from tinystream.operator.controller.topic_config import config_error, unclean_election_enabled

# Kafka's topic name rule (Topic.validate): legal characters, at most 249 of them.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# Not a Kafka limit: a guard so one request cannot make the controller build
# millions of partition records.
MAX_PARTITIONS_PER_TOPIC = 100_000
# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE: one AllocateProducerIds
# call per thousand idempotent producers keeps the controller out of the way.
PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The result of one event.

    `state` is the next state (the input state itself when nothing changed or
    the event was refused). `image_changed` is true exactly when
    `state.image.version` grew (by one). `error` is None on success.
    """

    state: ControllerState
    image_changed: bool
    actions: tuple[Action, ...] = ()
    error: ControllerError | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def image(self) -> MetadataImage:
        return self.state.image


class _Rejected(Exception):
    def __init__(self, error: ControllerError, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def apply(state: ControllerState, event: Event, now_ms: int) -> Decision:
    """Apply one event at time `now_ms` (milliseconds, any monotonic origin)."""
    handler = _HANDLERS.get(type(event))
    if handler is None:
        return Decision(
            state=state,
            image_changed=False,
            error=ControllerError.INVALID_REQUEST,
            message=f"unknown event {type(event).__name__}",
        )
    step = _Step(state, now_ms)
    try:
        handler(step, event)
    except _Rejected as rejected:
        return Decision(state=state, image_changed=False, error=rejected.error, message=rejected.message)
    return step.decide()


class _Step:
    """One event in progress: the working image plus the state around it."""

    def __init__(self, state: ControllerState, now_ms: int) -> None:
        self.state = state
        self.now_ms = now_ms
        self.config = state.config
        self.image = ImageBuilder(state.image)
        self.sessions = dict(state.sessions)
        self.sessions_changed = False
        self.ids = state.ids
        self.next_producer_id_start = state.next_producer_id_start

    # -- helpers -------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRecord:
        record = self.image.brokers.get(broker_id)
        if record is None:
            raise _Rejected(ControllerError.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered")
        return record

    def touch(self, broker_id: int, *, metadata_version: int | None = None) -> None:
        old = self.sessions.get(broker_id)
        version = metadata_version if metadata_version is not None else (old.metadata_version if old else -1)
        last = max(self.now_ms, old.last_contact_ms) if old else self.now_ms
        self.sessions[broker_id] = BrokerSession(last_contact_ms=last, metadata_version=version)
        self.sessions_changed = True

    def fence(self, broker_id: int, reason: FenceReason) -> None:
        record = self.image.brokers[broker_id]
        if record.fenced:
            return
        self.image.set_broker(dataclasses.replace(record, fenced=True))
        self.image.actions.append(BrokerFenced(broker_id=broker_id, reason=reason))
        self.settle()

    def unclean_allowed(self, topic: TopicRecord) -> bool:
        return unclean_election_enabled(topic.config, cluster_default=self.config.unclean_leader_election_enable)

    def settle(self, *, preferred: Callable[[str, int], bool] | None = None) -> None:
        """Settle every partition; `preferred` picks extra preferred-leader elections."""
        view = self.image.view()
        immediate = self.config.preferred_leader_election is PreferredElection.IMMEDIATE
        for name in self.image.topic_names():
            topic = self.image.topic(name)
            assert topic is not None
            unclean = self.unclean_allowed(topic)
            for p in list(self.image.partitions(name)):
                wants_preferred = immediate or (preferred is not None and preferred(name, p.partition))
                settled, reason = settle_partition(p, view=view, unclean_allowed=unclean, preferred=wants_preferred)
                if settled != p:
                    self.image.update_partition(name, settled, reason=reason)

    def decide(self) -> Decision:
        image = self.image.finish()
        actions = tuple(self.image.actions)
        unchanged = (
            image is None
            and not self.sessions_changed
            and self.ids == self.state.ids
            and self.next_producer_id_start == self.state.next_producer_id_start
        )
        if unchanged:
            return Decision(state=self.state, image_changed=False, actions=actions)
        state = ControllerState(
            image=image if image is not None else self.state.image,
            ids=self.ids,
            config=self.config,
            sessions=self.sessions,
            next_producer_id_start=self.next_producer_id_start,
        )
        return Decision(state=state, image_changed=image is not None, actions=actions)

    def topic(self, name: str) -> TopicRecord:
        record = self.image.topic(name)
        if record is None:
            raise _Rejected(ControllerError.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return record

    def partition(self, name: str, index: int) -> PartitionRecord:
        self.topic(name)
        record = self.image.partition(name, index)
        if record is None:
            raise _Rejected(ControllerError.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}-{index} does not exist")
        return record


# -- brokers -----------------------------------------------------------------------


def _check_endpoints(e: RegisterBroker) -> None:
    names = [endpoint.name for endpoint in e.endpoints]
    if len(names) != len(set(names)):
        raise _Rejected(ControllerError.INVALID_REQUEST, f"listener names repeat in {names}")
    for endpoint in e.endpoints:
        if not endpoint.name or not endpoint.host:
            raise _Rejected(ControllerError.INVALID_REQUEST, "an endpoint needs a listener name and a host")
        if not 0 < endpoint.port <= 65535:
            raise _Rejected(ControllerError.INVALID_REQUEST, f"listener {endpoint.name}: port {endpoint.port} is out of range")
        if endpoint.security_protocol not in SECURITY_PROTOCOLS:
            raise _Rejected(ControllerError.INVALID_REQUEST, f"listener {endpoint.name}: security protocol "
                            f"{endpoint.security_protocol!r} is not one of {SECURITY_PROTOCOLS}")


def _register(step: _Step, e: RegisterBroker) -> None:
    if e.broker_id < 0:
        raise _Rejected(ControllerError.INVALID_REQUEST, f"broker id {e.broker_id} is negative")
    if not e.incarnation_id:
        raise _Rejected(ControllerError.INVALID_REQUEST, "incarnation id is empty")
    if not 0 <= e.port <= 65535:
        raise _Rejected(ControllerError.INVALID_REQUEST, f"port {e.port} is out of range")
    _check_endpoints(e)
    existing = step.image.brokers.get(e.broker_id)
    if existing is not None and existing.incarnation_id == e.incarnation_id:
        # A retried registration: amend the endpoint, keep epoch and fencing.
        step.image.set_broker(dataclasses.replace(existing, host=e.host, port=e.port, rack=e.rack,
                                                  endpoints=e.endpoints))
        step.touch(e.broker_id)
        return
    # A new broker, or a restarted one: its old session ends now (KIP-631);
    # it stays fenced until a heartbeat shows it has caught up.
    if existing is not None and not existing.fenced:
        step.image.actions.append(BrokerFenced(broker_id=e.broker_id, reason=FenceReason.RESTARTED))
    record = BrokerRecord(
        broker_id=e.broker_id,
        host=e.host,
        port=e.port,
        rack=e.rack,
        endpoints=e.endpoints,
        incarnation_id=e.incarnation_id,
        epoch=step.image.next_version,
        fenced=True,
        # A roll's drain ends with the restart; a scale-down's drain outlives it.
        drained=existing is not None and existing.drained and not existing.drained_until_restart,
        drained_by_scale_down=existing is not None and existing.drained_by_scale_down,
    )
    step.image.set_broker(record)
    if existing is not None and existing.drained and not record.drained:
        step.image.actions.append(BrokerUndrained(broker_id=e.broker_id))
    step.image.actions.append(
        BrokerRegistered(broker_id=e.broker_id, incarnation_id=e.incarnation_id, epoch=record.epoch)
    )
    step.sessions[e.broker_id] = BrokerSession(last_contact_ms=step.now_ms, metadata_version=-1)
    step.sessions_changed = True
    step.settle()


def _heartbeat(step: _Step, e: BrokerHeartbeat) -> None:
    record = step.broker(e.broker_id)
    if e.broker_epoch != record.epoch:
        raise _Rejected(
            ControllerError.STALE_BROKER_EPOCH,
            f"broker {e.broker_id} has epoch {record.epoch}, the heartbeat says {e.broker_epoch}",
        )
    step.touch(e.broker_id, metadata_version=e.metadata_version)
    if e.want_fence:
        step.fence(e.broker_id, FenceReason.REQUESTED)
    elif record.fenced and caught_up(record, metadata_version=e.metadata_version):
        step.image.set_broker(dataclasses.replace(record, fenced=False))
        step.image.actions.append(BrokerUnfenced(broker_id=e.broker_id))
        step.settle()


def _unregister(step: _Step, e: UnregisterBroker) -> None:
    record = step.broker(e.broker_id)
    if not record.fenced:
        step.image.actions.append(BrokerFenced(broker_id=e.broker_id, reason=FenceReason.UNREGISTERED))
    step.image.remove_broker(e.broker_id)
    step.image.actions.append(BrokerUnregistered(broker_id=e.broker_id))
    if step.sessions.pop(e.broker_id, None) is not None:
        step.sessions_changed = True
    step.settle()


def _allocate_producer_ids(step: _Step, e: AllocateProducerIds) -> None:
    """KIP-730 (ProducerIdControlManager.generateNextProducerId): the next block
    of ids goes to a registered broker of the current epoch, fenced or not (a
    starting broker may need ids before it is unfenced). The image does not
    change; the new `next_producer_id_start` must still be saved before the
    block is handed out, or a restarted controller could hand it out again."""
    record = step.broker(e.broker_id)
    if e.broker_epoch != record.epoch:
        raise _Rejected(
            ControllerError.STALE_BROKER_EPOCH,
            f"broker {e.broker_id} has epoch {record.epoch}, the request says {e.broker_epoch}",
        )
    start = step.next_producer_id_start  # int64 ids: 2**53 blocks before Kafka's exhaustion check matters
    step.next_producer_id_start = start + PRODUCER_ID_BLOCK_SIZE
    step.image.actions.append(
        ProducerIdsAllocated(broker_id=e.broker_id, producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE)
    )


def _expire(step: _Step, e: ExpireSession) -> None:
    step.broker(e.broker_id)
    step.fence(e.broker_id, FenceReason.SESSION_EXPIRED)


def _advance(step: _Step, e: AdvanceTime) -> None:
    expired = expired_brokers(
        step.image.brokers, step.sessions, now_ms=step.now_ms, timeout_ms=step.config.broker_session_timeout_ms
    )
    for broker_id in expired:  # one at a time, like KRaft: each sees the ISRs the previous left
        step.fence(broker_id, FenceReason.SESSION_EXPIRED)


def _activated(step: _Step, e: ControllerActivated) -> None:
    for broker_id in step.image.brokers:
        old = step.sessions.get(broker_id)
        step.sessions[broker_id] = BrokerSession(
            last_contact_ms=step.now_ms, metadata_version=old.metadata_version if old else -1
        )
    step.sessions_changed = bool(step.image.brokers)


def _drain(step: _Step, e: DrainBroker) -> None:
    record = step.broker(e.broker_id)
    # A lasting drain (scale-down) wins over a roll's: a restart must not undrain a broker being removed.
    until_restart = e.until_restart and (not record.drained or record.drained_until_restart)
    scale_down = not until_restart and (e.scale_down or record.drained_by_scale_down)
    if (record.drained and record.drained_until_restart == until_restart
            and record.drained_by_scale_down == scale_down):
        return
    step.image.set_broker(dataclasses.replace(record, drained=True, drained_until_restart=until_restart,
                                              drained_by_scale_down=scale_down))
    if not record.drained:
        step.image.actions.append(BrokerDrained(broker_id=e.broker_id))
        step.settle()


def _undrain(step: _Step, e: UndrainBroker) -> None:
    record = step.broker(e.broker_id)
    if record.drained:
        step.image.set_broker(dataclasses.replace(record, drained=False, drained_until_restart=False,
                                                  drained_by_scale_down=False))
        step.image.actions.append(BrokerUndrained(broker_id=e.broker_id))
        step.settle()


# -- topics ------------------------------------------------------------------------


def _new_partitions(step: _Step, assignments: Sequence[Sequence[int]], *, first: int) -> list[PartitionRecord]:
    """Fresh partitions on the given replicas: ISR = eligible replicas, leader elected."""
    view = step.image.view()
    records = []
    for offset, replicas in enumerate(assignments):
        isr = tuple(r for r in replicas if view.isr_eligible(r))
        if not isr:
            isr = tuple(r for r in replicas if view.can_lead(r))[:1]
        if not isr:
            raise _Rejected(
                ControllerError.INVALID_REPLICA_ASSIGNMENT,
                f"partition {first + offset}: none of replicas {list(replicas)} is unfenced",
            )
        election = elect_leader(replicas=replicas, isr=isr, leader=-1, view=view, unclean_allowed=False)
        records.append(
            PartitionRecord(partition=first + offset, replicas=tuple(replicas), isr=isr, leader=election.leader)
        )
    return records


def _check_manual(step: _Step, assignment: Sequence[Sequence[int]], *, rf: int | None) -> None:
    if not assignment:
        raise _Rejected(ControllerError.INVALID_REPLICA_ASSIGNMENT, "the replica assignment is empty")
    sizes = {len(replicas) for replicas in assignment}
    if len(sizes) != 1 or (rf is not None and sizes != {rf}):
        raise _Rejected(
            ControllerError.INVALID_REPLICA_ASSIGNMENT, "all partitions must have the same number of replicas"
        )
    for index, replicas in enumerate(assignment):
        _check_replicas(step, replicas, where=f"partition {index}")


def _check_replicas(step: _Step, replicas: Sequence[int], *, where: str) -> None:
    if not replicas:
        raise _Rejected(ControllerError.INVALID_REPLICA_ASSIGNMENT, f"{where}: no replicas")
    if len(set(replicas)) != len(replicas):
        raise _Rejected(ControllerError.INVALID_REPLICA_ASSIGNMENT, f"{where}: replicas {list(replicas)} repeat a broker")
    unknown = [r for r in replicas if r not in step.image.brokers]
    if unknown:
        raise _Rejected(ControllerError.INVALID_REPLICA_ASSIGNMENT, f"{where}: broker(s) {unknown} are not registered")


def _place(step: _Step, *, partitions: int, rf: int, first: int) -> list[tuple[int, ...]]:
    view = step.image.view()
    brokers = view.placeable()
    if rf > len(brokers):
        raise _Rejected(
            ControllerError.INVALID_REPLICATION_FACTOR,
            f"replication factor {rf} is larger than the {len(brokers)} live, undrained broker(s)",
        )
    start, step.ids = step.ids.next_below(len(brokers))
    shift, step.ids = step.ids.next_below(len(brokers))
    try:
        return assign_replicas(
            brokers=brokers,
            racks={b: step.image.brokers[b].rack for b in brokers},
            partitions=partitions,
            replication_factor=rf,
            start_index=start,
            replica_shift=shift,
            first_partition=first,
        )
    except PlacementError as exc:  # pragma: no cover - arguments were checked above
        raise _Rejected(exc.error, exc.message) from exc


def _create_topic(step: _Step, e: CreateTopic) -> None:
    if not _TOPIC_NAME.fullmatch(e.topic) or e.topic in (".", ".."):
        raise _Rejected(ControllerError.INVALID_TOPIC_EXCEPTION, f"topic name {e.topic!r} is not legal")
    if step.image.topic(e.topic) is not None:
        raise _Rejected(ControllerError.TOPIC_ALREADY_EXISTS, f"topic {e.topic!r} already exists")
    problem = config_error(e.config)
    if problem:
        raise _Rejected(*problem)
    if e.replica_assignment is not None:
        assignment = [tuple(r) for r in e.replica_assignment]
        if e.partitions is not None and e.partitions != len(assignment):
            raise _Rejected(ControllerError.INVALID_REQUEST, "partitions and replica_assignment disagree")
        if len(assignment) > MAX_PARTITIONS_PER_TOPIC:
            raise _Rejected(ControllerError.INVALID_PARTITIONS, f"more than {MAX_PARTITIONS_PER_TOPIC} partitions")
        _check_manual(step, assignment, rf=e.replication_factor)
    else:
        partitions = e.partitions if e.partitions is not None else step.config.num_partitions
        rf = e.replication_factor if e.replication_factor is not None else step.config.default_replication_factor
        if not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
            raise _Rejected(ControllerError.INVALID_PARTITIONS, f"number of partitions {partitions} is out of range")
        if rf < 1:
            raise _Rejected(ControllerError.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0")
        assignment = _place(step, partitions=partitions, rf=rf, first=0)
    _check_partition_limit(step, len(assignment))
    records = _new_partitions(step, assignment, first=0)
    topic_id, step.ids = step.ids.next_uuid()
    step.image.add_topic(TopicRecord(name=e.topic, topic_id=topic_id, config=e.config, partitions=tuple(records)))
    step.image.actions.append(
        TopicCreated(topic=e.topic, topic_id=topic_id, partitions=len(records), replication_factor=len(assignment[0]))
    )


def _check_partition_limit(step: _Step, adding: int) -> None:
    total = sum(len(step.image.partitions(name)) for name in step.image.topic_names()) + adding
    if total > step.config.max_partitions:
        raise _Rejected(ControllerError.POLICY_VIOLATION,
                        f"the cluster would have {total} partitions, more than max.partitions={step.config.max_partitions}")


def _create_partitions(step: _Step, e: CreatePartitions) -> None:
    topic = step.topic(e.topic)
    current = len(step.image.partitions(e.topic))
    if e.count < current:
        raise _Rejected(
            ControllerError.INVALID_PARTITIONS,
            f"topic currently has {current} partitions, which is higher than the requested {e.count}",
        )
    if e.count == current:
        raise _Rejected(ControllerError.INVALID_PARTITIONS, f"topic already has {current} partitions")
    if e.count > MAX_PARTITIONS_PER_TOPIC:
        raise _Rejected(ControllerError.INVALID_PARTITIONS, f"more than {MAX_PARTITIONS_PER_TOPIC} partitions")
    rf = len(step.image.partitions(e.topic)[0].target_replicas)
    if e.replica_assignment is not None:
        assignment = [tuple(r) for r in e.replica_assignment]
        if len(assignment) != e.count - current:
            raise _Rejected(
                ControllerError.INVALID_REPLICA_ASSIGNMENT,
                f"{len(assignment)} replica lists for {e.count - current} new partitions",
            )
        _check_manual(step, assignment, rf=rf)
    else:
        assignment = _place(step, partitions=e.count - current, rf=rf, first=current)
    _check_partition_limit(step, len(assignment))
    records = _new_partitions(step, assignment, first=current)
    step.image.append_partitions(topic.name, records)
    step.image.actions.append(PartitionsCreated(topic=topic.name, partitions=tuple(r.partition for r in records)))


def _delete_topic(step: _Step, e: DeleteTopic) -> None:
    if not step.config.delete_topic_enable:
        raise _Rejected(ControllerError.TOPIC_DELETION_DISABLED, "topic deletion is disabled (delete.topic.enable)")
    topic = step.topic(e.topic)
    step.image.remove_topic(e.topic)
    step.image.actions.append(TopicDeleted(topic=e.topic, topic_id=topic.topic_id))


def _alter_topic_config(step: _Step, e: AlterTopicConfig) -> None:
    topic = step.topic(e.topic)
    problem = config_error(e.config, allow_deletes=True)
    if problem:
        raise _Rejected(*problem)
    merged = dict(e.config) if e.replace else {**topic.config, **e.config}
    config = {k: v for k, v in merged.items() if v is not None}
    if config == dict(topic.config):
        return
    keys = tuple(sorted(k for k in set(config) | set(topic.config) if config.get(k) != topic.config.get(k)))
    step.image.set_topic_config(e.topic, config)
    step.image.actions.append(TopicConfigChanged(topic=e.topic, keys=keys))
    step.settle()  # e.g. unclean.leader.election.enable just turned on


# -- access: ACLs and SCRAM credentials ----------------------------------------------


def _create_acls(step: _Step, e: CreateAcls) -> None:
    for i, r in enumerate(e.acls):
        problem = acl_problem(r)
        if problem:
            raise _Rejected(ControllerError.INVALID_REQUEST, f"acls[{i}]: {problem}")
    have = set(step.image.acls)
    new = tuple(sorted({record(binding(r)) for r in e.acls} - have))  # stored by Kafka's upper-case names
    if new:
        step.image.set_acls([*step.image.acls, *new])
        step.image.actions.append(AclsCreated(acls=new))


def _delete_acls(step: _Step, e: DeleteAcls) -> None:
    filters = []
    for i, f in enumerate(e.filters):
        try:
            filters.append(binding_filter(f))
        except ValueError as exc:
            raise _Rejected(ControllerError.INVALID_REQUEST, f"filters[{i}]: {exc}") from None
    matched = tuple(matching(step.image.acls, f) for f in filters)
    gone = {r for m in matched for r in m}
    if gone:
        step.image.set_acls([r for r in step.image.acls if r not in gone])
    step.image.actions.append(AclsDeleted(matched=matched))


def _alter_scram_credentials(step: _Step, e: AlterScramCredentials) -> None:
    keys = [(c.user, c.mechanism) for c in e.upsertions] + [(d.user, d.mechanism) for d in e.deletions]
    if len(set(keys)) != len(keys):
        raise _Rejected(ControllerError.INVALID_REQUEST, "a (user, mechanism) appears more than once")
    for i, c in enumerate(e.upsertions):
        problem = credential_problem(c)
        if problem:
            raise _Rejected(ControllerError.INVALID_REQUEST, f"upsertions[{i}]: {problem}")
    current = {(c.user, c.mechanism): c for c in step.image.scram_credentials}
    for d in e.deletions:
        if current.pop((d.user, d.mechanism), None) is None:
            raise _Rejected(ControllerError.RESOURCE_NOT_FOUND,
                            f"user {d.user!r} has no {d.mechanism} credential to delete")
    for c in e.upsertions:
        current[(c.user, c.mechanism)] = c
    step.image.set_scram_credentials(list(current.values()))
    step.image.actions.append(ScramCredentialsChanged(users=tuple(sorted({k[0] for k in keys}))))


def _alter_client_quotas(step: _Step, e: AlterClientQuotas) -> None:
    problem = alteration_problem(e.alterations)
    if problem is not None:
        raise _Rejected(ControllerError.INVALID_REQUEST, problem)
    step.image.set_client_quotas(altered(step.image.client_quotas, e.alterations))
    step.image.actions.append(ClientQuotasChanged(entities=tuple(entity_name(dict(a.entity))
                                                                 for a in e.alterations)))


def _alter_broker_configs(step: _Step, e: AlterBrokerConfigs) -> None:
    try:
        record = fold_broker_configs(step.image.broker_configs, e.alterations)
    except Refused as exc:
        raise _Rejected(ControllerError.INVALID_CONFIG if exc.invalid_config else ControllerError.INVALID_REQUEST,
                        str(exc)) from None
    step.image.set_broker_configs(record.default, record.brokers)
    step.image.actions.append(BrokerConfigsChanged(resources=tuple(a.resource for a in e.alterations)))


# -- partitions --------------------------------------------------------------------


def _alter_partition(step: _Step, e: AlterPartition) -> None:
    record = step.broker(e.broker_id)
    if e.broker_epoch != record.epoch:
        raise _Rejected(
            ControllerError.STALE_BROKER_EPOCH,
            f"broker {e.broker_id} has epoch {record.epoch}, the request says {e.broker_epoch}",
        )
    p = step.partition(e.topic, e.partition)
    problem = check_alter_partition(
        partition=p,
        broker_id=e.broker_id,
        leader_epoch=e.leader_epoch,
        partition_epoch=e.partition_epoch,
        new_isr=e.isr,
        recovery_state=e.leader_recovery_state,
        view=step.image.view(),
    )
    if problem:
        raise _Rejected(problem[0], f"{e.topic}-{e.partition}: {problem[1]}")
    if e.isr == p.isr and e.leader_recovery_state is p.leader_recovery_state:
        return
    step.image.update_partition(
        e.topic, dataclasses.replace(p, isr=e.isr, leader_recovery_state=e.leader_recovery_state)
    )
    step.settle()  # may complete a reassignment or hand a drained leader's partition over


def _elect_preferred(step: _Step, e: ElectPreferredLeaders) -> None:
    if e.partitions is None:
        step.settle(preferred=lambda name, index: True)
        return
    wanted = set()
    for tp in e.partitions:
        step.partition(tp.topic, tp.partition)
        wanted.add((tp.topic, tp.partition))
    step.settle(preferred=lambda name, index: (name, index) in wanted)


def _reassign(step: _Step, e: ReassignPartitions) -> None:
    seen = set()
    plan = []
    for a in e.assignments:
        key = (a.topic, a.partition)
        if key in seen:
            raise _Rejected(ControllerError.INVALID_REQUEST, f"{a.topic}-{a.partition} is listed twice")
        seen.add(key)
        p = step.partition(a.topic, a.partition)
        if a.replicas is None:
            if not p.reassigning:
                raise _Rejected(
                    ControllerError.NO_REASSIGNMENT_IN_PROGRESS, f"{a.topic}-{a.partition} is not being reassigned"
                )
            reverted = revert_reassignment(p)
            if reverted is None:
                raise _Rejected(
                    ControllerError.INVALID_REPLICA_ASSIGNMENT,
                    f"cancelling {a.topic}-{a.partition} would leave no in-sync replica",
                )
            plan.append((a, reverted))
        else:
            _check_replicas(step, a.replicas, where=f"{a.topic}-{a.partition}")
            plan.append((a, start_reassignment(p, a.replicas)))
    for a, updated in plan:
        step.image.update_partition(a.topic, updated)
        if a.replicas is None:
            step.image.actions.append(
                ReassignmentCancelled(topic=a.topic, partition=a.partition, replicas=updated.replicas)
            )
        else:
            step.image.note_reassignment(a.topic, a.partition, a.replicas)
            if updated.reassigning:
                step.image.actions.append(
                    ReassignmentStarted(topic=a.topic, partition=a.partition, target=tuple(a.replicas))
                )
    step.settle()


# Each handler takes its own event type; the table is keyed by that type, so the lookup is safe.
_HANDLERS: dict[type[Event], Callable[[_Step, Any], None]] = {
    RegisterBroker: _register,
    BrokerHeartbeat: _heartbeat,
    UnregisterBroker: _unregister,
    AllocateProducerIds: _allocate_producer_ids,
    ExpireSession: _expire,
    AdvanceTime: _advance,
    ControllerActivated: _activated,
    DrainBroker: _drain,
    UndrainBroker: _undrain,
    CreateTopic: _create_topic,
    CreatePartitions: _create_partitions,
    DeleteTopic: _delete_topic,
    AlterTopicConfig: _alter_topic_config,
    AlterPartition: _alter_partition,
    ElectPreferredLeaders: _elect_preferred,
    ReassignPartitions: _reassign,
    CreateAcls: _create_acls,
    DeleteAcls: _delete_acls,
    AlterScramCredentials: _alter_scram_credentials,
    AlterClientQuotas: _alter_client_quotas,
    AlterBrokerConfigs: _alter_broker_configs,
}
