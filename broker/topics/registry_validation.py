"""Registry-validated topics: the decision, without I/O (`confluent.value/key.schema.validation`).

With validation on, every record value (key) of a produced batch must start
with Confluent's wire prefix, magic byte 0 and a 4-byte big-endian schema id,
and that id must be registered under the topic's subject in the schema
registry (TopicNameStrategy: `<topic>-value`, `<topic>-key`). What is checked
is the prefix and the id's subject, as Confluent Server does: not that the
bytes after it decode with the schema (that would mean every format's decoder
on the produce path).

A null value (a tombstone) or a null key passes: there is nothing to
validate, and compacted topics must still delete keys.

`scan` reads the batch into a list of checks, stopping at the first record
without a prefix; the produce handler asks the registry about the distinct ids
(`schema_ids.SchemaIdLookup`) and `verdict` names the first record that fails,
in batch order. Nothing here awaits or opens a socket.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from tinystream.broker.storage.batch import Record
from tinystream.config.topic_configs import KEY_SCHEMA_VALIDATION, VALUE_SCHEMA_VALIDATION

MAGIC_BYTE = 0
PREFIX_BYTES = 5  # magic byte + int32 schema id


@dataclass(frozen=True, slots=True)
class Policy:
    """The subjects a topic's records are checked against; None for a part that is not checked."""

    key_subject: str | None
    value_subject: str | None


def _on(configs: Mapping[str, str], name: str) -> bool:
    value = configs.get(name)
    return value is not None and value.strip().lower() == "true"


def policy(topic: str, configs: Mapping[str, str]) -> Policy | None:
    """The topic's policy, or None when neither key nor value is validated (the common case: two dict reads).

    Subjects follow TopicNameStrategy, the only strategy the topic config table accepts.
    """
    value_on = _on(configs, VALUE_SCHEMA_VALIDATION)
    key_on = _on(configs, KEY_SCHEMA_VALIDATION)
    if not value_on and not key_on:
        return None
    return Policy(f"{topic}-key" if key_on else None, f"{topic}-value" if value_on else None)


def schema_id(data: bytes) -> int | str:
    """The schema id of a serialized key or value, or why it has none (a phrase for the error message)."""
    if len(data) < PREFIX_BYTES:
        return f"has {len(data)} bytes, fewer than the 5-byte schema id prefix"
    if data[0] != MAGIC_BYTE:
        return f"starts with byte {data[0]}, not the schema id prefix's magic byte 0"
    return int.from_bytes(data[1:PREFIX_BYTES], "big", signed=True)


@dataclass(frozen=True, slots=True)
class Check:
    """One record's key or value names `schema_id`, which must be registered under `subject`."""

    index: int  # position in the batch (Produce v8 BatchIndexAndErrorMessage.batch_index)
    part: str  # "key" or "value"
    subject: str
    schema_id: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the batch is refused: which record, which part, which subject."""

    index: int
    part: str
    subject: str
    reason: str

    def describe(self) -> str:
        return f"record {self.index}: {self.part} {self.reason} (subject {self.subject!r})"


def scan(records: Iterable[Record], rule: Policy) -> list[Check | Refusal]:
    """The checks of every record in order, ending at the first key or value without a schema id prefix."""
    found: list[Check | Refusal] = []
    for index, record in enumerate(records):
        for part, data, subject in (("key", record.key, rule.key_subject), ("value", record.value, rule.value_subject)):
            if subject is None or data is None:
                continue
            sid = schema_id(data)
            if isinstance(sid, str):
                found.append(Refusal(index, part, subject, sid))
                return found
            found.append(Check(index, part, subject, sid))
    return found


def schema_ids(found: Iterable[Check | Refusal]) -> dict[int, frozenset[str]]:
    """The distinct ids the registry must be asked about, each with the subjects it must be under."""
    needs: dict[int, set[str]] = {}
    for item in found:
        if isinstance(item, Check):
            needs.setdefault(item.schema_id, set()).add(item.subject)
    return {i: frozenset(subjects) for i, subjects in needs.items()}


def verdict(found: Iterable[Check | Refusal], subjects_of: Callable[[int], frozenset[str]]) -> Refusal | None:
    """The first record that fails, in batch order, given each id's subjects (empty: the id is unknown)."""
    for item in found:
        if isinstance(item, Refusal):
            return item
        subjects = subjects_of(item.schema_id)
        if item.subject not in subjects:
            why = "is not registered in the schema registry" if not subjects else "is not registered under the subject"
            return Refusal(item.index, item.part, item.subject, f"schema id {item.schema_id} {why}")
    return None
