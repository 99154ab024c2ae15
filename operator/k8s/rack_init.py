"""The broker pod's `rack` init container: `python -m tinystream.operator.k8s.rack_init`.

Reads the pod's node (NODE_NAME, the downward API's spec.nodeName) from the API server with the token and
CA in --credentials (rack.py mounts them in this container only), and writes the node's --topology-key
label to --out, which the broker reads as broker.rack.file (Strimzi's init container writes rack.id so).

Exit codes: 0 with the rack written; 0 with an empty file and a warning when the node has no such label
(the broker starts without a rack; the operator reports it too); 2 on bad arguments; 1 when the node
cannot be read (no RBAC binding yet, API down): the kubelet restarts the init container with back-off,
so the broker never starts with a rack that was merely unreadable.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tinystream.atomic_file import write_atomically
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.errors import KubeApiError
from tinystream.operator.k8s.rack import node_rack, rack_file_text

log = logging.getLogger("tinystream.rack")


@dataclass(frozen=True, slots=True)
class Request:
    node: str
    topology_key: str
    out: Path
    server: str
    token: str
    ca_file: Path | None  # None: the server's certificate is not checked (--insecure, tests only)


def parse(argv: Sequence[str], environ: Mapping[str, str]) -> Request:
    """The arguments, defaulted from the pod's environment; SystemExit(2) with a message when one is missing."""
    parser = argparse.ArgumentParser(prog="python -m tinystream.operator.k8s.rack_init",
                                     description="write this pod's node label (its rack) to a file")
    parser.add_argument("--topology-key", required=True, help="the node label that names the rack")
    parser.add_argument("--out", required=True, type=Path, help="the file the broker reads as broker.rack.file")
    parser.add_argument("--credentials", type=Path, help="a folder with `token` and `ca.crt` for the API server")
    parser.add_argument("--node", default=environ.get("NODE_NAME"), help="the node (default: $NODE_NAME)")
    parser.add_argument("--server", help="the API server's URL (default: $KUBERNETES_SERVICE_HOST/PORT)")
    parser.add_argument("--insecure", action="store_true", help="do not check the server's certificate")
    args = parser.parse_args(argv)
    if not args.node:
        parser.error("no node: set NODE_NAME from the downward API (fieldPath spec.nodeName) or pass --node")
    server = args.server or _in_cluster_server(environ)
    if not server:
        parser.error("no API server: KUBERNETES_SERVICE_HOST is unset; pass --server")
    if args.credentials is None or not (args.credentials / "token").is_file():
        parser.error(f"no service-account token in {args.credentials}/token")
    ca = args.credentials / "ca.crt"
    return Request(node=args.node, topology_key=args.topology_key, out=args.out, server=server,
                   token=(args.credentials / "token").read_text().strip(),
                   ca_file=None if args.insecure else ca)


def _in_cluster_server(environ: Mapping[str, str]) -> str | None:
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


async def read_rack(request: Request) -> str | None:
    """The node's rack label; raises KubeApiError when the node cannot be read (NotFound included)."""
    ctx: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(request.ca_file)) if request.ca_file else False
    client = KubeClient(request.server, headers={"Authorization": f"Bearer {request.token}"}, ssl_context=ctx)
    try:
        node = await client.get("v1", "Node", request.node)
    finally:
        await client.close()
    if node is None:
        raise KubeApiError(404, "NotFound", f"node {request.node} does not exist")
    return node_rack(node, request.topology_key)


def write_rack(out: Path, rack: str | None) -> None:
    """Write atomically: the broker never reads half a file."""
    write_atomically(out, rack_file_text(rack).encode(), durable=False, parents=True)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    request = parse(sys.argv[1:] if argv is None else argv, os.environ if environ is None else environ)
    try:
        rack = asyncio.run(read_rack(request))
    except KubeApiError as exc:
        log.error("cannot read node %s (needs `get nodes`: the cluster's ClusterRoleBinding): %s", request.node, exc)
        return 1
    write_rack(request.out, rack)
    if rack is None:
        log.warning("node %s has no label %s: this broker starts without broker.rack", request.node,
                    request.topology_key)
    else:
        log.info("node %s: %s=%s; broker.rack is %s", request.node, request.topology_key, rack, rack)
    return 0


if __name__ == "__main__":
    sys.exit(main())
