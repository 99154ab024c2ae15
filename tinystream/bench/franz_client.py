"""franzbench, franz-go's kgo client as a load generator (`--client franz` of bench consume / produce / compare).

tests/compat/go/franzbench (built by tools/install-go-programs.sh into .cache/go-tools, franz-go pinned in
its go.mod) consumes or produces N records with one kgo client and prints one JSON line, with its own
CPU over the timed window. kgo is faster than the Java ConsumerPerformance, yet against one broker it
decodes each Fetch answer on one goroutine, so a consume still saturates it first: its CPU (RunResult's
client_cpu_s) shows that in every run. This module only builds the command line and reads the line
back; the runners are in consume_workloads / produce_workloads.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tinystream.bench.cpu import CpuMeter
from tinystream.testing.peers import PeerUnavailable
from tinystream.testing.peers.apache_kafka import REPO_ROOT

FRANZ_GO_VERSION = "v1.22.3"  # tests/compat/go/franzbench/go.mod
INSTALL_HINT = "run tools/install-go-programs.sh franzbench (needs Go 1.26+ and the Go module proxy)"


def franz_binary() -> Path:
    """The built franzbench, or PeerUnavailable with the install hint."""
    folder = Path(os.environ.get("TINYSTREAM_GO_TOOLS") or REPO_ROOT / ".cache" / "go-tools")
    binary = folder / "franzbench"
    if not binary.is_file():
        raise PeerUnavailable(f"franzbench not built in {folder}: {INSTALL_HINT}")
    return binary


def tls_args(client_config: Mapping[str, str]) -> list[str]:
    """librdkafka's names for a TLS client (a target's client_config) as franzbench's flags."""
    protocol = client_config.get("security.protocol", "PLAINTEXT")
    unknown = sorted(set(client_config) - {"security.protocol", "ssl.ca.location"})
    if unknown or protocol not in ("PLAINTEXT", "SSL"):
        raise ValueError(f"franzbench speaks PLAINTEXT and SSL only, not {protocol} / {', '.join(unknown) or '-'}")
    if protocol == "SSL":
        if "ssl.ca.location" not in client_config:
            raise ValueError("franzbench over SSL needs ssl.ca.location (the CA that signed the broker)")
        return ["-ca", client_config["ssl.ca.location"]]
    return []


def consume_command(binary: Path, bootstrap: str, client_config: Mapping[str, str], *, topic: str, records: int,
                    fetch_bytes: int, max_bytes: int, timeout_s: float) -> list[str]:
    """Read `records` records of `topic` from the start of every partition."""
    return [str(binary), "-brokers", bootstrap, "-topic", topic, "-records", str(records),
            "-fetch-bytes", str(fetch_bytes), "-max-bytes", str(max_bytes), "-timeout", f"{timeout_s:.0f}s",
            *tls_args(client_config)]


def produce_command(binary: Path, bootstrap: str, client_config: Mapping[str, str], *, topic: str, records: int,
                    record_size: int, compression: str, batch_bytes: int, timeout_s: float) -> list[str]:
    """Produce `records` records of `record_size` bytes, acks=1, not idempotent."""
    return [str(binary), "-produce", "-brokers", bootstrap, "-topic", topic, "-records", str(records),
            "-record-bytes", str(record_size), "-compression", compression, "-batch-bytes", str(batch_bytes),
            "-timeout", f"{timeout_s:.0f}s", *tls_args(client_config)]


@dataclass(frozen=True)
class FranzResult:
    records: int
    bytes: int  # record values
    seconds: float  # from the first poll (or produce) to the last record (or ack)
    polls: int
    error: str
    cpu_seconds: float | None  # franzbench's own CPU over `seconds` (None from a binary built before it said)
    raw: dict[str, object]


def parse_result(stdout: str) -> FranzResult | None:
    """franzbench's JSON result (its last line that is a JSON object), or None when there is none."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
            return FranzResult(records=int(row["records"]), bytes=int(row["bytes"]), seconds=float(row["seconds"]),
                               polls=int(row.get("polls") or 0), error=str(row.get("error") or ""),
                               cpu_seconds=None if row.get("cpu_seconds") is None else float(row["cpu_seconds"]),
                               raw=row)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return None
    return None


def run(command: list[str], *, timeout_s: float) -> FranzResult:
    """Run franzbench; its result, or RuntimeError with its output when it failed or printed none."""
    out = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s + 30, check=False)
    result = parse_result(out.stdout)
    if out.returncode != 0 or result is None or result.error:
        raise RuntimeError(f"franzbench exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return result


def run_metered(command: list[str], *, timeout_s: float, pgid: int | None,
                error: type[Exception]) -> tuple[FranzResult, float | None]:
    """`run`, with the CPU seconds the broker's process group used meanwhile; a failure raised as `error`."""
    with CpuMeter(pgid).measure() as cpu:  # the whole tool run (the Go binary starts in milliseconds)
        try:
            got = run(command, timeout_s=timeout_s)
        except RuntimeError as exc:
            raise error(str(exc)) from exc
    return got, cpu.seconds
