"""Any broker started by a shell command that prints its bootstrap address.

`--peer 'my-broker --port 0'` runs the command in a temporary folder; the
command must print `bootstrap=HOST:PORT` (as our CLI does) once it serves.
"""

from __future__ import annotations

from pathlib import Path

from tinystream.testing.peers.process import (
    RunningBroker,
    make_workdir,
    start_broker_process,
)


def start_command(command: str, *, workdir: str | Path | None = None, timeout: float = 120.0,
                  name: str | None = None) -> RunningBroker:
    directory, created = make_workdir(workdir, "peer")
    return start_broker_process(
        name=name or command.split()[0],
        argv=command,
        shell=True,
        workdir=directory,
        remove_workdir=created,
        address=None,
        timeout=timeout,
    )
