"""Client quotas in the image: an AlterClientQuotas applied to the image's records. Pure.

The checks are `tinystream.config.client_quotas` (a standalone broker uses the
same ones), so a quota refused by one is refused by the other; Kafka's
ClientQuotaControlManager answers a bad one with INVALID_REQUEST, and so does
`core.apply` with the reason found here. Applying folds each entity's ops into
its values; an entity left with no key goes, as Kafka removes a quota entity
with no quota left.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinystream.config.client_quotas import entity_error, op_error
from tinystream.operator.controller.events import QuotaAlteration
from tinystream.operator.controller.image import ClientQuotaRecord


def entity_name(entity: dict[str, str | None] | ClientQuotaRecord) -> str:
    """As kafka-configs.sh prints it: "user=alice, client-id=<default>"."""
    components = entity.entity if isinstance(entity, ClientQuotaRecord) else entity
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in components.items())


def alteration_problem(alterations: Sequence[QuotaAlteration]) -> str | None:
    """Why the batch cannot be applied (the first reason, with where), or None."""
    seen: set[tuple[tuple[str, str | None], ...]] = set()
    for i, a in enumerate(alterations):
        components = sorted(a.entity.items())
        problem = entity_error(components)
        if problem is not None:
            return f"alterations[{i}]: {problem}"
        if tuple(components) in seen:
            return f"alterations[{i}]: the entity {entity_name(dict(a.entity))} is named more than once"
        seen.add(tuple(components))
        keys = [op.key for op in a.ops]
        if len(set(keys)) != len(keys):
            return f"alterations[{i}]: a quota key is named more than once: {keys}"
        for op in a.ops:
            problem = op_error(op.key, op.value, op.remove)
            if problem is not None:
                return f"alterations[{i}]: {problem}"
    return None


def altered(current: Sequence[ClientQuotaRecord], alterations: Sequence[QuotaAlteration]
            ) -> tuple[ClientQuotaRecord, ...]:
    """The records after the (checked) alterations."""
    by_entity = {tuple(sorted(r.entity.items())): dict(r.values) for r in current}
    for a in alterations:
        key = tuple(sorted(a.entity.items()))
        values = by_entity.setdefault(key, {})
        for op in a.ops:
            if op.remove:
                values.pop(op.key, None)
            else:
                values[op.key] = float(op.value)
        if not values:
            del by_entity[key]
    return tuple(ClientQuotaRecord(entity=dict(k), values=v) for k, v in by_entity.items())
