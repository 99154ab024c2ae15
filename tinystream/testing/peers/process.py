"""A broker running as a child process: start, wait until ready, stop.

Every launcher (our broker, Apache Kafka, tansu, an arbitrary command) ends
in `start_broker_process`, which owns the same steps:

1. spawn the command in its own session (so a shell or JVM and all its
   children stop together), stdout and stderr to `<workdir>/broker.log`;
2. learn the bootstrap address: given up front, or read from the log
   (`bootstrap=HOST:PORT`, our CLI's ready line);
3. probe it (`probe.wait_ready`) until ready, the process dies, or the
   timeout passes -- then stop it and raise `PeerStartError` with the log
   tail (the folder is kept for a look).

`RunningBroker.stop()` sends SIGTERM to the process group, waits, then
SIGKILL. It only ever signals the group it started.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from tinystream.testing.peers.errors import PeerStartError
from tinystream.testing.peers.probe import wait_ready

BOOTSTRAP_LINE = re.compile(r"bootstrap=([A-Za-z0-9_.\-\[\]:]+?):(\d+)\b")


class ProcessGroupOwner:
    """What a started child (a broker, a registry) does with the process group it runs in: the subclass
    (a dataclass) has `process`, `workdir`, `log_path` and `remove_workdir`."""

    process: subprocess.Popen
    workdir: Path
    log_path: Path
    remove_workdir: bool

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM the process group, then SIGKILL after `timeout`; returns the exit code."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
                self.process.wait(10)
        if self.remove_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return self.process.returncode

    def kill(self) -> int | None:
        """SIGKILL the process group (an unclean stop: nothing flushed, nothing closed); the folder stays."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait(30)
        return self.process.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass
class RunningBroker(ProcessGroupOwner):
    """A started broker; a context manager that stops it on exit."""

    name: str
    host: str
    port: int
    process: subprocess.Popen
    workdir: Path
    log_path: Path
    api_ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    remove_workdir: bool = False
    version: str = ""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the group we created with start_new_session
    except (ProcessLookupError, PermissionError):
        try:
            process.send_signal(sig)
        except ProcessLookupError:
            pass


def make_workdir(workdir: str | Path | None, prefix: str) -> tuple[Path, bool]:
    """(directory, whether we created it and should remove it)."""
    if workdir is not None:
        path = Path(workdir)
        path.mkdir(parents=True, exist_ok=True)
        return path, False
    return Path(tempfile.mkdtemp(prefix=f"tinystream-{prefix}-")), True


def _bootstrap_from_log(log_path: Path) -> tuple[str, int] | None:
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return None
    match = BOOTSTRAP_LINE.search(text)
    if not match:
        return None
    return match.group(1), int(match.group(2))


def start_broker_process(
    *,
    name: str,
    argv: Sequence[str] | str,
    workdir: Path,
    remove_workdir: bool,
    address: tuple[str, int] | None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    shell: bool = False,
    version: str = "",
) -> RunningBroker:
    """Spawn, wait for readiness, and return the running broker (or raise PeerStartError)."""
    log_path = workdir / "broker.log"
    full_env = dict(os.environ)
    full_env.update(env or {})
    with open(log_path, "ab") as log:
        process = subprocess.Popen(  # noqa: S603 - argv is built by the launchers or given by the user
            argv,
            cwd=workdir,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            shell=shell,
        )
    broker = RunningBroker(
        name=name,
        host=address[0] if address else "",
        port=address[1] if address else 0,
        process=process,
        workdir=workdir,
        log_path=log_path,
        remove_workdir=remove_workdir,
        version=version,
    )
    deadline = time.monotonic() + timeout
    try:
        while address is None:
            address = _bootstrap_from_log(log_path)
            if address is None:
                if not broker.alive() or time.monotonic() > deadline:
                    raise PeerStartError(
                        f"{name}: no 'bootstrap=HOST:PORT' line "
                        f"({'exited ' + str(process.returncode) if not broker.alive() else 'timed out'})\n"
                        f"{broker.log_tail()}"
                    )
                time.sleep(0.1)
        broker.host, broker.port = address
        result = wait_ready(broker.host, broker.port, timeout=max(1.0, deadline - time.monotonic()), alive=broker.alive)
        if not result.ready:
            state = f"exited with {process.returncode}" if not broker.alive() else f"not ready in {timeout:.0f}s"
            raise PeerStartError(f"{name} at {broker.bootstrap} {state} ({result.reason}); "
                                 f"log kept in {log_path}:\n{broker.log_tail()}")
        broker.api_ranges = result.api_ranges
        return broker
    except BaseException:
        remove, broker.remove_workdir = broker.remove_workdir, False
        broker.stop(timeout=5)
        broker.remove_workdir = remove
        raise
