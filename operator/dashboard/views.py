"""The dashboard's views as pure functions of one `RawSnapshot` (no I/O, no clock).

The controller's image is the truth for placement (leader, replicas, ISR,
leader epoch, fencing); the brokers' admin APIs add what only a broker knows
(offsets, high watermark, size on disk, segments, retention, groups, byte
counters). Offsets of a partition come from its leader's reading, falling
back to the most advanced replica that answered when the leader did not.
Consumer lag is the leader's high watermark minus the committed offset, as
`kafka-consumer-groups --describe` reports it (consumers read up to the HW).

    overview(raw) -> {...}; brokers(raw) -> [...]; topics(raw) -> [...]; groups(raw) -> [...]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tinystream.operator.dashboard.sources import RawSnapshot

Row = dict[str, Any]


def _image_topics(raw: RawSnapshot) -> list[Mapping[str, Any]]:
    return list((raw.metadata or {}).get("topics", []))


def _image_brokers(raw: RawSnapshot) -> dict[int, Mapping[str, Any]]:
    return {b["broker_id"]: b for b in (raw.metadata or {}).get("brokers", [])}


def _readings_by_partition(raw: RawSnapshot) -> dict[tuple[str, int], dict[int, Mapping[str, Any]]]:
    out: dict[tuple[str, int], dict[int, Mapping[str, Any]]] = {}
    for b in raw.brokers:
        for p in b.partitions:
            out.setdefault((p["topic"], p["partition"]), {})[b.broker_id] = p
    return out


def _is_internal(name: str) -> bool:
    return name.startswith("__")


def topics(raw: RawSnapshot) -> list[Row]:
    readings = _readings_by_partition(raw)
    out: list[Row] = []
    for topic in sorted(_image_topics(raw), key=lambda t: (_is_internal(t["name"]), t["name"])):
        rows = []
        for p in sorted(topic.get("partitions", []), key=lambda p: p["partition"]):
            seen = readings.get((topic["name"], p["partition"]), {})
            source = p["leader"] if p["leader"] in seen else max(
                seen, key=lambda i: seen[i]["log_end_offset"], default=None)
            stats: Mapping[str, Any] = seen[source] if source is not None else {}
            offline = p["leader"] is None or p["leader"] < 0
            rows.append(
                {
                    "partition": p["partition"],
                    "leader": p["leader"],
                    "replicas": list(p["replicas"]),
                    "isr": list(p["isr"]),
                    "leader_epoch": p["leader_epoch"],
                    "offline": offline,
                    "under_replicated": not offline and len(p["isr"]) < len(p["replicas"]),
                    "log_start_offset": stats.get("log_start_offset"),
                    "log_end_offset": stats.get("log_end_offset"),
                    "high_watermark": stats.get("high_watermark"),
                    "size_bytes": stats.get("size_bytes"),
                    "segments": stats.get("segments"),
                    "retention_ms": stats.get("retention_ms"),
                    "retention_bytes": stats.get("retention_bytes"),
                    "stats_from": source,  # the broker whose reading gave the offsets
                }
            )
        config = dict(topic.get("config") or {})
        out.append(
            {
                "name": topic["name"],
                "topic_id": topic.get("topic_id"),
                "internal": _is_internal(topic["name"]),
                "config": config,
                "replication_factor": len(rows[0]["replicas"]) if rows else 0,
                "partitions": rows,
                "messages": sum(r["log_end_offset"] - r["log_start_offset"] for r in rows
                                if r["log_end_offset"] is not None and r["log_start_offset"] is not None),
                "size_bytes": sum(r["size_bytes"] or 0 for r in rows),
            }
        )
    return out


def _client_address(meta: Mapping[str, Any]) -> str:
    """Where clients reach a registered broker: its first listener other than the inter-broker one (the
    image's host and port), else that one."""
    inter = (meta["host"], meta["port"])
    others = [(e["host"], e["port"]) for e in meta.get("endpoints") or () if (e["host"], e["port"]) != inter]
    host, port = others[0] if others else inter
    return f"{host}:{port}"


def brokers(raw: RawSnapshot) -> list[Row]:
    image = _image_brokers(raw)
    led: dict[int, int] = {}
    hosted: dict[int, int] = {}
    for topic in _image_topics(raw):
        for p in topic.get("partitions", []):
            led[p["leader"]] = led.get(p["leader"], 0) + 1
            for r in p["replicas"]:
                hosted[r] = hosted.get(r, 0) + 1
    readings = {b.broker_id: b for b in raw.brokers}
    out = []
    for broker_id in sorted(set(image) | set(readings)):
        meta = image.get(broker_id, {})
        reading = readings.get(broker_id)
        totals = reading.totals if reading is not None else {}
        out.append(
            {
                "broker_id": broker_id,
                "address": _client_address(meta) if meta else (reading.info.get("listener") if reading else None),
                "rack": meta.get("rack") if meta else (reading.info.get("rack") if reading else None),
                "registered": bool(meta),
                "fenced": bool(meta.get("fenced", True)) if meta else None,
                "drained": bool(meta.get("drained", False)) if meta else None,
                "epoch": meta.get("epoch"),
                "admin_url": reading.admin_url if reading else None,
                # Reachable admin API; without an admin URL, registered and unfenced is the best we know.
                "up": (bool(reading.up) if reading is not None and reading.admin_url
                       else bool(meta) and not meta.get("fenced", True)),
                "error": reading.error if reading else None,
                "partitions": hosted.get(broker_id, 0),
                "partitions_led": led.get(broker_id, 0),
                "bytes_in": totals.get("bytes_in"),
                "bytes_out": totals.get("bytes_out"),
                "records_in": totals.get("records_in"),
                "requests": totals.get("requests"),
            }
        )
    return out


def groups(raw: RawSnapshot, topic_rows: list[Row] | None = None) -> list[Row]:
    topic_rows = topics(raw) if topic_rows is None else topic_rows
    hw = {(t["name"], p["partition"]): p["high_watermark"] for t in topic_rows for p in t["partitions"]}
    merged: dict[str, Row] = {}
    for b in raw.brokers:
        for g in b.groups:
            merged.setdefault(g["group_id"], dict(g))  # one coordinator per group; a stale second is ignored
    out = []
    for group_id in sorted(merged):
        g = merged[group_id]
        offsets = []
        for o in g.get("offsets", []):
            end = hw.get((o["topic"], o["partition"]))
            end = o.get("end_offset") if end is None else end
            lag = max(end - o["committed"], 0) if end is not None and o["committed"] >= 0 else None
            offsets.append({**o, "end_offset": end, "lag": lag})
        out.append(
            {
                "group_id": group_id,
                "state": g.get("state"),
                "protocol_type": g.get("protocol_type"),
                "protocol": g.get("protocol"),
                "coordinator": g.get("coordinator"),
                "members": g.get("members", []),
                "offsets": offsets,
                "total_lag": sum(o["lag"] for o in offsets if o["lag"] is not None),
                "activity": g.get("activity"),  # the coordinator's counters and recent rebalances
            }
        )
    return out


def overview(raw: RawSnapshot, *, broker_rows: list[Row] | None = None, topic_rows: list[Row] | None = None,
             group_rows: list[Row] | None = None) -> Row:
    broker_rows = brokers(raw) if broker_rows is None else broker_rows
    topic_rows = topics(raw) if topic_rows is None else topic_rows
    group_rows = groups(raw, topic_rows) if group_rows is None else group_rows
    parts = [p for t in topic_rows for p in t["partitions"]]
    meta = raw.metadata or {}
    return {
        "taken_at": raw.taken_at,
        "cluster_id": meta.get("cluster_id"),
        "metadata_version": meta.get("version"),
        "controller": {"url": raw.controller_url, "up": raw.controller_up, "error": raw.controller_error},
        "brokers": {
            "total": len(broker_rows),
            "registered": sum(b["registered"] for b in broker_rows),
            "up": sum(b["up"] for b in broker_rows),
            "fenced": sum(bool(b["fenced"]) for b in broker_rows),
            "down": [b["broker_id"] for b in broker_rows if not b["up"]],
        },
        "topics": sum(not t["internal"] for t in topic_rows),
        "internal_topics": sum(t["internal"] for t in topic_rows),
        "partitions": len(parts),
        "offline_partitions": sum(p["offline"] for p in parts),
        "under_replicated_partitions": sum(p["under_replicated"] for p in parts),
        "groups": len(group_rows),
        "total_lag": sum(g["total_lag"] for g in group_rows),
    }
