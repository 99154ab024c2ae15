"""`tinystream bench registry`: schema registry registrations and look-ups per second.

Three figures, each from confluent-kafka's SchemaRegistryClient (the client
serializers use), against a registry this command starts on the given cluster
(or one already running, `--url`):
- register: new Avro schemas, each a write to `_schemas` read back before the answer;
- look-up, uncached: GET /schemas/ids/{id} over one kept-alive HTTP connection, each
  one served by the registry (what a deserializer's first sight of an id costs);
- look-up, cached: the client's get_schema after its first call (what every later
  record costs: the client keeps the schema, as Confluent's does).
The uncached figure is the registry's own speed; the cached one is what a
serializer pays per record once warm. `--peer karapace` measures Karapace
(Aiven's registry, started on the same cluster with a topic of its own) with
the same calls right after, and prints each figure's ratio ours / peer.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

import click


@dataclass(frozen=True, slots=True)
class RegistryFigures:
    registered: int
    register_per_s: float
    uncached_per_s: float
    cached_per_s: float


FIGURES = (("register", "register_per_s"), ("look-up, uncached", "uncached_per_s"),
           ("look-up, cached", "cached_per_s"))


def ratios(ours: RegistryFigures, peer: RegistryFigures) -> dict[str, float]:
    """Each figure ours / peer (above 1: ours is faster)."""
    return {key: getattr(ours, key) / max(getattr(peer, key), 1e-9) for _, key in FIGURES}


def _as_json(figures: RegistryFigures) -> dict[str, float]:
    return {"registered": figures.registered, "register_per_s": round(figures.register_per_s, 1),
            "lookup_uncached_per_s": round(figures.uncached_per_s, 1),
            "lookup_cached_per_s": round(figures.cached_per_s, 1)}


def _measure_karapace(bootstrap: str, *, schemas: int, lookups: int) -> RegistryFigures:
    from tinystream.testing.peers.errors import PeerUnavailable  # noqa: PLC0415
    from tinystream.testing.peers.karapace import start_karapace  # noqa: PLC0415

    try:
        peer = start_karapace(bootstrap, topic=f"_schemas-bench-karapace-{time.time_ns()}")
    except PeerUnavailable as exc:
        raise click.ClickException(str(exc)) from exc
    with peer:
        return measure(peer.url, schemas=schemas, lookups=lookups)


def _schema(run: str, i: int) -> str:
    return json.dumps({"type": "record", "name": f"Bench{i}", "namespace": f"bench.r{run}",
                       "fields": [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string"}]})


def _rate(count: int, work: Callable[[], None]) -> float:
    start = time.perf_counter()
    work()
    return count / max(time.perf_counter() - start, 1e-9)


def measure(url: str, *, schemas: int, lookups: int) -> RegistryFigures:
    """Register `schemas` new schemas, then look ids up `lookups` times each way."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: PLC0415 - optional extra

    client = SchemaRegistryClient({"url": url})
    run = str(time.time_ns())
    ids: list[int] = []

    def register() -> None:
        for i in range(schemas):
            ids.append(client.register_schema(f"bench-{run}-{i}", Schema(_schema(run, i), "AVRO")))

    register_per_s = _rate(schemas, register)
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)

    def uncached() -> None:
        for n in range(lookups):
            connection.request("GET", f"/schemas/ids/{ids[n % len(ids)]}")
            answer = connection.getresponse()
            body = answer.read()
            if answer.status != 200:
                raise click.ClickException(f"GET /schemas/ids: {answer.status} {body[:200]!r}")

    try:
        uncached_per_s = _rate(lookups, uncached)
    finally:
        connection.close()
    for schema_id in ids:  # warm the client's cache
        client.get_schema(schema_id)

    def cached() -> None:
        for n in range(lookups):
            client.get_schema(ids[n % len(ids)])

    cached_per_s = _rate(lookups, cached)
    return RegistryFigures(schemas, register_per_s, uncached_per_s, cached_per_s)


@click.command("registry")
@click.option("--bootstrap", "-b", default=None, help="A running cluster: the registry this command starts uses it.")
@click.option("--url", default=None, help="A registry already running (instead of --bootstrap).")
@click.option("--peer", type=click.Choice(["karapace"]), default=None,
              help="Also measure this registry on the same cluster (needs --bootstrap) and print ours / peer.")
@click.option("--schemas", type=click.IntRange(1), default=200, show_default=True)
@click.option("--lookups", type=click.IntRange(1), default=5000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
def registry_bench_command(bootstrap: str | None, url: str | None, peer: str | None, schemas: int, lookups: int,
                           as_json: bool) -> None:
    """Schema registry: registrations and id look-ups per second (uncached: served; cached: client-side)."""
    if (bootstrap is None) == (url is None):
        raise click.UsageError("give --bootstrap (a registry is started on it) or --url (one already running)")
    if peer is not None and bootstrap is None:
        raise click.UsageError("--peer starts the peer on a cluster: give --bootstrap")
    registry = None
    if url is None:
        from tinystream.registry.app import RegistryOptions  # noqa: PLC0415 - the [registry] extra
        from tinystream.testing.registry import RegistryThread  # noqa: PLC0415

        assert bootstrap is not None
        registry = RegistryThread(RegistryOptions(bootstrap=bootstrap, port=0, topic=f"_schemas-bench-{time.time_ns()}"))
        url = registry.start()
    try:
        figures = measure(url, schemas=schemas, lookups=lookups)
    finally:
        if registry is not None:
            registry.stop()
    other = None
    if peer is not None:
        assert bootstrap is not None
        other = _measure_karapace(bootstrap, schemas=schemas, lookups=lookups)
    if as_json:
        out: dict[str, object] = dict(_as_json(figures))
        if other is not None:
            out["peer"] = {"name": peer, **_as_json(other)}
            out["ratio"] = {key: round(value, 2) for key, value in ratios(figures, other).items()}
        click.echo(json.dumps(out))
        return
    click.echo(f"register            {figures.register_per_s:12,.0f} schemas/s  ({figures.registered} new Avro schemas)")
    click.echo(f"look-up, uncached   {figures.uncached_per_s:12,.0f} ids/s      (GET /schemas/ids/{{id}}, served)")
    click.echo(f"look-up, cached     {figures.cached_per_s:12,.0f} ids/s      (the client's cache)")
    if other is not None:
        click.echo(f"\n{'':20}{'ours':>12}{peer:>12}{'ours/peer':>11}")
        for (label, key), ratio in zip(FIGURES, ratios(figures, other).values(), strict=True):
            click.echo(f"{label:20}{getattr(figures, key):12,.0f}{getattr(other, key):12,.0f}{ratio:11.2f}")
