"""A deterministic source of "random" numbers and topic ids.

Kafka draws a topic's UUID and the start index / replica shift of its
round-robin placement from a random generator. A pure controller cannot hide
one, and the drivers must replay a state file to the same image, so the
randomness is a counter hashed with a seed the driver injects once, at
bootstrap (from os.urandom in production, a constant in tests). The source is
part of the persisted state: the same seed and the same events give the same
topic ids and the same placements, forever.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class IdSource:
    """`seed` picks the sequence; `counter` is how many values were drawn."""

    seed: int
    counter: int = 0

    def _digest(self) -> bytes:
        return hashlib.sha256(f"tinystream:{self.seed}:{self.counter}".encode()).digest()

    def next_below(self, bound: int) -> tuple[int, IdSource]:
        """A number in [0, bound) and the source to draw the next one from."""
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        value = int.from_bytes(self._digest()[:8], "big") % bound
        return value, IdSource(seed=self.seed, counter=self.counter + 1)

    def next_uuid(self) -> tuple[str, IdSource]:
        """A version-4-shaped UUID string (never Kafka's reserved zero id)."""
        raw = bytearray(self._digest()[:16])
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        return str(uuid.UUID(bytes=bytes(raw))), IdSource(seed=self.seed, counter=self.counter + 1)

    def to_dict(self) -> dict[str, int]:
        return {"seed": self.seed, "counter": self.counter}
