"""The stored client quotas and Kafka's resolution order (DefaultQuotaCallback, KIP-55).

For a connection's (user, client-id) and one key, the first entity below that
has the key sets the quota, and also says whose rate is measured (the metric
tags: the entity the quota belongs to, so a user quota is shared by all of
that user's clients, a client-id quota by every connection with that id):

    1 user=U, client-id=C            tags (U, C)
    2 user=U, client-id=<default>    tags (U, C)
    3 user=U                         tags (U, "")
    4 user=<default>, client-id=C    tags (U, C)
    5 user=<default>, client-id=<default>  tags (U, C)
    6 user=<default>                 tags (U, "")
    7 client-id=C                    tags ("", C)
    8 client-id=<default>            tags ("", C)

No entity with the key: no quota (Kafka's quota.*.default broker configs are gone since 3.0; not served).
The book is a plain value: `alter` returns a new one, `to_json`/`from_json` round-trip it for its file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tinystream.broker.quotas.entities import CLIENT_ID, USER, Entity

#: (user tag, client-id tag): whose rate a quota measures; "" for a component not part of it.
Tags = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Resolved:
    limit: float
    tags: Tags
    entity: Entity


def _order(user: str, client_id: str) -> tuple[tuple[Entity, Tags], ...]:
    return (
        (Entity(True, user, True, client_id), (user, client_id)),
        (Entity(True, user, True, None), (user, client_id)),
        (Entity(True, user, False, None), (user, "")),
        (Entity(True, None, True, client_id), (user, client_id)),
        (Entity(True, None, True, None), (user, client_id)),
        (Entity(True, None, False, None), (user, "")),
        (Entity(False, None, True, client_id), ("", client_id)),
        (Entity(False, None, True, None), ("", client_id)),
    )


@dataclass(frozen=True, slots=True)
class QuotaBook:
    entries: Mapping[Entity, Mapping[str, float]] = field(default_factory=dict)

    def resolve(self, user: str, client_id: str, key: str) -> Resolved | None:
        """The quota on `key` for this (user, client-id), most specific first, or None."""
        if not self.entries:
            return None
        for entity, tags in _order(user, client_id):
            values = self.entries.get(entity)
            if values is not None and key in values:
                return Resolved(values[key], tags, entity)
        return None

    def alter(self, changes: Iterable[tuple[Entity, Iterable[tuple[str, float, bool]]]]) -> QuotaBook:
        """A new book with each entity's (key, value, remove) ops applied; an entity left with no keys goes."""
        entries = {e: dict(v) for e, v in self.entries.items()}
        for entity, ops in changes:
            values = entries.setdefault(entity, {})
            for key, value, remove in ops:
                if remove:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if not values:
                del entries[entity]
        return QuotaBook(entries)

    def to_json(self) -> dict[str, Any]:
        return {"quotas": [{"entity": e.to_json(), "values": dict(sorted(v.items()))}
                           for e, v in sorted(self.entries.items(), key=lambda item: item[0].sort_key())]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QuotaBook:
        entries: dict[Entity, dict[str, float]] = {}
        for item in data.get("quotas", ()):
            comps = item["entity"]
            if not isinstance(comps, dict) or not set(comps) <= {USER, CLIENT_ID} or not comps:
                raise ValueError(f"not a quota entity: {comps!r}")
            entries[Entity.of(comps.items())] = {str(k): float(v) for k, v in item["values"].items()}
        return cls(entries)
