"""Topic admin as request handlers see it: local, or forwarded to the controller.

Without `controller.url` the broker owns its topics and `TopicManager`
answers (a new topic's partitions opened a slice at a time between turns of
the event loop). With a controller, `ForwardedTopicAdmin`
(control/forwarding.py) forwards the change and answers once this broker applied the image that
holds it (or with the controller's error). Handlers await these functions
and do not care which one answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tinystream.broker.handlers.shared.context import BrokerContext
from tinystream.broker.topics.manager import TopicResult


async def create_topic(ctx: BrokerContext, name: str, **kwargs: Any) -> TopicResult:
    if ctx.forwarding is not None:
        return await ctx.forwarding.create_topic(name, **kwargs)
    return await ctx.topics.create_async(name, **kwargs)


async def auto_create(ctx: BrokerContext, name: str) -> TopicResult:
    if ctx.forwarding is not None:
        return await ctx.forwarding.auto_create(name)
    return ctx.topics.auto_create(name)


async def ensure_offsets_topic(ctx: BrokerContext) -> TopicResult:
    if ctx.forwarding is not None:
        return await ctx.forwarding.ensure_offsets_topic()
    return ctx.topics.ensure_offsets_topic()


async def ensure_transaction_state_topic(ctx: BrokerContext) -> TopicResult:
    if ctx.forwarding is not None:
        return await ctx.forwarding.ensure_transaction_state_topic()
    return ctx.topics.ensure_transaction_state_topic()


async def delete_topic(ctx: BrokerContext, name: str) -> TopicResult:
    if ctx.forwarding is not None:
        return await ctx.forwarding.delete_topic(name)
    return ctx.topics.delete(name)


async def create_partitions(
    ctx: BrokerContext, name: str, count: int, *, assignments: list[list[int]] | None, validate_only: bool
) -> TopicResult:
    if ctx.forwarding is not None:
        return await ctx.forwarding.create_partitions(name, count, assignments=assignments, validate_only=validate_only)
    return ctx.topics.create_partitions(name, count, assignments=assignments, validate_only=validate_only)


async def set_configs(ctx: BrokerContext, name: str, overrides: Mapping[str, str], *, validate_only: bool) -> TopicResult:
    if ctx.forwarding is not None:
        return await ctx.forwarding.set_configs(name, overrides, validate_only=validate_only)
    return ctx.topics.set_configs(name, overrides, validate_only=validate_only)
