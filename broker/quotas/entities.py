"""Kafka's client-quota entity model and its checks (KIP-546's AlterClientQuotas / DescribeClientQuotas).

An entity is a set of (type, name) components: `user`, `client-id` or both; a
name of None is the default (`<default>` in kafka-configs.sh). Keys are
Kafka's (QuotaConfig): producer_byte_rate and consumer_byte_rate (bytes/s,
whole numbers), request_percentage and controller_mutation_rate (doubles).
The keys and the checks of a stored quota are `tinystream.config.client_quotas`
(the controller checks with them too); the filter checks here return a reason
string or None, so the handler picks Kafka's error code (INVALID_REQUEST).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from tinystream.config.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    ENTITY_TYPES,
    IP,
    KEYS,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    entity_error,
    op_error,
)

__all__ = ["CLIENT_ID", "CONSUMER_BYTE_RATE", "CONTROLLER_MUTATION_RATE", "ENTITY_TYPES", "IP", "KEYS",
           "PRODUCER_BYTE_RATE", "REQUEST_PERCENTAGE", "USER", "Component", "Entity", "MatchType", "entity_error",
           "filter_error", "filter_matches", "op_error"]


@dataclass(frozen=True, slots=True)
class Entity:
    """A quota entity: user and client-id, each absent (not part of it), a name, or the default.

    `has_user` / `has_client` say whether the component is present; a present component with name None
    is the default (Kafka's <default>)."""

    has_user: bool
    user: str | None
    has_client: bool
    client_id: str | None

    @classmethod
    def of(cls, components: Iterable[tuple[str, str | None]]) -> Entity:
        parts = dict(components)
        return cls(USER in parts, parts.get(USER), CLIENT_ID in parts, parts.get(CLIENT_ID))

    def sort_key(self) -> tuple[bool, str, bool, str]:
        """A stable order for listings and the file (a default, None, sorts first)."""
        return (self.has_user, self.user or "", self.has_client, self.client_id or "")

    def components(self) -> tuple[tuple[str, str | None], ...]:
        out: list[tuple[str, str | None]] = []
        if self.has_user:
            out.append((USER, self.user))
        if self.has_client:
            out.append((CLIENT_ID, self.client_id))
        return tuple(out)

    def to_json(self) -> dict[str, str | None]:
        return dict(self.components())

    def __str__(self) -> str:
        return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in self.components())


class MatchType(IntEnum):
    """DescribeClientQuotas filter component match types."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None

    def matches(self, name: str | None) -> bool:
        if self.match_type == MatchType.EXACT:
            return name == self.match
        if self.match_type == MatchType.DEFAULT:
            return name is None
        return name is not None


def filter_error(components: list[Component]) -> str | None:
    """Why a DescribeClientQuotas filter is not valid, or None."""
    types = [c.entity_type for c in components]
    if len(set(types)) != len(types):
        return f"the filter names an entity type twice: {types}"
    for c in components:
        if c.entity_type not in ENTITY_TYPES and c.entity_type != IP:
            return f"unknown entity type {c.entity_type!r}"
        if c.match_type not in (MatchType.EXACT, MatchType.DEFAULT, MatchType.SPECIFIED):
            return f"unknown match type {c.match_type}"
        if c.match_type == MatchType.EXACT and c.match is None:
            return f"an exact match on {c.entity_type} needs a name"
    return None


def filter_matches(entity: Entity, components: list[Component], strict: bool) -> bool:
    """Kafka's rule: every component must match one of the entity's; strict: the entity has no other types."""
    names = dict(entity.components())
    for c in components:
        if c.entity_type not in names or not c.matches(names[c.entity_type]):
            return False
    return not strict or len(names) == len(components)
