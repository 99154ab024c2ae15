"""The local cluster's dashboard: one page over the controller's image and each broker's admin API.

Served by the `tinystream dev` supervisor itself (stdlib HTTP server in a
thread), so it keeps answering while brokers or the controller are down and
shows them as down. It owns no state: every request reads the controller's
`GET /v1/metadata` and each broker's `GET /api/broker` afresh.

    GET /            HTML: brokers (up/fenced), topics, partitions (leader, replicas, ISR)
    GET /api/cluster JSON: {"controller": {...}, "metadata": image | null, "brokers": [...]}
"""

from __future__ import annotations

import html
import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinystream.local_cluster import LocalCluster

FETCH_TIMEOUT_S = 1.0


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310 - 127.0.0.1 URLs we started
        return json.loads(response.read())


def cluster_snapshot(cluster: LocalCluster) -> dict[str, Any]:
    snapshot: dict[str, Any] = {"controller": {"url": cluster.controller.url, "pid": cluster.controller.pid,
                                               "running": cluster.controller.running},
                                "metadata": None, "brokers": []}
    try:
        snapshot["metadata"] = _get_json(f"{cluster.controller.url}/v1/metadata")
    except (OSError, ValueError) as exc:
        snapshot["controller"]["error"] = str(exc)
    for b in cluster.brokers:
        row: dict[str, Any] = {"broker_id": b.broker_id, "bootstrap": b.bootstrap, "admin_url": b.admin_url,
                               "pid": b.pid, "running": b.running, "paused": b.paused}
        try:
            row["api"] = _get_json(f"{b.admin_url}/api/broker")
        except (OSError, ValueError) as exc:
            row["error"] = str(exc)
        snapshot["brokers"].append(row)
    return snapshot


def render(snapshot: dict[str, Any]) -> str:
    esc = html.escape
    meta = snapshot["metadata"] or {}
    fenced = {b["broker_id"]: b.get("fenced") for b in meta.get("brokers", [])}
    rows = []
    for b in snapshot["brokers"]:
        state = "paused" if b["paused"] else ("up" if b["running"] and "error" not in b else "down")
        rows.append(f"<tr><td>{b['broker_id']}</td><td>{esc(str(b['bootstrap']))}</td><td>{state}</td>"
                    f"<td>{esc(str(fenced.get(b['broker_id'], '?')))}</td>"
                    f"<td><a href='{esc(str(b['admin_url']))}/metrics'>metrics</a></td></tr>")
    parts = []
    for topic in meta.get("topics", []):
        for p in topic.get("partitions", []):
            under = " style='color:#b00'" if sorted(p["isr"]) != sorted(p["replicas"]) else ""
            parts.append(f"<tr{under}><td>{esc(topic['name'])}</td><td>{p['partition']}</td><td>{p['leader']}</td>"
                         f"<td>{p['replicas']}</td><td>{p['isr']}</td><td>{p['leader_epoch']}</td></tr>")
    controller = snapshot["controller"]
    return (
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=2><title>TinyStream</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 10px;text-align:left}</style>"
        f"<h1>TinyStream local cluster</h1><p>controller {esc(str(controller['url']))} "
        f"{'up' if 'error' not in controller else 'down: ' + esc(controller['error'])}; "
        f"metadata version {meta.get('version', '?')}</p>"
        "<h2>Brokers</h2><table><tr><th>id<th>address<th>process<th>fenced<th></tr>" + "".join(rows) + "</table>"
        "<h2>Partitions</h2><table><tr><th>topic<th>partition<th>leader<th>replicas<th>ISR<th>epoch</tr>"
        + "".join(parts) + "</table>"
    )


class Dashboard:
    """The HTTP server in a daemon thread; `start` returns its URL."""

    def __init__(self, cluster: LocalCluster, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster = cluster
        self.host = host
        self.port = port
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        cluster = self.cluster

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/api/cluster":
                    body, kind = json.dumps(cluster_snapshot(cluster)).encode(), "application/json"
                elif self.path in ("/", "/index.html"):
                    body, kind = render(cluster_snapshot(cluster)).encode(), "text/html; charset=utf-8"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True, name="dashboard").start()
        return f"http://{self.host}:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
