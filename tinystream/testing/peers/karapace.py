"""Karapace (Aiven's schema registry, Python) as a child process: a peer for our registry.

    start_karapace(bootstrap) -> RunningRegistry   (.url, .stop(); a context manager)

Karapace keeps its schemas in a Kafka topic, like ours, so the same cluster
(our broker or Apache Kafka) serves both and "the same requests give the same
answers" can be checked side by side. It is found as `$TINYSTREAM_KARAPACE`
(a command, split like a shell line) or `karapace` on PATH, and run as
`<command> <config.json>`. Its 3.x line is not on PyPI, so the project's files
cannot install it: where it is missing, `PeerUnavailable` says so and the
tests skip. Each start gets its own topic and group id unless given, so
several instances never elect each other.

Ready means `GET /_health` answers `schema_registry_ready: true` (its reader
has caught up with the topic), the same point at which ours starts serving.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

from tinystream.testing.peers.errors import PeerStartError, PeerUnavailable
from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.process import ProcessGroupOwner, make_workdir

COMMAND_ENV = "TINYSTREAM_KARAPACE"
MISSING = (f"Karapace is not installed (its 3.x releases are not on PyPI): put `karapace` on PATH or set "
           f"{COMMAND_ENV} to the command that runs it with a config file")


def karapace_argv() -> list[str]:
    """The command that runs Karapace, from the environment or PATH; PeerUnavailable if neither has it."""
    given = os.environ.get(COMMAND_ENV, "").strip()
    if given:
        return shlex.split(given)
    found = shutil.which("karapace")
    if found is None:
        raise PeerUnavailable(MISSING)
    return [found]


def karapace_config(bootstrap: str, port: int, topic: str, group: str, compatibility: str) -> dict[str, object]:
    """Karapace's config (its JSON file): the registry alone (no REST proxy), on loopback, one replica."""
    return {
        "bootstrap_uri": bootstrap,
        "host": "127.0.0.1",
        "port": port,
        "advertised_hostname": "127.0.0.1",
        "karapace_registry": True,
        "karapace_rest": False,
        "topic_name": topic,
        "group_id": group,
        "client_id": group,
        "replication_factor": 1,
        "compatibility": compatibility,
        "master_eligibility": True,
        "log_level": "INFO",
    }


@dataclass
class RunningRegistry(ProcessGroupOwner):
    """A started Karapace; stops its process group on exit."""

    url: str
    topic: str
    process: subprocess.Popen
    workdir: Path
    log_path: Path
    remove_workdir: bool


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_health", timeout=2) as answer:  # noqa: S310 - our own loopback URL
            return bool(json.loads(answer.read()).get("schema_registry_ready"))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def start_karapace(
    bootstrap: str,
    *,
    topic: str | None = None,
    group: str | None = None,
    compatibility: str = "BACKWARD",
    workdir: str | Path | None = None,
    timeout: float = 90.0,
) -> RunningRegistry:
    """Start Karapace on `bootstrap`, wait until it has read its topic; PeerStartError with its log if it does not."""
    argv = karapace_argv()
    directory, created = make_workdir(workdir, "karapace")
    tag = uuid.uuid4().hex[:8]
    port = free_port()
    topic = topic or f"_schemas_karapace_{tag}"
    config_path = directory / "karapace.json"
    config = karapace_config(bootstrap, port, topic, group or f"karapace-{tag}", compatibility)
    config_path.write_text(json.dumps(config, indent=2))
    log_path = directory / "karapace.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(  # noqa: S603 - the command comes from the user's environment
            [*argv, str(config_path)], cwd=directory, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
    running = RunningRegistry(f"http://127.0.0.1:{port}", topic, process, directory, log_path, created)
    deadline = time.monotonic() + timeout
    while not _ready(running.url):
        if not running.alive() or time.monotonic() > deadline:
            tail = running.log_tail(30)
            running.remove_workdir = False  # keep the log for a look
            running.stop()
            raise PeerStartError(f"Karapace did not become ready on {bootstrap} (log {log_path}):\n{tail}")
        time.sleep(0.25)
    return running
