"""`tinystream bench produce`: produce throughput and latency, ours against peers.

In the spirit of kafka-producer-perf-test: N records of S bytes into a topic
of P partitions, batched, with acks 0, 1 or all and an optional codec;
prints records/s, MB/s (10^6 bytes of record values per second) and latency
percentiles, with a progress line each second.

    tinystream bench produce                              # starts our broker in a temp dir
    tinystream bench produce --peer kafka --peer tansu    # then the same workload on each peer
    tinystream bench produce --bootstrap 127.0.0.1:9092 --client confluent --json

The default client is a raw pipelined producer that resends pre-built
RecordBatches (the broker is what is measured; see produce_workloads.py);
`--client confluent` gives librdkafka's figure and `--client java` Kafka's
own ProducerPerformance (needs tools/install-kafka-jars.sh).

`--transactional` (confluent client, implied) measures transactional
producers committing every `--txn-records` records (100 and 1000 by
default) against idempotent produce (acks=all, same client), on our broker
and each peer, in `--rounds` alternating rounds (ours, kafka, ours, kafka,
...; `txn_rounds.py`), and prints medians, spreads and the ratios
transactional / idempotent and ours / peer. `--idempotent` alone is the
single-pass baseline.

    tinystream bench produce --transactional --peer kafka --rounds 5
    tinystream bench produce --client confluent --idempotent --peer kafka

`--security SSL|SASL_SSL|SASL_PLAINTEXT` (confluent client, repeatable) runs the
workload in pairs with PLAINTEXT on one broker with a listener per protocol and
prints each protocol's throughput and its ratio to PLAINTEXT over `--rounds`
(security_bench.py):

    tinystream bench produce --client confluent --security SSL --security SASL_SSL --rounds 5

`--schema FILE|builtin` (raw client) sends JSON values and measures them
twice on the same broker: into a topic without a schema, then into one with
`tinystream.value.schema` set, and reports the cost of validation.

`--schema registry` (raw client) measures Confluent's broker-side schema-id
validation (`confluent.value.schema.validation=true`) the same way, with
Avro values behind the registry's wire prefix, over `--rounds` alternating
rounds (3 by default; registry_produce.py). It starts a broker and a schema
registry itself; with `--bootstrap` give `--registry-url`, the registry that
broker's `confluent.schema.registry.url` names.

    tinystream bench produce --schema registry --records 500000 --rounds 3
"""

from __future__ import annotations

import uuid

import click

from tinystream.bench.batches import BUILTIN_SCHEMA, CODECS, records_per_batch
from tinystream.bench.produce_workloads import RUNNERS, ProduceSpec
from tinystream.bench.runs import run_everywhere
from tinystream.bench.security_bench import SECURED, check_security_options, run_security_pairs
from tinystream.bench.txn_rounds import run_rounds


@click.command("produce")
@click.option("--bootstrap", default=None, metavar="HOST:PORT",
              help="Our broker, already running. Without it one is started in a temp dir.")
@click.option("--records", default=None, type=click.IntRange(1),
              help="Records per run. Default: 5,000,000; 100,000 per cell with --transactional; 500,000 per "
                   "side and round with --schema registry.")
@click.option("--record-size", default=100, show_default=True, type=click.IntRange(0), help="Value bytes per record.")
@click.option("--batch-size", default=262_144, show_default=True, type=click.IntRange(128),
              help="Bytes per record batch (Kafka's batch.size).")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="1", show_default=True)
@click.option("--topic", default=None, help="Topic (created if missing). Default: a new bench-produce-* topic.")
@click.option("--partitions", default=6, show_default=True, type=click.IntRange(1))
@click.option("--compression", type=click.Choice(sorted(CODECS)), default="none", show_default=True)
@click.option("--client", type=click.Choice(sorted(RUNNERS)), default="raw", show_default=True,
              help="raw: pipelined pre-built batches; confluent: librdkafka; java: ProducerPerformance.")
@click.option("--connections", default=2, show_default=True, type=click.IntRange(1), help="raw client only.")
@click.option("--in-flight", default=4, show_default=True, type=click.IntRange(1),
              help="raw client: requests in flight per connection.")
@click.option("--warmup", default=None, type=click.IntRange(0),
              help="Records sent (unmeasured) before the run. Default: 10%% of --records, at most 200,000.")
@click.option("--peer", "peers", multiple=True, metavar="NAME|CMD",
              help="Also run against `kafka`, `tansu`, or a shell command that prints bootstrap=HOST:PORT.")
@click.option("--schema", default=None, metavar="FILE|builtin|registry",
              help="raw client: JSON values, measured without then with this topic value schema; `registry`: "
                   "Avro values with a schema id, without then with confluent.value.schema.validation.")
@click.option("--registry-url", default=None, metavar="URL",
              help="--schema registry with --bootstrap: the registry that broker validates against "
                   "(its confluent.schema.registry.url).")
@click.option("--idempotent", is_flag=True, help="confluent client: enable.idempotence (acks=all).")
@click.option("--transactional", is_flag=True,
              help="confluent client: a transactional producer (acks=all) committing every --txn-records records.")
@click.option("--txn-records", multiple=True, default=(100, 1000), show_default=True, type=click.IntRange(1),
              help="Records per transaction with --transactional (repeat for several).")
@click.option("--security", "protocols", multiple=True, type=click.Choice(SECURED), metavar="PROTOCOL",
              help="Also over a listener with this security protocol (SSL, SASL_SSL, SASL_PLAINTEXT: SCRAM-SHA-512), "
                   "in pairs with PLAINTEXT on a broker started with throwaway credentials; "
                   "needs --client confluent (or java, for SSL alone).")
@click.option("--rounds", default=None, type=click.IntRange(1),
              help="Alternating rounds: --transactional (default 3) over our broker and the peers; --security "
                   "(default 5) pairs per protocol; --schema registry (default 3) pairs without / with "
                   "validation. Medians and ranges are printed.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def produce_bench_command(bootstrap, records, record_size, batch_size, acks, topic, partitions, compression,
                          client, connections, in_flight, warmup, peers, schema, registry_url, idempotent,
                          transactional, txn_records, protocols, rounds, as_json, quiet) -> None:
    """Produce benchmark: records/s, MB/s and latency p50/p99/p99.9, ours and peers."""
    by_registry = schema == "registry"
    _check_registry_options(by_registry, registry_url=registry_url, bootstrap=bootstrap, client=client,
                            peers=peers, protocols=protocols, other=idempotent or transactional)
    records = records or (100_000 if transactional else 500_000 if by_registry else 5_000_000)
    warmup = min(records // 10, 200_000) if warmup is None else warmup
    schema_text = None if by_registry else _schema_text(schema, client)
    if transactional and client == "raw":
        client = "confluent"  # transactions need a real transactional client: librdkafka's
    if (idempotent or transactional) and client != "confluent":
        raise click.UsageError("--idempotent and --transactional need --client confluent")
    if idempotent or transactional:
        acks = "all"  # both need acks=all (the client refuses anything else)
    spec = ProduceSpec(
        topic=topic or f"bench-produce-{uuid.uuid4().hex[:8]}", partitions=partitions, records=records,
        record_size=record_size, batch_bytes=batch_size, acks=acks, compression=compression,
        connections=connections, in_flight=in_flight, warmup_records=warmup, progress=not quiet,
        schema=schema_text, idempotent=idempotent, txn_records=0,
    )
    if transactional:
        run_rounds(spec=spec, peers=peers, rounds=rounds or 3, txn_sizes=sorted(set(txn_records)), bootstrap=bootstrap,
                   as_json=as_json, quiet=quiet)
        return
    workload = {
        "client": client, "records": records, "record_size": record_size, "batch_size": batch_size,
        "records_per_batch": records_per_batch(batch_size, record_size), "acks": acks, "partitions": partitions,
        "compression": compression, "topic": spec.topic, "warmup": warmup,
        **({"connections": connections, "in_flight": in_flight} if client == "raw" else {}),
        **({"schema": schema} if schema else {}),
        **({"idempotent": True} if idempotent else {}),
    }
    if by_registry:
        try:
            from tinystream.bench.registry_produce import run_registry_validation  # noqa: PLC0415 - [registry] extra
        except ImportError as exc:
            raise click.ClickException(f"--schema registry needs the [registry] extra ({exc}): "
                                       "pip install 'tinystream[registry]'") from exc
        run_registry_validation(spec=spec, rounds=rounds or 3, bootstrap=bootstrap, registry_url=registry_url,
                                workload=workload, as_json=as_json, quiet=quiet)
        return
    if protocols:
        check_security_options(client, bootstrap, peers, protocols)
        run_security_pairs(benchmark="produce", workload=workload, runner=RUNNERS[client], spec=spec,
                           protocols=list(dict.fromkeys(protocols)), rounds=rounds or 5, as_json=as_json, quiet=quiet)
        return
    run_everywhere(benchmark="produce", workload=workload, runner=RUNNERS[client], spec=spec,
                   bootstrap=bootstrap, peers=peers, as_json=as_json, quiet=quiet)


def _check_registry_options(by_registry: bool, *, registry_url: str | None, bootstrap: str | None, client: str,
                            peers: tuple[str, ...], protocols: tuple[str, ...], other: bool) -> None:
    """--schema registry measures our broker with the raw client, alone; --registry-url goes with --bootstrap."""
    if not by_registry:
        if registry_url:
            raise click.UsageError("--registry-url goes with --schema registry")
        return
    if client != "raw":
        raise click.UsageError("--schema registry measures the broker and needs --client raw")
    if peers or protocols or other:
        raise click.UsageError("--schema registry runs alone: drop --peer, --security, --idempotent, --transactional")
    if bootstrap and not registry_url:
        raise click.UsageError("--schema registry with --bootstrap needs --registry-url, the registry that broker's "
                               "confluent.schema.registry.url names (without --bootstrap both are started here)")
    if registry_url and not bootstrap:
        raise click.UsageError("--registry-url goes with --bootstrap: without it a broker and a registry are "
                               "started here")


def _schema_text(schema: str | None, client: str) -> str | None:
    if schema is None:
        return None
    if client != "raw":
        raise click.UsageError("--schema measures the broker and needs --client raw")
    if schema == "builtin":
        return BUILTIN_SCHEMA
    try:
        with open(schema, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {schema}: {exc}", param_hint="--schema") from None
