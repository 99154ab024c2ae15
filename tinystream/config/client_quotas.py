"""Kafka's client-quota keys and the checks of a stored quota, shared by the broker and the controller.

A quota belongs to an entity: `user`, `client-id` or both, a name of None
being the default (`<default>` in kafka-configs.sh). Keys are Kafka's
(QuotaConfig): producer_byte_rate and consumer_byte_rate (bytes/s, whole
numbers), request_percentage and controller_mutation_rate (doubles). A
standalone broker checks an AlterClientQuotas entry with these before it
writes its file, the controller before it puts the quota in its image: one
rule, as Kafka's ClientQuotaControlManager has one. Every check returns a
reason string or None. The `ip` entity (connection_creation_rate, KIP-612)
is not served.
"""

from __future__ import annotations

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: Kafka's QuotaConfig keys for user / client-id entities, and whether a value must be a whole number (LONG).
KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
_LONG_MAX = float(2**63 - 1)


def entity_error(components: list[tuple[str, str | None]]) -> str | None:
    """Why an entity ((type, name or None for the default) pairs) is not valid, or None."""
    if not components:
        return "the entity is empty"
    types = [t for t, _ in components]
    if len(set(types)) != len(types):
        return f"the entity names a type twice: {types}"
    for entity_type, name in components:
        if entity_type == IP:
            return "ip quotas (connection_creation_rate) are not supported by this broker"
        if entity_type not in ENTITY_TYPES:
            return f"unknown entity type {entity_type!r} (user, client-id)"
        if name is not None and name == "":
            return f"the {entity_type} name is empty (a default is a null name)"
    return None


def op_error(key: str, value: float, remove: bool) -> str | None:
    """Why one quota op is not valid, or None (Kafka: ClientQuotaControlManager.validateQuotaKeyValue)."""
    whole = KEYS.get(key)
    if whole is None:
        return f"Invalid configuration key {key}"
    if remove:
        return None
    if not value > 0.0 or value != value:  # also NaN
        return f"Quota {key} must be greater than 0"
    if whole:
        if value > _LONG_MAX:
            return f"Proposed value for {key} is too large for a LONG."
        if value != int(value):
            return f"Proposed value for {key} is not an integer."
    return None
