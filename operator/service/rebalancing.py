"""Rebalance proposals and their execution on one controller service: the steps both drivers share.

The local controller's HTTP API (http_api.py, /v1/rebalance/*) and the
Kubernetes operator (TinyStreamRebalance resources, controller_host.py) call
these with their own `Submit`, which raises their own refusal; the decisions
are pure (tinystream.operator.controller.rebalance). Stateless: the caller
holds the reviewed moves and passes them to execute, verify and stop.

    execute  refuse first (a dry run), then the topics' throttled-replicas entries, then the moves
    verify   what is left; when nothing is: take the entries out, elect the preferred leaders
    stop     cancel the moves still running (KIP-455), take the entries out
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tinystream.operator.controller import (
    AlterTopicConfig,
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

    @property
    def done(self) -> bool:
        return not self.remaining


async def proposal(service: Image, mode: str, brokers: Sequence[int], sizes: Mapping[tuple[str, int], int]) -> Proposal:
    """The proposal on the current image; planning runs on a thread (seconds on a large cluster), off the
    loop that answers brokers' heartbeats. Raises ValueError for an unknown mode, PlacementError for input
    no plan can meet."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    model = model_from_image(service.image, sizes=sizes)
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


async def execute(service: Image, submit: Submit, moves: Moves, *, throttle: bool) -> Progress:
    event = ReassignPartitions(assignments=tuple(ReplicaAssignment(topic=t, partition=p, replicas=tuple(r))
                                                 for (t, p), r in moves.items()))
    await submit(event, validate_only=True)  # refused before any throttle is set
    throttled = await _throttle(service, submit, moves, add=True) if throttle else ()
    await submit(event)
    return Progress(remaining=tuple(remaining(service.image, moves)), topics=throttled)


async def verify(service: Image, submit: Submit, moves: Moves) -> Progress:
    left = tuple(remaining(service.image, moves))
    if left:
        return Progress(remaining=left)
    unthrottled = await _throttle(service, submit, moves, add=False)
    image = service.image
    elect = tuple(TopicPartition(t, p) for t, p in moves if image.partition(t, p) is not None)
    if elect:
        await submit(ElectPreferredLeaders(partitions=elect))
    return Progress(remaining=(), topics=unthrottled)


async def stop(service: Image, submit: Submit, moves: Moves) -> Progress:
    image = service.image
    running = tuple(key for key in remaining(image, moves) if image.partition(*key).reassigning)  # type: ignore[union-attr]
    if running:
        await submit(ReassignPartitions(
            assignments=tuple(ReplicaAssignment(topic=t, partition=p, replicas=None) for t, p in running)))
    unthrottled = await _throttle(service, submit, moves, add=False)
    return Progress(remaining=tuple(remaining(service.image, moves)), topics=unthrottled, cancelled=running)
