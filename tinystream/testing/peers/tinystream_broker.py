"""Our own broker as a child process, started through the CLI.

    tinystream broker --port PORT --log-dirs DIR --admin-port 0

prints a line with `bootstrap=127.0.0.1:PORT` when ready and serves until
SIGTERM. Kafka-named settings without a CLI flag go through the environment
layer of the config (`group.initial.rebalance.delay.ms` ->
`TINYSTREAM_GROUP_INITIAL_REBALANCE_DELAY_MS`), which is how the compat suite
keeps rebalances short. Running it as a process (not in-process) keeps the
suite honest: the clients talk to exactly what a user runs.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from tinystream.testing.peers.errors import PeerUnavailable
from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.process import (
    RunningBroker,
    make_workdir,
    start_broker_process,
)


def env_name(kafka_key: str) -> str:
    """`group.initial.rebalance.delay.ms` -> `TINYSTREAM_GROUP_INITIAL_REBALANCE_DELAY_MS`."""
    return "TINYSTREAM_" + kafka_key.upper().replace(".", "_").replace("-", "_")


def cli_argv() -> list[str]:
    """How to run our CLI: the venv's console script, else PATH."""
    script = Path(sys.executable).with_name("tinystream")
    if script.exists():
        return [str(script)]
    found = shutil.which("tinystream")
    if found:
        return [found]
    raise PeerUnavailable("the `tinystream` command is not installed: pip install -e . in the venv")


def start_tinystream(
    *,
    workdir: str | Path | None = None,
    port: int | None = None,
    overrides: Mapping[str, object] | None = None,
    timeout: float = 60.0,
    extra_args: tuple[str, ...] = (),
) -> RunningBroker:
    directory, created = make_workdir(workdir, "broker")
    port = port or free_port()
    log_dirs = directory / "data"
    log_dirs.mkdir(exist_ok=True)
    argv = [*cli_argv(), "broker", "--port", str(port), "--log-dirs", str(log_dirs), "--admin-port", "0", *extra_args]
    env = {env_name(key): str(value).lower() if isinstance(value, bool) else str(value)
           for key, value in (overrides or {}).items()}
    env.setdefault("PYTHONUNBUFFERED", "1")
    return start_broker_process(
        name="tinystream",
        argv=argv,
        workdir=directory,
        remove_workdir=created,
        address=("127.0.0.1", port),
        env=env,
        timeout=timeout,
        version=os.environ.get("TINYSTREAM_VERSION", ""),
    )
