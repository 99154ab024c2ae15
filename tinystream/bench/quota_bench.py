"""`tinystream bench quota`: a producer held to its producer_byte_rate beside an unthrottled one, over time.

Issue 24's picture of client quotas: one client-id gets producer_byte_rate = --quota (1 MiB/s by
default), set with AlterClientQuotas (KIP-546) before either producer starts; two confluent-kafka
(librdkafka) producers then write the same topic side by side for --seconds: the throttled one as fast as
its client lets it, the unthrottled one paced by the client at --free-rate. Every acknowledged record's
bytes (key + value) are counted in the second it was acknowledged, so the series is what each client got.

The throttled client's rate is a sawtooth, on Kafka as here: the rate is measured over quota.window.num
(11) one-second windows, never over fewer than 10 s, so a client whose windows are (nearly) empty may send
about quota x 11 s at once; it is then held back (throttle_time_ms, the connection muted) until that burst
leaves the windows, about 11 s later, and bursts again. The average is therefore taken over whole periods:
from the first second up to the start of the last burst (a second over 2 x the quota after one that was
not); with fewer than two bursts, over the whole run. The byte count is the records' payload, a little
below the record batch bytes the broker counts (batch and record headers).

Pure parts (per_second, QuotaRun's figures) are apart from the I/O (PacedProducer, measure).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from tinystream.bench.control import ensure_topic, set_client_quota
from tinystream.bench.targets import open_target
from tinystream.bench.wire_client import WireConnection

MIB = 1 << 20
THROTTLED_CLIENT = "quota-throttled"
FREE_CLIENT = "quota-free"


# --------------------------------------------------------------------------- pure figures


def per_second(events: Sequence[tuple[float, int]], *, start: float, seconds: int) -> tuple[int, ...]:
    """Bytes per whole second since `start`, from (time, bytes) events; events outside the run are dropped."""
    buckets = [0] * seconds
    for at, size in events:
        index = math.floor(at - start)  # not int(): -0.1 must not fall into second 0
        if 0 <= index < seconds:
            buckets[index] += size
    return tuple(buckets)


def mean_rate(series: Sequence[int]) -> float:
    """Mean bytes per second over the series (0.0 for an empty one)."""
    return sum(series) / len(series) if series else 0.0


def burst_starts(series: Sequence[int], *, threshold: float) -> list[int]:
    """Indexes of the seconds over `threshold` whose previous second was not (the sawtooth's teeth)."""
    return [i for i, size in enumerate(series) if size > threshold and (i == 0 or series[i - 1] <= threshold)]


def whole_periods(series: Sequence[int], *, quota: int) -> int:
    """How many leading seconds make whole periods: up to the last burst's start, or all without two bursts."""
    starts = burst_starts(series, threshold=2 * quota)
    return starts[-1] if len(starts) >= 2 else len(series)


@dataclass(frozen=True)
class QuotaRun:
    """Bytes acknowledged per second for both clients, and what they were held to or asked for."""

    target: str
    quota: int  # producer_byte_rate of the throttled client-id, bytes/s
    free_rate: int  # the pace the unthrottled client asked of itself, bytes/s
    throttled: tuple[int, ...]
    unthrottled: tuple[int, ...]

    @property
    def span(self) -> int:
        """The leading seconds the averages cover (whole periods of the throttled client's sawtooth)."""
        return whole_periods(self.throttled, quota=self.quota)

    @property
    def throttled_rate(self) -> float:
        return mean_rate(self.throttled[:self.span])

    @property
    def unthrottled_rate(self) -> float:
        return mean_rate(self.unthrottled[:self.span])

    @property
    def throttled_ratio(self) -> float:
        """The throttled client's rate as a ratio of its quota (1.0 = held exactly to it)."""
        return self.throttled_rate / self.quota

    @property
    def unthrottled_ratio(self) -> float:
        """The unthrottled client's rate as a ratio of what it asked for (1.0 = unaffected)."""
        return self.unthrottled_rate / self.free_rate

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "span_s": self.span, "throttled_rate": self.throttled_rate,
                "unthrottled_rate": self.unthrottled_rate,
                "throttled_ratio": self.throttled_ratio, "unthrottled_ratio": self.unthrottled_ratio}

    def lines(self) -> list[str]:
        rows = ["second  throttled MiB/s  unthrottled MiB/s"]
        rows += [f"{second + 1:6d}  {held / MIB:15.2f}  {free / MIB:17.2f}"
                 for second, (held, free) in enumerate(zip(self.throttled, self.unthrottled, strict=True))]
        span = f"seconds 1-{self.span}" + (" (whole periods)" if self.span < len(self.throttled) else "")
        rows.append(f"throttled (client-id {THROTTLED_CLIENT}, producer_byte_rate {self.quota / MIB:.2f} MiB/s): "
                    f"{self.throttled_rate / MIB:.3f} MiB/s over {span} = {self.throttled_ratio:.3f} x the quota "
                    f"(whole run {mean_rate(self.throttled) / MIB:.3f} MiB/s)")
        rows.append(f"unthrottled (client-id {FREE_CLIENT}, asked {self.free_rate / MIB:.2f} MiB/s): "
                    f"{self.unthrottled_rate / MIB:.3f} MiB/s over {span} = {self.unthrottled_ratio:.3f} x what "
                    f"it asked")
        return rows


def write_picture(run: QuotaRun, path: Path) -> Path:
    """Both clients' MiB/s per second, the quota as a dashed line, the throttled running average."""
    import matplotlib  # optional: the [bench] extra

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt

    seconds = list(range(1, len(run.throttled) + 1))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(seconds, [b / MIB for b in run.unthrottled], color="tab:blue", marker=".",
            label=f"unthrottled ({FREE_CLIENT}, paced at {run.free_rate / MIB:.1f} MiB/s)")
    ax.plot(seconds, [b / MIB for b in run.throttled], color="tab:orange", marker=".",
            label=f"throttled ({THROTTLED_CLIENT}), per second")
    ax.axhline(run.quota / MIB, color="tab:orange", linestyle="--", linewidth=1,
               label=f"producer_byte_rate = {run.quota / MIB:.2f} MiB/s")
    running = [sum(run.throttled[:i]) / i / MIB for i in seconds]
    ax.plot(seconds, running, color="tab:red", linewidth=1.5, label="throttled, average since the start")
    ax.set_xlabel("second of the run")
    ax.set_ylabel("MiB/s acknowledged")
    ax.set_title(f"client quota on {run.target}, producer_byte_rate {run.quota / MIB:.2f} MiB/s: throttled\n"
                 f"{run.throttled_ratio:.2f} x its quota (seconds 1-{run.span}), unthrottled {run.unthrottled_ratio:.2f}"
                 f" x its own pace", fontsize="medium")
    ax.legend(fontsize="small", loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- I/O


class PacedProducer(threading.Thread):
    """A confluent-kafka producer writing `record_size`-byte records until stopped; `rate` paces it (None:
    as fast as the client goes). `acked` collects (monotonic time, bytes) per acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, *, rate: int | None, record_size: int,
                 stop: threading.Event) -> None:
        super().__init__(name=f"producer-{client_id}", daemon=True)
        self.bootstrap, self.topic, self.client_id = bootstrap, topic, client_id
        self.rate, self.record_size, self.stop = rate, record_size, stop
        self.acked: list[tuple[float, int]] = []
        self.errors: list[str] = []

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append((time.monotonic(), len(msg.value() or b"")))
        elif len(self.errors) < 5:
            self.errors.append(str(err))

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id, "acks": "1",
                             "linger.ms": 5, "batch.size": 65536,
                             # A small local queue: the throttled client waits on the broker, not on its buffer.
                             "queue.buffering.max.kbytes": 1024, "message.timeout.ms": 120000})
        value = b"q" * self.record_size
        started, sent = time.monotonic(), 0
        while not self.stop.is_set():
            if self.rate is not None and sent >= self.rate * (time.monotonic() - started):
                producer.poll(0.002)
                continue
            try:
                producer.produce(self.topic, value, on_delivery=self._delivered)
                sent += len(value)
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.purge()
        producer.flush(2)


async def _prepare(bootstrap: str, topic: str, quota: int) -> None:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = await WireConnection.open(host, int(port))
    try:
        await ensure_topic(conn, topic, 1)
        await set_client_quota(conn, THROTTLED_CLIENT, "producer_byte_rate", float(quota))
    finally:
        await conn.close()


def measure(bootstrap: str, *, target: str, quota: int, free_rate: int, seconds: int,
            record_size: int) -> QuotaRun:
    """Set the quota, run both producers side by side for `seconds`, and bucket what each got."""
    topic = f"bench-quota-{uuid.uuid4().hex[:8]}"
    asyncio.run(_prepare(bootstrap, topic, quota))
    time.sleep(1.0)  # Kafka applies the quota through its metadata log; ours answers once applied
    stop = threading.Event()
    held = PacedProducer(bootstrap, topic, THROTTLED_CLIENT, rate=None, record_size=record_size, stop=stop)
    free = PacedProducer(bootstrap, topic, FREE_CLIENT, rate=free_rate, record_size=record_size, stop=stop)
    start = time.monotonic()
    held.start()
    free.start()
    time.sleep(seconds)
    stop.set()
    held.join(timeout=30)
    free.join(timeout=30)
    for producer in (held, free):
        if producer.errors and not producer.acked:
            raise click.ClickException(f"{producer.client_id}: nothing acknowledged: {producer.errors}")
    return QuotaRun(target=target, quota=quota, free_rate=free_rate,
                    throttled=per_second(held.acked, start=start, seconds=seconds),
                    unthrottled=per_second(free.acked, start=start, seconds=seconds))


@click.command("quota")
@click.option("--bootstrap", default=None, metavar="HOST:PORT",
              help="A running broker. Default: start one (--target) in a temporary folder.")
@click.option("--target", type=click.Choice(["tinystream", "kafka"]), default="tinystream", show_default=True,
              help="The broker started when no --bootstrap is given (kafka: Apache Kafka from the jars).")
@click.option("--quota", default=MIB, show_default=True, type=click.IntRange(1024),
              help="producer_byte_rate of the throttled client-id, bytes/s.")
@click.option("--free-rate", default=3 * MIB, show_default=True, type=click.IntRange(1024),
              help="The unthrottled client's own pace, bytes/s.")
@click.option("--seconds", default=60, show_default=True, type=click.IntRange(2))
@click.option("--record-size", default=1000, show_default=True, type=click.IntRange(1))
@click.option("--picture", type=click.Path(dir_okay=False, path_type=Path), default=Path("quota-over-time.png"),
              show_default=True, help="The PNG to write (needs matplotlib, the [bench] extra).")
@click.option("--no-picture", is_flag=True)
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def quota_bench_command(bootstrap: str | None, target: str, quota: int, free_rate: int, seconds: int,
                        record_size: int, picture: Path, no_picture: bool, as_json: bool, quiet: bool) -> None:
    """A producer held to producer_byte_rate beside an unthrottled one: bytes/s per second for both."""
    try:
        import confluent_kafka  # noqa: F401
    except ModuleNotFoundError as exc:
        raise click.ClickException("needs confluent-kafka (pip install confluent-kafka)") from exc
    with open_target(target, bootstrap=bootstrap, quiet=quiet) as running:
        run = measure(running.bootstrap, target=running.name, quota=quota, free_rate=free_rate, seconds=seconds,
                      record_size=record_size)
    written = None if no_picture else write_picture(run, picture)
    if as_json:
        click.echo(json.dumps({**run.as_dict(), "picture": str(written) if written else None}))
        return
    for line in run.lines():
        click.echo(line)
    if written:
        click.echo(f"picture: {written}")
