"""Pre-built record batches for the raw-protocol load generator.

A producer benchmark measures the broker, so the client sends the same
valid RecordBatch v2 bytes again and again (no producer id, so the broker
appends every copy and assigns new offsets). Values are random uppercase
letters, as kafka-producer-perf-test uses, so compression has something to
do but not everything.

The batch itself comes from the storage layer's `build_batch` (the
broker's own builder, with the codecs it validates against).

`--schema` runs send JSON values instead (`json_payloads`): objects that
match `BUILTIN_SCHEMA`, padded to about the record size, so the broker has
real documents to validate. `--schema registry` runs give their own values
(Confluent-framed Avro, `registry_produce.avro_values`), cycled to fill the batch.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence

from tinystream.broker.storage.batch import Record, build_batch
from tinystream.broker.storage.compression import Compression

CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
          "lz4": Compression.LZ4, "zstd": Compression.ZSTD}

RECORD_OVERHEAD = 10  # length, attributes, timestamp and offset deltas, null key, value length, header count
BATCH_OVERHEAD = 61


def records_per_batch(batch_bytes: int, record_size: int) -> int:
    """How many records of `record_size` value bytes fit a batch of about `batch_bytes`."""
    return max(1, (batch_bytes - BATCH_OVERHEAD) // (record_size + RECORD_OVERHEAD))


def payloads(count: int, record_size: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    pool = bytes(rng.choice(alphabet) for _ in range(record_size * 64))
    return [pool[(i * 37) % (len(pool) - record_size):][:record_size] for i in range(count)]


# A typical event schema: a few typed, required fields and a closed object.
BUILTIN_SCHEMA = json.dumps({
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["id", "user", "ts", "kind", "tags", "note"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "integer", "minimum": 0},
        "user": {"type": "string", "minLength": 1, "maxLength": 64},
        "ts": {"type": "integer"},
        "kind": {"enum": ["click", "view", "buy"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "note": {"type": "string"},
    },
})


def json_payloads(count: int, record_size: int, seed: int = 1) -> list[bytes]:
    """JSON objects matching BUILTIN_SCHEMA, each padded (in "note") to about `record_size` bytes."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        doc = {"id": i, "user": f"user-{rng.randrange(10_000)}", "ts": 1_700_000_000_000 + i,
               "kind": ("click", "view", "buy")[i % 3], "tags": ["a", "b"][: i % 3], "note": ""}
        base = len(json.dumps(doc, separators=(",", ":")))
        doc["note"] = "x" * max(0, record_size - base)
        out.append(json.dumps(doc, separators=(",", ":")).encode())
    return out


def make_batch(record_count: int, record_size: int, *, compression: str = "none", seed: int = 1,
               json_values: bool = False, values: Sequence[bytes] | None = None) -> bytes:
    """A batch of `record_count` records: `values` cycled when given, else generated (random or JSON)."""
    if values:
        values = [values[i % len(values)] for i in range(record_count)]
    else:
        values = (json_payloads if json_values else payloads)(record_count, record_size, seed)
    records = [Record(key=None, value=v) for v in values]
    return build_batch(records, base_timestamp=int(time.time() * 1000), compression=CODECS[compression])
