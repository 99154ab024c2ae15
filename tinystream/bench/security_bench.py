"""What TLS and SASL cost a producer or a consumer: `tinystream bench produce|consume --security ...`.

One broker is started (a child process, as a user runs it) with a listener per protocol and throwaway
credentials made here: a CA and a certificate for 127.0.0.1 (trustme), and a SCRAM-SHA-512 user:

    listeners=PLAINTEXT://127.0.0.1:A,SSL://127.0.0.1:B,SASL_SSL://127.0.0.1:C,SASL_PLAINTEXT://127.0.0.1:D
    sasl.enabled.mechanisms=SCRAM-SHA-512

The same workload then runs through librdkafka (the confluent client) over PLAINTEXT and over each
protocol asked for, as pairs: each round runs PLAINTEXT and the protocol back to back, in alternating
order (PLAINTEXT first in even rounds, second in odd ones), so drift over the run (page cache, a log
growing, the other helpers on the machine) falls on both sides alike. Printed per protocol: median
records/s of each side with its range over the rounds, and the median of the per-round ratios
protocol / PLAINTEXT with its range.

    tinystream bench produce --client confluent --security SSL --security SASL_SSL --security SASL_PLAINTEXT
    tinystream bench consume --client confluent --security SSL --rounds 7 --records 500000 --json

The confluent client measures every protocol; Kafka's Java tools (`--client java`) measure SSL alone
(they are given TLS settings, tls_cells.java_client_props), the load generator of issue 26's TLS goal:

    tinystream bench consume --client java --security SSL --rounds 4 --records 2000000

The raw wire client speaks plaintext only (it does the unmeasured set-up, topic creation and filling,
over the PLAINTEXT listener). Each run also gives the broker's CPU per GB (bench/cpu.py).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from tinystream.bench.stats import RunResult, Spread
from tinystream.bench.targets import Target
from tinystream.scram_users import UserStore
from tinystream.testing.broker import ThrowawayPki
from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.tinystream_broker import start_tinystream

SECURED = ("SSL", "SASL_SSL", "SASL_PLAINTEXT")
MECHANISM = "SCRAM-SHA-512"
USER = "bench"


@dataclass(frozen=True)
class SecuredBroker:
    """The started broker: a Target per listener (PLAINTEXT first)."""

    targets: dict[str, Target]


def _credentials(folder: Path, password: str) -> tuple[Path, Path, Path]:
    """(keystore PEM, CA PEM, users file) made for this run."""
    try:
        pki = ThrowawayPki(folder / "pki")
    except ImportError as exc:  # trustme is in the [test] extra
        raise click.ClickException("--security makes throwaway certificates with trustme: "
                                   "pip install trustme (in the [test] extra)") from exc
    keystore = pki.issue("broker")
    users = UserStore()
    users.set_password(USER, password, mechanisms=(MECHANISM,))
    users.save(folder / "users.json")
    return keystore, pki.ca_pem, folder / "users.json"


@contextlib.contextmanager
def secured_broker(protocols: Sequence[str], *, quiet: bool) -> Iterator[SecuredBroker]:
    """Start one broker with PLAINTEXT and every protocol in `protocols`, each on its own listener."""
    with tempfile.TemporaryDirectory(prefix="tinystream-bench-security-") as workdir:
        folder = Path(workdir)
        password = secrets.token_urlsafe(16)
        keystore, ca, users = _credentials(folder, password)
        ports = {name: free_port() for name in ("PLAINTEXT", *protocols)}
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
        overrides = {
            "listeners": listeners, "ssl.keystore.location": str(keystore), "ssl.truststore.location": str(ca),
            "sasl.users.file": str(users), "sasl.enabled.mechanisms": MECHANISM,
        }
        if not quiet:
            print(f"starting tinystream with listeners={listeners} ...", file=sys.stderr, flush=True)
        running = start_tinystream(workdir=folder / "broker", port=ports["PLAINTEXT"], overrides=overrides)
        try:
            plain = f"127.0.0.1:{ports['PLAINTEXT']}"
            targets = {"PLAINTEXT": Target(name="PLAINTEXT", bootstrap=plain, version=running.version, process=running)}
            for name in protocols:
                config = {"security.protocol": name}
                if name in ("SSL", "SASL_SSL"):
                    config["ssl.ca.location"] = str(ca)
                if name.startswith("SASL"):
                    config.update({"sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": password})
                targets[name] = Target(name=name, bootstrap=f"127.0.0.1:{ports[name]}", version=running.version,
                                       client_config=config, setup_bootstrap=plain, process=running)
            yield SecuredBroker(targets)
        finally:
            running.stop()


@dataclass(frozen=True)
class PairSummary:
    protocol: str
    plaintext: Spread  # records/s
    secured: Spread  # records/s
    ratio: Spread  # per round: secured / plaintext

    def line(self) -> str:
        def rate(s: Spread) -> str:
            return f"{s.median:>10,.0f} records/s [{s.low:,.0f}..{s.high:,.0f}]"

        return (f"{self.protocol:<15} {rate(self.secured)}   PLAINTEXT {rate(self.plaintext)}   "
                f"ratio {self.ratio.median:.2f} [{self.ratio.low:.2f}..{self.ratio.high:.2f}] over "
                f"{self.ratio.count} rounds")

    def as_dict(self) -> dict:
        return {"protocol": self.protocol, "records_per_s": self.secured.as_dict(1),
                "plaintext_records_per_s": self.plaintext.as_dict(1), "ratio_to_plaintext": self.ratio.as_dict(3)}


def summarize(protocol: str, pairs: list[tuple[RunResult, RunResult]]) -> PairSummary:
    """`pairs`: (PLAINTEXT run, protocol run) of each round."""
    return PairSummary(
        protocol=protocol,
        plaintext=Spread.of([p.records_per_s for p, _ in pairs]),
        secured=Spread.of([s.records_per_s for _, s in pairs]),
        ratio=Spread.of([s.records_per_s / p.records_per_s for p, s in pairs if p.records_per_s > 0]),
    )


def pair_order(protocol: str, round_index: int) -> tuple[str, str]:
    """PLAINTEXT first in even rounds, second in odd ones."""
    return ("PLAINTEXT", protocol) if round_index % 2 == 0 else (protocol, "PLAINTEXT")


def check_security_options(client: str, bootstrap: str | None, peers: Sequence[str],
                           protocols: Sequence[str] = ()) -> None:
    """librdkafka speaks every protocol here; Kafka's Java tools and franzbench are given TLS settings only
    (tls_cells.py, franz_client.py)."""
    tls_only_ok = client in ("java", "franz") and set(protocols) <= {"SSL"}
    if client != "confluent" and not tls_only_ok:
        raise click.UsageError("--security measures through librdkafka (--client confluent), or for SSL alone "
                               "through Kafka's Java tools (--client java) or franz-go (--client franz)")
    if bootstrap or peers:
        raise click.UsageError("--security starts its own broker: drop --bootstrap and --peer")


def run_security_pairs(*, benchmark: str, workload: dict, runner: Callable[[Target, object], RunResult],
                       spec: object, protocols: Sequence[str], rounds: int, as_json: bool, quiet: bool) -> None:
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if as_json else click.echo
    say(f"{benchmark} over listeners: " + ", ".join(f"{k}={v}" for k, v in workload.items()))
    pairs: dict[str, list[tuple[RunResult, RunResult]]] = {p: [] for p in protocols}
    with secured_broker(protocols, quiet=quiet) as broker:
        for round_index in range(rounds):
            for protocol in protocols:
                results = {}
                for name in pair_order(protocol, round_index):
                    results[name] = runner(broker.targets[name], spec)
                    if not quiet:
                        say(f"round {round_index + 1}/{rounds} " + results[name].line())
                pairs[protocol].append((results["PLAINTEXT"], results[protocol]))
    summaries = [summarize(p, pairs[p]) for p in protocols]
    for summary in summaries:
        say(summary.line())
    if as_json:
        click.echo(json.dumps({
            "benchmark": benchmark, "workload": workload, "rounds": rounds,
            "summaries": [s.as_dict() for s in summaries],
            "runs": {p: [[a.as_dict(), b.as_dict()] for a, b in pairs[p]] for p in protocols},
        }, indent=2))
