"""What broker-side schema-id validation costs a producer: `tinystream bench produce --schema registry`.

The values are what Confluent's AvroSerializer writes: magic byte 0, the
schema id as a big-endian int32, then the Avro binary encoding of a small
event record, padded (in "note") to about --record-size bytes in all. The
same pre-built batches go, through the raw client, into two topics of one
broker:

    <topic>-plain       no validation
    <topic>-validated   confluent.value.schema.validation=true; the schema is registered
                        under <topic>-validated-value (TopicNameStrategy)

Each round measures both, each after its own warm-up, in alternating order
(plain first in even rounds, second in odd ones), so drift over the run falls
on both sides alike. Printed: median records/s and p99 of each side with its
range, and the median of the per-round ratios validated / plain. Then one
batch whose values carry an id the registry never handed out is sent into
the validated topic the same way: it must be refused with INVALID_RECORD,
which shows the measured topic really validated.

Without --bootstrap the command starts what it needs: it picks the registry's
port, starts our broker (a child process) with confluent.schema.registry.url
naming it, then the registry (in this process, `testing.registry`) on that
port with its `_schemas` topic on that broker. With --bootstrap, --registry-url
names the registry that broker's confluent.schema.registry.url points at.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import struct
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import click
import fastavro

from tinystream.bench.batches import make_batch, records_per_batch
from tinystream.bench.control import ControlError
from tinystream.bench.produce_workloads import ProduceError, ProduceSpec, produce_once, run_raw_once
from tinystream.bench.stats import RunResult, Spread
from tinystream.bench.targets import Target
from tinystream.config.topic_configs import VALUE_SCHEMA_VALIDATION
from tinystream.registry.app import RegistryOptions
from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.tinystream_broker import start_tinystream
from tinystream.testing.registry import RegistryThread

INVALID_RECORD = 87
UNKNOWN_ID = 2**31 - 1  # registries hand ids out from 1 upwards: nobody here has this one
_PREFIX = struct.Struct(">bi")  # magic byte 0, schema id

# A typical event: a few typed fields, as BUILTIN_SCHEMA is for the JSON Schema runs.
AVRO_SCHEMA: dict[str, object] = {
    "type": "record", "name": "BenchEvent", "namespace": "tinystream.bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CLICK", "VIEW", "BUY"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": "string"},
    ],
}
_PARSED = fastavro.parse_schema(AVRO_SCHEMA)


def _encode(record: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, _PARSED, record)
    return out.getvalue()


def avro_value(schema_id: int, i: int, record_size: int) -> bytes:
    """Record `i` framed as Confluent's serializers frame it, padded to about `record_size` bytes (never fewer
    than the record needs)."""
    record = {"id": i, "user": f"user-{i % 10_000}", "ts": 1_700_000_000_000 + i,
              "kind": ("CLICK", "VIEW", "BUY")[i % 3], "tags": ["a", "b"][: i % 3], "note": ""}
    value = _PREFIX.pack(0, schema_id) + _encode(record)
    pad = record_size - len(value)
    while pad > 0:  # the note's length is a varint: a longer note may take a byte more to say so
        record["note"] = "x" * pad
        value = _PREFIX.pack(0, schema_id) + _encode(record)
        if len(value) <= record_size:
            break
        pad -= len(value) - record_size
    return value


def avro_values(schema_id: int, record_size: int, count: int = 256) -> tuple[bytes, ...]:
    return tuple(avro_value(schema_id, i, record_size) for i in range(count))


def register_schema(url: str, subject: str, schema: dict[str, object], timeout: float = 30.0) -> int:
    """POST /subjects/{subject}/versions (Avro): the schema's global id."""
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    request = urllib.request.Request(
        f"{url.rstrip('/')}/subjects/{urllib.parse.quote(subject, safe='')}/versions", data=body, method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return int(json.load(answer)["id"])
    except urllib.error.HTTPError as exc:
        raise click.ClickException(f"registering {subject} at {url}: HTTP {exc.code} {exc.read()[:300]!r}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise click.ClickException(f"registering {subject} at {url}: {exc}") from None


@contextlib.contextmanager
def registry_target(bootstrap: str | None, registry_url: str | None, *, quiet: bool) -> Iterator[tuple[Target, str]]:
    """(broker, registry URL): the given ones, or a broker and a registry started here and stopped after."""
    if bootstrap:
        assert registry_url is not None
        yield Target(name="external", bootstrap=bootstrap), registry_url
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="tinystream-bench-registry-") as workdir:
        if not quiet:
            print(f"starting tinystream with confluent.schema.registry.url={url} ...", file=sys.stderr, flush=True)
        running = start_tinystream(workdir=Path(workdir) / "broker",
                                   overrides={"confluent.schema.registry.url": url})
        try:
            registry = RegistryThread(RegistryOptions(bootstrap=running.bootstrap, port=port, topic="_schemas"))
            registry.start()
            try:
                yield Target(name="tinystream", bootstrap=running.bootstrap, version=running.version,
                             process=running), url
            finally:
                registry.stop()
        finally:
            running.stop()


@dataclass(frozen=True)
class ValidationSummary:
    plain: Spread  # records/s
    validated: Spread  # records/s
    ratio: Spread  # per round: validated / plain
    plain_p99: Spread  # ms per request
    validated_p99: Spread
    plain_cpu: Spread  # broker CPU s per GB of values (absent, count 0, for a broker given by --bootstrap)
    validated_cpu: Spread

    @classmethod
    def of(cls, pairs: list[tuple[RunResult, RunResult]]) -> ValidationSummary:
        """`pairs`: (plain run, validated run) of each round."""
        return cls(
            plain=Spread.of([p.records_per_s for p, _ in pairs]),
            validated=Spread.of([v.records_per_s for _, v in pairs]),
            ratio=Spread.of([v.records_per_s / p.records_per_s for p, v in pairs if p.records_per_s > 0]),
            plain_p99=Spread.of([p.latency_ms["p99"] for p, _ in pairs if "p99" in p.latency_ms]),
            validated_p99=Spread.of([v.latency_ms["p99"] for _, v in pairs if "p99" in v.latency_ms]),
            plain_cpu=Spread.of([p.cpu_s_per_gb for p, _ in pairs if p.cpu_s_per_gb is not None]),
            validated_cpu=Spread.of([v.cpu_s_per_gb for _, v in pairs if v.cpu_s_per_gb is not None]),
        )

    def lines(self) -> list[str]:
        def side(name: str, rate: Spread, p99: Spread) -> str:
            return (f"{name:<20}{rate.median:>12,.0f} records/s [{rate.low:,.0f}..{rate.high:,.0f}]   "
                    f"p99 {p99.median:.2f} ms [{p99.low:.2f}..{p99.high:.2f}]")

        cpu = (f"broker CPU per GB    {self.plain_cpu.median:.1f} s without, {self.validated_cpu.median:.1f} s with "
               f"validation (medians)") if self.plain_cpu.count and self.validated_cpu.count else ""
        return [
            side("without validation", self.plain, self.plain_p99),
            side("with validation", self.validated, self.validated_p99),
            *([cpu] if cpu else []),
            f"validated / plain   {self.ratio.median:.3f} [{self.ratio.low:.3f}..{self.ratio.high:.3f}] over "
            f"{self.ratio.count} rounds: registry validation costs {100 * (1 - self.ratio.median):.1f}% of "
            f"records/s, p99 {self.plain_p99.median:.2f} -> {self.validated_p99.median:.2f} ms",
        ]

    def as_dict(self) -> dict[str, object]:
        return {"plain_records_per_s": self.plain.as_dict(1), "validated_records_per_s": self.validated.as_dict(1),
                "ratio_validated_to_plain": self.ratio.as_dict(3), "plain_p99_ms": self.plain_p99.as_dict(3),
                "validated_p99_ms": self.validated_p99.as_dict(3),
                **({"plain_cpu_s_per_gb": self.plain_cpu.as_dict(2),
                    "validated_cpu_s_per_gb": self.validated_cpu.as_dict(2)} if self.plain_cpu.count else {}),
                "cost_pct": round(100 * (1 - self.ratio.median), 1)}


def side_order(round_index: int) -> tuple[str, str]:
    """Plain first in even rounds, second in odd ones."""
    return ("plain", "validated") if round_index % 2 == 0 else ("validated", "plain")


def _rounds(target: Target, specs: dict[str, ProduceSpec], configs: dict[str, dict[str, str] | None], rounds: int,
            say: Callable[[str], None], quiet: bool) -> list[tuple[RunResult, RunResult]]:
    pairs = []
    for round_index in range(rounds):
        results = {}
        for side in side_order(round_index):
            results[side] = run_raw_once(target, specs[side], label=f"{target.name} {side}",
                                         topic_config=configs[side])
            if not quiet:
                say(f"round {round_index + 1}/{rounds} {side:<9} " + results[side].line())
        pairs.append((results["plain"], results["validated"]))
    return pairs


def run_registry_validation(*, spec: ProduceSpec, rounds: int, bootstrap: str | None, registry_url: str | None,
                            workload: dict[str, object], as_json: bool, quiet: bool) -> None:
    """Set up, measure `rounds` pairs, check a wrong id is refused, print; exit 1 if anything did not add up."""
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if as_json else click.echo
    say("produce, schema registry validation: " + ", ".join(f"{k}={v}" for k, v in workload.items()))
    plain_topic, checked_topic = f"{spec.topic}-plain", f"{spec.topic}-validated"
    with registry_target(bootstrap, registry_url, quiet=quiet) as (target, url):
        schema_id = register_schema(url, f"{checked_topic}-value", AVRO_SCHEMA)
        say(f"schema id {schema_id} registered under {checked_topic}-value at {url}")
        values = avro_values(schema_id, spec.record_size)
        specs = {"plain": replace(spec, topic=plain_topic, values=values),
                 "validated": replace(spec, topic=checked_topic, values=values)}
        configs = {"plain": None, "validated": {VALUE_SCHEMA_VALIDATION: "true"}}
        try:
            pairs = _rounds(target, specs, configs, rounds, say, quiet)
        except (ControlError, ProduceError) as exc:  # e.g. a broker without confluent.schema.registry.url
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc
        bad = make_batch(records_per_batch(spec.batch_bytes, spec.record_size), spec.record_size,
                         values=avro_values(UNKNOWN_ID, spec.record_size, 16))
        refused = asyncio.run(produce_once(target, checked_topic, 0, bad))
    summary = ValidationSummary.of(pairs)
    for line in summary.lines():
        say(line)
    check = (f"check: a batch with unregistered schema id {UNKNOWN_ID} into {checked_topic} -> error {refused}"
             + (" (INVALID_RECORD), as it must" if refused == INVALID_RECORD else ", NOT INVALID_RECORD (87)"))
    say(check)
    if as_json:
        click.echo(json.dumps({
            "benchmark": "produce", "schema": "registry", "workload": workload, "rounds": rounds,
            "schema_id": schema_id, "topics": {"plain": plain_topic, "validated": checked_topic},
            "summary": summary.as_dict(), "unknown_id_error_code": refused,
            "runs": [[p.as_dict(), v.as_dict()] for p, v in pairs],
        }, indent=2))
    unverified = [r.problem for pair in pairs for r in pair if not r.verified]
    if unverified or refused != INVALID_RECORD:
        raise SystemExit(1)
