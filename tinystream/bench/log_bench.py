"""Storage benchmark: SegmentedLog against plain file I/O of the same bytes.

For each batch size: append N batches to a SegmentedLog in a temporary
directory and read them all back one batch per read; then write and read the
same bytes with a plain buffered file in the same chunk size and the same
fsync policy (``--fsync``: the log flushes every append, flush.messages=1,
and the plain file fdatasyncs every write). Each measurement runs three
times, alternating log and plain file, and the best run counts (the page
cache's writeback makes single runs noisy). Figures: batches/s, MB/s
(10^6 bytes) and the log/plain ratio.

Then offset lookups: a log of 1,000,000 small batches (default 1 GiB
segments, index.interval.bytes 4096) is built through the follower path
(``append_replicated`` in 10,000-batch chunks, every batch still CRC-checked
and indexed), and random offsets are located (index bisect plus a short header
walk, ``SegmentedLog.locate``) and read (``read(offset, 1)``); the medians
are reported in microseconds.

Aims: 16 KiB appends at >= 0.7x plain-file speed; lookups < 50 us.

``run_log_bench(...)`` returns the figures as a dict; ``log_bench_command``
is the click command the CLI mounts as ``tinystream bench log``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.batch import Record, build_batch
from tinystream.broker.storage.segmented import SegmentedLog

MIB = 1024 * 1024
DEFAULT_TOTAL_BYTES = 64 * MIB
DEFAULT_FSYNC_TOTAL_BYTES = 8 * MIB
LOOKUP_BATCHES = 1_000_000
LOOKUP_SAMPLES = 20_000
ROUNDS = 3
APPEND_AIM_SIZE = 16 * 1024
APPEND_AIM_RATIO = 0.7
LOOKUP_AIM_US = 50.0
_fdatasync = getattr(os, "fdatasync", os.fsync)


def parse_size(text: str) -> int:
    """'1KiB' / '16KiB' / '1MiB' / '4096' -> bytes."""
    units = {"kib": 1024, "kb": 1024, "k": 1024, "mib": MIB, "mb": MIB, "m": MIB, "b": 1, "": 1}
    cleaned = text.strip().lower()
    number = cleaned.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = cleaned[len(number) :]
    if unit not in units or not number:
        raise ValueError(f"not a size: {text!r} (use e.g. 1KiB, 16KiB, 1MiB)")
    return int(float(number) * units[unit])


def human_size(size: int) -> str:
    if size % MIB == 0:
        return f"{size // MIB}MiB"
    if size % 1024 == 0:
        return f"{size // 1024}KiB"
    return f"{size}B"


def batch_of_size(size: int) -> bytes:
    """A one-record batch of exactly ``size`` bytes (random value, so codecs or dedup cannot cheat)."""
    value_size = max(0, size - 70)
    for _ in range(4):
        data = build_batch([Record(key=None, value=os.urandom(value_size))])
        if len(data) == size:
            return data
        value_size = max(0, value_size + size - len(data))
    raise ValueError(f"cannot build a batch of exactly {size} bytes (the smallest is about 70)")


# ---------------------------------------------------------------------------- measurements


def bench_size(size: int, total_bytes: int, fsync: bool, workdir: Path, advance=lambda: None) -> dict:
    """Append/read figures for one batch size.

    Log and plain file run interleaved in blocks of about 4 MiB (alternating
    which goes first), so both see the same background load and page-cache
    state. Each side's figure is its fastest block over ROUNDS rounds (the
    estimator timeit recommends): on a shared machine a neighbour's burst
    slows some blocks of either side, and the fastest block is the one
    closest to the code's own cost. "read" is one batch per call (the same
    chunk size as the file reads); "fetch" reads with 1 MiB requests.
    """
    batch = batch_of_size(size)
    count = max(16, total_bytes // size)
    nbytes = count * size
    block = max(1, min(count, 4 * MIB // size))
    samples: dict[str, list[float]] = {k: [] for k in ("log_append", "plain_append", "log_read", "plain_read")}
    fetch_best = float("inf")
    for round_ in range(ROUNDS):
        log_dir = workdir / f"log-{size}-{round_}"
        plain_path = workdir / f"plain-{size}-{round_}.bin"
        log = SegmentedLog.open(log_dir, LogConfig(flush_messages=1 if fsync else None), now_ms=0)
        try:
            _append_blocks(log, plain_path, batch, count=count, block=block, fsync=fsync, samples=samples)
            log_read = _read_blocks(log, plain_path, size, count=count, block=block, samples=samples)
            seconds, fetched = _fetch_all(log, size)
            fetch_best = min(fetch_best, seconds)
            if log_read != nbytes or fetched != nbytes or plain_path.stat().st_size != nbytes:
                raise RuntimeError(f"read back {log_read} / {fetched} bytes of the log, wrote {nbytes}")
        finally:
            log.delete()  # no final fsync: it is not part of the figures
            plain_path.unlink(missing_ok=True)
        advance()
    return _size_figures(size, count, {key: min(values) for key, values in samples.items()}, fetch_best)


def _sides(index: int) -> tuple[str, str]:
    """Which side goes first in block `index`: alternating, so neither always meets a cold cache first."""
    return ("log", "plain") if index % 2 == 0 else ("plain", "log")


def _append_blocks(
    log: SegmentedLog, plain_path: Path, batch: bytes, *, count: int, block: int, fsync: bool,
    samples: dict[str, list[float]],
) -> None:
    """Append `count` copies of `batch` to the log and to a plain file, block by block, timing each
    block per batch into `samples` (log_append, plain_append). With fsync the plain file fdatasyncs
    every write, as flush.messages=1 makes the log do."""
    append = log.append
    clock = time.perf_counter
    with open(plain_path, "wb") as plain:
        write, fileno = plain.write, plain.fileno()
        for index, start in enumerate(range(0, count, block)):
            todo = range(min(block, count - start))
            for side in _sides(index):
                began = clock()
                if side == "log":
                    for _ in todo:
                        append(batch, leader_epoch=0, now_ms=0)
                elif fsync:
                    for _ in todo:
                        write(batch)
                        plain.flush()
                        _fdatasync(fileno)
                else:
                    for _ in todo:
                        write(batch)
                samples[f"{side}_append"].append((clock() - began) / len(todo))


def _read_blocks(
    log: SegmentedLog, plain_path: Path, size: int, *, count: int, block: int, samples: dict[str, list[float]]
) -> int:
    """Read everything back one batch per call from both sides, block by block, timing each block per
    batch into `samples` (log_read, plain_read); returns the bytes the log gave, to be checked."""
    read = log.read
    clock = time.perf_counter
    offset = log_read = 0
    with open(plain_path, "rb") as plain:
        plain_read = plain.read
        for index, start in enumerate(range(0, count, block)):
            todo = range(min(block, count - start))
            for side in _sides(index):
                began = clock()
                if side == "log":
                    for _ in todo:
                        result = read(offset, size)
                        offset = result.next_offset
                        log_read += len(result.data)
                else:
                    for _ in todo:
                        plain_read(size)
                samples[f"{side}_read"].append((clock() - began) / len(todo))
    return log_read


def _fetch_all(log: SegmentedLog, size: int) -> tuple[float, int]:
    """(seconds, bytes) to read the whole log in 1 MiB requests, as a consumer's fetches would."""
    read = log.read
    clock = time.perf_counter
    began = clock()
    offset = fetched = 0
    while offset < log.log_end_offset:
        result = read(offset, max(MIB, size))
        fetched += len(result.data)
        offset = result.next_offset
    return clock() - began, fetched


def _size_figures(size: int, count: int, per_batch: dict[str, float], fetch_best: float) -> dict:
    """The figures of one batch size, from each side's fastest seconds per batch."""
    return {
        "batch_bytes": size,
        "batch_size": human_size(size),
        "batches": count,
        "bytes": count * size,
        "append": {
            "log": _rate(size, per_batch["log_append"]),
            "plain": _rate(size, per_batch["plain_append"]),
            "ratio": round(per_batch["plain_append"] / per_batch["log_append"], 3),
        },
        "read": {
            "log": _rate(size, per_batch["log_read"]),
            "plain": _rate(size, per_batch["plain_read"]),
            "ratio": round(per_batch["plain_read"] / per_batch["log_read"], 3),
            "log_1mib_fetches": _rate(size, fetch_best / count),
        },
    }


def _rate(size: int, seconds_per_batch: float) -> dict:
    seconds_per_batch = max(seconds_per_batch, 1e-12)
    return {
        "us_per_batch": round(seconds_per_batch * 1e6, 3),
        "batches_per_s": round(1 / seconds_per_batch, 1),
        "mb_per_s": round(size / seconds_per_batch / 1e6, 1),
    }


def build_lookup_log(directory: Path, batches: int, advance=lambda n: None) -> SegmentedLog:
    """A log of ``batches`` small batches, built through append_replicated in large chunks."""
    template = build_batch([Record(key=b"key", value=b"0123456789abcdef")], partition_leader_epoch=0)
    size = len(template)
    chunk_batches = 10_000
    log = SegmentedLog.open(directory, LogConfig(), now_ms=0)
    pack_into = struct.pack_into
    buffer = bytearray(template * chunk_batches)
    offset = 0
    while offset < batches:
        count = min(chunk_batches, batches - offset)
        for i in range(count):
            pack_into(">q", buffer, i * size, offset + i)  # baseOffset is outside the CRC
        log.append_replicated(memoryview(buffer)[: count * size])
        offset += count
        advance(count)
    return log


def bench_lookup(workdir: Path, batches: int, samples: int, advance=lambda n: None) -> dict:
    log = build_lookup_log(workdir / "lookup", batches, advance)
    try:
        rng = random.Random(42)
        targets = [rng.randrange(batches) for _ in range(samples)]
        locate = log.locate
        read = log.read
        clock = time.perf_counter_ns
        locate_ns = []
        for target in targets:
            started = clock()
            locate(target)
            locate_ns.append(clock() - started)
        read_ns = []
        for target in targets[: samples // 2]:
            started = clock()
            result = read(target, 1)
            read_ns.append(clock() - started)
            if result.first_offset != target:
                raise RuntimeError(f"read({target}) returned the batch at {result.first_offset}")
        locate_ns.sort()
        return {
            "batches": batches,
            "segments": log.segment_count(),
            "log_bytes": log.size_bytes(),
            "samples": samples,
            "locate_us_median": round(statistics.median(locate_ns) / 1000, 2),
            "locate_us_p99": round(locate_ns[int(len(locate_ns) * 0.99)] / 1000, 2),
            "read_us_median": round(statistics.median(read_ns) / 1000, 2),
        }
    finally:
        log.close()


# ---------------------------------------------------------------------------- entry points


def run_log_bench(
    sizes: Sequence[int] = (1024, 16384, 1048576),
    total_bytes: int | None = None,
    fsync: bool = False,
    directory: str | os.PathLike | None = None,
    json_output: bool = False,
    progress: bool = True,
    *,
    lookup_batches: int = LOOKUP_BATCHES,
    lookup_samples: int = LOOKUP_SAMPLES,
    show_aims: bool = True,
) -> dict:
    """Run the benchmark, print its figures (a table, or one JSON object with ``json_output``), return them.

    ``show_aims=False`` leaves out the development aims (`tinystream demo` speaks to users).
    """
    if total_bytes is None:
        total_bytes = DEFAULT_FSYNC_TOTAL_BYTES if fsync else DEFAULT_TOTAL_BYTES
    stderr = Console(stderr=True)
    workdir = Path(tempfile.mkdtemp(prefix="tinystream-log-bench-", dir=directory))
    results: dict = {
        "fsync": fsync,
        "total_bytes_per_size": total_bytes,
        "rounds": ROUNDS,
        "python": sys.version.split()[0],
        "sizes": [],
    }
    bar = (
        Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                 TimeElapsedColumn(), console=stderr, transient=True)
        if progress
        else nullcontext()
    )
    try:
        with bar:
            for size in sizes:
                task = bar.add_task(f"append+read {human_size(size)} batches", total=ROUNDS) if progress else None
                advance = (lambda t=task: bar.advance(t)) if progress else (lambda: None)
                results["sizes"].append(bench_size(size, total_bytes, fsync, workdir, advance))
            if lookup_batches > 0:
                task = bar.add_task(f"build a {lookup_batches:,}-batch log", total=lookup_batches) if progress else None
                step = (lambda n, t=task: bar.advance(t, n)) if progress else (lambda n: None)
                results["lookup"] = bench_lookup(workdir, lookup_batches, lookup_samples, step)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["aims"] = _aims(results)
    if json_output:
        click.echo(json.dumps(results))
    else:
        _print_table(results, show_aims=show_aims)
    return results


def _aims(results: dict) -> dict:
    aims = {}
    for row in results["sizes"]:
        if row["batch_bytes"] == APPEND_AIM_SIZE:
            aims["append_16KiB_ratio_at_least_0.7"] = row["append"]["ratio"] >= APPEND_AIM_RATIO
    if "lookup" in results:
        aims["lookup_median_under_50us"] = results["lookup"]["locate_us_median"] < LOOKUP_AIM_US
    return aims


def _print_table(results: dict, *, show_aims: bool = True) -> None:
    console = Console()
    policy = "fdatasync every append / write" if results["fsync"] else "page cache, no fsync"
    table = Table(title=f"SegmentedLog vs plain file ({policy}; best ~4 MiB block of {results['rounds']} rounds)")
    for column in ("batch", "operation", "log batches/s", "log MB/s", "file batches/s", "file MB/s", "log/file"):
        table.add_column(column, justify="right")
    for row in results["sizes"]:
        for name, label in (("append", "append"), ("read", "read")):
            figures = row[name]
            table.add_row(
                row["batch_size"],
                label,
                f"{figures['log']['batches_per_s']:,.0f}",
                f"{figures['log']['mb_per_s']:,.0f}",
                f"{figures['plain']['batches_per_s']:,.0f}",
                f"{figures['plain']['mb_per_s']:,.0f}",
                f"{figures['ratio']:.2f}x",
            )
        fetch = row["read"]["log_1mib_fetches"]
        table.add_row(row["batch_size"], "fetch", f"{fetch['batches_per_s']:,.0f}", f"{fetch['mb_per_s']:,.0f}",
                      "", "", "", end_section=True)
    console.print(table)
    console.print("read = read(offset, one batch) per call, like the file's chunked reads; fetch = read(offset, 1 MiB)")
    if "lookup" in results:
        lookup = results["lookup"]
        console.print(
            f"offset lookup in {lookup['batches']:,} batches ({lookup['log_bytes'] / 1e6:,.0f} MB, "
            f"{lookup['segments']} segment(s)): median {lookup['locate_us_median']} µs, "
            f"p99 {lookup['locate_us_p99']} µs; read of one batch: median {lookup['read_us_median']} µs"
        )
    if show_aims:
        for name, met in results["aims"].items():
            console.print(f"aim {name}: {'met' if met else 'NOT met'}")


def _parse_sizes(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        sizes = tuple(parse_size(part) for part in value.split(",") if part.strip())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    if not sizes or min(sizes) < 128:
        raise click.BadParameter("give one or more sizes of at least 128 bytes, e.g. 1KiB,16KiB,1MiB")
    return sizes


@click.command("log")
@click.option("--sizes", default="1KiB,16KiB,1MiB", show_default=True, callback=_parse_sizes,
              help="Batch sizes, comma separated.")
@click.option("--total-mb", type=click.FloatRange(min=0.001), default=None,
              help=f"MiB written per size [default: {DEFAULT_TOTAL_BYTES // MIB}, "
                   f"{DEFAULT_FSYNC_TOTAL_BYTES // MIB} with --fsync].")
@click.option("--fsync/--no-fsync", default=False, show_default=True,
              help="fsync every append (flush.messages=1) and every plain write.")
@click.option("--dir", "directory", type=click.Path(file_okay=False, exists=True), default=None,
              help="Where the temporary files go [default: the system temp dir].")
@click.option("--json", "json_output", is_flag=True, help="Print one JSON object to stdout instead of a table.")
@click.option("--lookup-batches", type=click.IntRange(min=0), default=LOOKUP_BATCHES, show_default=True,
              help="Batches in the offset-lookup log (0 skips it).")
def log_bench_command(sizes, total_mb, fsync, directory, json_output, lookup_batches) -> None:
    """Append and read a SegmentedLog against plain file I/O; time offset lookups."""
    run_log_bench(
        sizes=sizes,
        total_bytes=None if total_mb is None else int(total_mb * MIB),
        fsync=fsync,
        directory=directory,
        json_output=json_output,
        progress=True,
        lookup_batches=lookup_batches,
    )
