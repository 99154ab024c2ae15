"""meta.properties: the cluster id and node id a log dir belongs to (as Kafka keeps it).

Written on first start into every log dir; read on every start. A log dir
that belongs to another node id, or log dirs that disagree about the cluster
id, stop the broker before it touches any data (Kafka refuses the same way:
"Stored node id 1 doesn't match previous node id 0").
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from tinystream.broker.atomic_file import write_atomically

FILE_NAME = "meta.properties"


class MetaPropertiesError(RuntimeError):
    pass


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


def ensure(log_dirs: list[Path], node_id: int) -> str:
    """The cluster id these log dirs belong to; writes meta.properties where missing."""
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
    cluster_id = next(iter(cluster_ids)) if cluster_ids and None not in cluster_ids else new_cluster_id()
    for d in log_dirs:
        if d not in found:
            payload = f"#TinyStream broker metadata\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
            write_atomically(Path(d) / FILE_NAME, payload.encode())
    return cluster_id
