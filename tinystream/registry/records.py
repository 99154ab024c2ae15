"""The `_schemas` topic's records: Confluent's layout, one compacted key per fact.

    key   {"keytype": "SCHEMA", "subject": s, "version": v, "magic": 1}
    value {"subject", "version", "id", "schemaType", "schema", "references", "deleted"}
    key   {"keytype": "CONFIG", "subject": s | null, "magic": 0}   value {"compatibilityLevel": L}
    key   {"keytype": "MODE",   "subject": s | null, "magic": 0}   value {"mode": M}

A soft delete rewrites the SCHEMA value with "deleted": true; a hard delete
is a tombstone (value None) on the same key, so compaction forgets it; a
tombstone on CONFIG/MODE drops a subject's own setting. Keys are JSON with
sorted keys so the same fact always has the same bytes (compaction needs it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SCHEMA, CONFIG, MODE = "SCHEMA", "CONFIG", "MODE"


@dataclass(frozen=True, slots=True)
class Record:
    key: dict[str, Any]
    value: dict[str, Any] | None

    def key_bytes(self) -> bytes:
        return json.dumps(self.key, sort_keys=True, separators=(",", ":")).encode()

    def value_bytes(self) -> bytes | None:
        return None if self.value is None else json.dumps(self.value, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Record | None:
        """None for a record that is not ours (a NOOP, garbage): the reader skips it."""
        try:
            decoded_key = json.loads(key) if key else None
            decoded_value = json.loads(value) if value is not None else None
        except ValueError:
            return None
        if not isinstance(decoded_key, dict) or decoded_key.get("keytype") not in (SCHEMA, CONFIG, MODE):
            return None
        return cls(decoded_key, decoded_value if isinstance(decoded_value, dict) else None)


def schema_key(subject: str, version: int) -> dict[str, Any]:
    return {"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1}


def config_key(subject: str | None) -> dict[str, Any]:
    return {"keytype": CONFIG, "subject": subject, "magic": 0}


def mode_key(subject: str | None) -> dict[str, Any]:
    return {"keytype": MODE, "subject": subject, "magic": 0}
