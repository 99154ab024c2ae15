"""The memory a broker holds: the resident set (VmRSS) of its process group, read from /proc (Linux).

A broker the benchmark started runs in its own process group (see cpu.py), so its memory is the sum over
every live process of that group: our broker, or Kafka's JVM. None where there is no /proc.
"""

from __future__ import annotations

from pathlib import Path

from tinystream.bench.cpu import PROC, group_processes


def parse_rss_bytes(status: str) -> int:
    """VmRSS from a /proc/PID/status text (kB in the file); 0 for a kernel thread or a zombie without it."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def group_rss_bytes(pgid: int, proc: Path = PROC) -> int | None:
    if not proc.is_dir():
        return None
    total = 0
    for entry, _ in group_processes((pgid,), proc):
        try:
            total += parse_rss_bytes((entry / "status").read_text())
        except OSError:  # gone meanwhile
            continue
    return total
