"""Rebalance proposals and their execution on one controller service: the steps both drivers share.

The local controller's HTTP API (http_api.py, /v1/rebalance/*) and the
Kubernetes operator (TinyStreamRebalance resources, controller_host.py) call
these with their own `Submit`, which raises their own refusal; the decisions
are pure (tinystream.operator.controller.rebalance). Stateless: the caller
holds the reviewed moves and passes them to execute, verify and stop.

    execute  refuse first (a dry run), then the topics' throttled-replicas entries, with a rate the
             involved brokers' leader/follower.replication.throttled.rate (one AlterBrokerConfigs), then the moves
    verify   what is left; when nothing is: take the entries and the rates out, elect the preferred leaders
    stop     cancel the moves still running (KIP-455), take the entries and the rates out

Rates (kafka-reassign-partitions --throttle, set by the controller): execute
sets a rate key only on an involved broker (a source or destination of a
move) whose own layer has no value for it, so a rate set by hand stays. Being
stateless, verify and stop are given the same rate and delete, on any
broker, a rate key whose own value is exactly that rate: the ones execute
set (a hand-set rate of the very same number goes too). Other keys and the
cluster default are never touched.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tinystream.operator.controller import (
    AlterBrokerConfigs,
    AlterTopicConfig,
    BrokerConfigAlteration,
    BrokerConfigOp,
    Decision,
    ElectPreferredLeaders,
    Event,
    ReassignPartitions,
    ReplicaAssignment,
    TopicPartition,
)
from tinystream.operator.controller.image import MetadataImage
from tinystream.operator.controller.rebalance import Mode, Proposal, model_from_image, propose
from tinystream.operator.controller.rebalance.execution import config_change, remaining, throttles_for

Moves = Mapping[tuple[str, int], tuple[int, ...]]
MODES: Mapping[str, Mode] = {m.value: m for m in Mode}
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


class Submit(Protocol):
    """Submit an event (or with validate_only, preview it); raises the driver's error on a refusal."""

    async def __call__(self, event: Event, *, validate_only: bool = False) -> Decision: ...


class Image(Protocol):
    @property
    def image(self) -> MetadataImage: ...


@dataclass(frozen=True, slots=True)
class Progress:
    remaining: tuple[tuple[str, int], ...]
    topics: tuple[str, ...] = ()  # throttled (execute) or unthrottled (verify, stop)
    cancelled: tuple[tuple[str, int], ...] = ()
    rate_brokers: tuple[int, ...] = ()  # whose rates this step set (execute) or removed (verify, stop)

    @property
    def done(self) -> bool:
        return not self.remaining


async def proposal(service: Image, mode: str, brokers: Sequence[int], sizes: Mapping[tuple[str, int], int], *,
                   members: Collection[int] | None = None) -> Proposal:
    """The proposal on the current image; planning runs on a thread (seconds on a large cluster), off the
    loop that answers brokers' heartbeats. `members` (the node pools' ids on Kubernetes): only these may
    receive replicas, None: every registered broker. Raises ValueError for an unknown mode, PlacementError
    for input no plan can meet."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    model = model_from_image(service.image, sizes=sizes)
    if members is not None:
        model = dataclasses.replace(model, excluded=model.excluded | (frozenset(model.brokers) - frozenset(members)))
    return await asyncio.to_thread(propose, model, MODES[mode], brokers)


async def _throttle(service: Image, submit: Submit, moves: Moves, *, add: bool) -> tuple[str, ...]:
    changed = []
    image = service.image
    for topic, throttle in throttles_for(image, moves).items():
        record = image.topic(topic)
        change = config_change(record.config if record else {}, throttle, add=add)
        if change:
            await submit(AlterTopicConfig(topic=topic, config=change))
            changed.append(topic)
    return tuple(changed)


def involved_brokers(image: MetadataImage, moves: Moves) -> tuple[int, ...]:
    """The sources and destinations of the moves: each moved partition's replicas now and its target."""
    found: set[int] = set()
    for (topic, partition), target in moves.items():
        record = image.partition(topic, partition)
        found.update(target)
        if record is not None:
            found.update(record.replicas)
    return tuple(sorted(found))


def check_rate(rate: int | None) -> None:
    """Raises ValueError for a rate that is no positive integer (bytes per second)."""
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or rate < 1):
        raise ValueError(f"throttle_rate must be a positive integer (bytes per second), got {rate!r}")


def rate_alterations(image: MetadataImage, brokers: Sequence[int], rate: int,
                     *, add: bool) -> tuple[BrokerConfigAlteration, ...]:
    """The per-broker ops that set the rate where a broker has no own value (add) or delete a broker's rate
    keys whose value is exactly `rate` (remove; with `brokers` every broker in the image's layers). Pure."""
    layers = image.broker_configs.brokers
    alterations = []
    for broker in brokers:
        own = layers.get(str(broker), {})
        keys = [k for k in RATE_KEYS if (k not in own if add else own.get(k) == str(rate))]
        if keys:
            alterations.append(BrokerConfigAlteration(resource=str(broker), ops=tuple(
                BrokerConfigOp(key=k, op="SET", value=str(rate)) if add else BrokerConfigOp(key=k, op="DELETE")
                for k in keys)))
    return tuple(alterations)


async def _rates(service: Image, submit: Submit, brokers: Sequence[int], rate: int | None,
                 *, add: bool) -> tuple[int, ...]:
    if rate is None:
        return ()
    alterations = rate_alterations(service.image, brokers, rate, add=add)
    if alterations:
        await submit(AlterBrokerConfigs(alterations=alterations))  # all brokers or none
    return tuple(int(a.resource) for a in alterations)


def _rated_brokers(image: MetadataImage) -> tuple[int, ...]:
    return tuple(int(b) for b in image.broker_configs.brokers)


async def execute(service: Image, submit: Submit, moves: Moves, *, throttle: bool,
                  rate: int | None = None) -> Progress:
    """Start the moves; `throttle` adds the topics' throttled-replicas entries, `rate` (bytes/s, implies
    throttle) also the involved brokers' rates. Raises ValueError for a rate below 1."""
    check_rate(rate)
    event = ReassignPartitions(assignments=tuple(ReplicaAssignment(topic=t, partition=p, replicas=tuple(r))
                                                 for (t, p), r in moves.items()))
    await submit(event, validate_only=True)  # refused before any throttle is set
    throttled = await _throttle(service, submit, moves, add=True) if throttle or rate is not None else ()
    rated = await _rates(service, submit, involved_brokers(service.image, moves), rate, add=True)
    await submit(event)
    return Progress(remaining=tuple(remaining(service.image, moves)), topics=throttled, rate_brokers=rated)


async def verify(service: Image, submit: Submit, moves: Moves, *, rate: int | None = None) -> Progress:
    """What is left; when nothing is, the topics' entries and (given execute's `rate`) the rates go."""
    check_rate(rate)
    left = tuple(remaining(service.image, moves))
    if left:
        return Progress(remaining=left)
    unthrottled = await _throttle(service, submit, moves, add=False)
    unrated = await _rates(service, submit, _rated_brokers(service.image), rate, add=False)
    image = service.image
    elect = tuple(TopicPartition(t, p) for t, p in moves if image.partition(t, p) is not None)
    if elect:
        await submit(ElectPreferredLeaders(partitions=elect))
    return Progress(remaining=(), topics=unthrottled, rate_brokers=unrated)


async def stop(service: Image, submit: Submit, moves: Moves, *, rate: int | None = None) -> Progress:
    """Cancel the running moves, then take the topics' entries and (given execute's `rate`) the rates out."""
    check_rate(rate)
    image = service.image
    running = tuple(key for key in remaining(image, moves) if image.partition(*key).reassigning)  # type: ignore[union-attr]
    if running:
        await submit(ReassignPartitions(
            assignments=tuple(ReplicaAssignment(topic=t, partition=p, replicas=None) for t, p in running)))
    unthrottled = await _throttle(service, submit, moves, add=False)
    unrated = await _rates(service, submit, _rated_brokers(service.image), rate, add=False)
    return Progress(remaining=tuple(remaining(service.image, moves)), topics=unthrottled, cancelled=running,
                    rate_brokers=unrated)
