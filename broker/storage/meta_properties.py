"""meta.properties: the cluster id and node id a log dir belongs to (as Kafka keeps it).

Written on first start into every log dir; read on every start. A log dir
that belongs to another node id, or log dirs that disagree about the cluster
id, stop the broker before it touches any data (Kafka refuses the same way:
"Stored node id 1 doesn't match previous node id 0").

Who decides the cluster id:

- a lone broker (`ensure`): the stored id, or a new one on first start;
- a broker under a controller (`read`, then `adopt` with the id from its
  registration reply): the controller's. A stored id that differs means the
  data belongs to another cluster: `InconsistentClusterIdError`, as Kafka's
  InconsistentClusterIdException, unless the log dirs hold no partition yet
  (fresh dirs, e.g. a dev cluster whose controller state was reset), which
  simply take the controller's id.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from tinystream.atomic_file import write_atomically

FILE_NAME = "meta.properties"


class MetaPropertiesError(RuntimeError):
    pass


class InconsistentClusterIdError(MetaPropertiesError):
    """The log dirs hold data of another cluster than the controller's (Kafka's InconsistentClusterIdException)."""


def new_cluster_id() -> str:
    """Kafka's format: a random UUID, URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _parse(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def _found(log_dirs: list[Path], node_id: int) -> tuple[dict[Path, dict[str, str]], str | None]:
    """The meta.properties present, checked, and the one cluster id they name (None: none stored)."""
    found: dict[Path, dict[str, str]] = {}
    for d in log_dirs:
        path = Path(d) / FILE_NAME
        if path.exists():
            found[d] = _parse(path.read_text())
    cluster_ids = {p.get("cluster.id") for p in found.values()}
    if len(cluster_ids) > 1:
        raise MetaPropertiesError(f"log dirs disagree about the cluster id: {sorted(map(str, cluster_ids))}")
    for d, props in found.items():
        stored = props.get("node.id")
        if stored is not None and stored != str(node_id):
            raise MetaPropertiesError(f"{d}/{FILE_NAME}: stored node.id {stored} does not match broker.id {node_id}")
    stored_id = next(iter(cluster_ids)) if cluster_ids and None not in cluster_ids else None
    return found, stored_id


def _write(path: Path, cluster_id: str, node_id: int) -> None:
    payload = f"#TinyStream broker metadata\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
    write_atomically(path, payload.encode(), parents=True)


def ensure(log_dirs: list[Path], node_id: int) -> str:
    """The cluster id these log dirs belong to; writes meta.properties where missing."""
    found, stored_id = _found(log_dirs, node_id)
    cluster_id = stored_id or new_cluster_id()
    for d in log_dirs:
        if d not in found:
            _write(Path(d) / FILE_NAME, cluster_id, node_id)
    return cluster_id


def read(log_dirs: list[Path], node_id: int) -> str | None:
    """The stored cluster id (None if none yet), checked like `ensure`; writes nothing."""
    return _found(log_dirs, node_id)[1]


def _fresh(log_dirs: list[Path]) -> bool:
    """No partition has been written yet (partition logs are the only subdirectories)."""
    return not any(p.is_dir() for d in log_dirs if Path(d).is_dir() for p in Path(d).iterdir())


def adopt(log_dirs: list[Path], node_id: int, cluster_id: str) -> None:
    """Make `cluster_id` (the controller's) the one in every meta.properties.

    Raises InconsistentClusterIdError when a different id is stored and the
    dirs already hold partitions: that data belongs to another cluster.
    """
    found, stored_id = _found(log_dirs, node_id)
    if stored_id is not None and stored_id != cluster_id and not _fresh(log_dirs):
        raise InconsistentClusterIdError(
            f"the controller's cluster id {cluster_id} does not match the stored cluster id {stored_id} in "
            f"{FILE_NAME} of {', '.join(str(d) for d in found)}: this broker's data belongs to another cluster "
            "(wrong controller.url, or a controller whose state was reset?); refusing to start"
        )
    for d in log_dirs:
        if found.get(d, {}).get("cluster.id") != cluster_id:
            _write(Path(d) / FILE_NAME, cluster_id, node_id)
