"""`tinystream bench consume`: consume throughput, ours against peers.

In the spirit of kafka-consumer-perf-test: the topic is filled with N
records first (not measured; an existing topic with enough records is
used as it is), then read from the beginning; prints records/s, MB/s and
per-fetch latency percentiles, with a progress line each second.

    tinystream bench consume                            # starts our broker in a temp dir
    tinystream bench consume --peer kafka --json

The default client is a raw Fetch loop that counts records from the batch
headers (consume_workloads.py); `--client confluent` uses librdkafka and
`--client java` Kafka's ConsumerPerformance, `--client franz` franz-go's kgo
(franzbench, tools/install-go-programs.sh). `--security PROTOCOL` (confluent
client; java or franz for SSL alone) reads over a listener with that protocol in pairs
with PLAINTEXT (security_bench.py).
"""

from __future__ import annotations

import uuid

import click

from tinystream.bench.batches import CODECS
from tinystream.bench.consume_workloads import RUNNERS, ConsumeSpec
from tinystream.bench.runs import run_everywhere
from tinystream.bench.security_bench import SECURED, check_security_options, run_security_pairs


@click.command("consume")
@click.option("--bootstrap", default=None, metavar="HOST:PORT",
              help="Our broker, already running. Without it one is started in a temp dir.")
@click.option("--records", default=5_000_000, show_default=True, type=click.IntRange(1))
@click.option("--record-size", default=100, show_default=True, type=click.IntRange(0))
@click.option("--batch-size", default=262_144, show_default=True, type=click.IntRange(128),
              help="Bytes per batch when filling the topic.")
@click.option("--topic", default=None, help="Topic to read (filled if short). Default: a new bench-consume-* topic.")
@click.option("--partitions", default=6, show_default=True, type=click.IntRange(1))
@click.option("--compression", type=click.Choice(sorted(CODECS)), default="none", show_default=True,
              help="Codec of the batches written when filling the topic.")
@click.option("--client", type=click.Choice(sorted(RUNNERS)), default="raw", show_default=True)
@click.option("--connections", default=2, show_default=True, type=click.IntRange(1), help="raw client only.")
@click.option("--fetch-bytes", default=8 << 20, show_default=True, type=click.IntRange(1024),
              help="Per-partition fetch size (max.partition.fetch.bytes).")
@click.option("--peer", "peers", multiple=True, metavar="NAME|CMD",
              help="Also run against `kafka`, `tansu`, or a shell command that prints bootstrap=HOST:PORT.")
@click.option("--security", "protocols", multiple=True, type=click.Choice(SECURED), metavar="PROTOCOL",
              help="Also over a listener with this security protocol (SSL, SASL_SSL, SASL_PLAINTEXT: SCRAM-SHA-512), "
                   "in pairs with PLAINTEXT on a broker started with throwaway credentials; "
                   "needs --client confluent (or java or franz, for SSL alone).")
@click.option("--rounds", default=5, show_default=True, type=click.IntRange(1),
              help="With --security: pairs per protocol (medians and ranges are printed).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def consume_bench_command(bootstrap, records, record_size, batch_size, topic, partitions, compression, client,
                          connections, fetch_bytes, peers, protocols, rounds, as_json, quiet) -> None:
    """Consume benchmark: records/s, MB/s and fetch latency, ours and peers."""
    spec = ConsumeSpec(
        topic=topic or f"bench-consume-{uuid.uuid4().hex[:8]}", partitions=partitions, records=records,
        record_size=record_size, batch_bytes=batch_size, compression=compression, fetch_bytes=fetch_bytes,
        connections=connections, progress=not quiet,
    )
    workload = {"client": client, "records": records, "record_size": record_size, "partitions": partitions,
                "compression": compression, "topic": spec.topic, "fetch_bytes": fetch_bytes,
                **({"connections": connections} if client == "raw" else {})}
    if protocols:
        check_security_options(client, bootstrap, peers, protocols)
        run_security_pairs(benchmark="consume", workload=workload, runner=RUNNERS[client], spec=spec,
                           protocols=list(dict.fromkeys(protocols)), rounds=rounds, as_json=as_json, quiet=quiet)
        return
    run_everywhere(benchmark="consume", workload=workload, runner=RUNNERS[client], spec=spec,
                   bootstrap=bootstrap, peers=peers, as_json=as_json, quiet=quiet)
