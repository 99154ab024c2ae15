"""The OpenAPI 3.1 description of the dashboard's JSON API (served at /api/openapi.json).

Schemas are written to match views.py row for row; tests validate live
responses against them (jsonschema), so a field added to a view without
its schema fails there.
"""

from __future__ import annotations

from typing import Any

_INT = {"type": "integer"}
_NINT = {"type": ["integer", "null"]}
_NUM = {"type": ["number", "null"]}
_STR = {"type": "string"}
_NSTR = {"type": ["string", "null"]}
_BOOL = {"type": "boolean"}
_INTS = {"type": "array", "items": _INT}


def _object(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": {**required, **optional}}


SCHEMAS: dict[str, Any] = {
    "Overview": _object({
        "taken_at": {"type": "number"},
        "cluster_id": _NSTR,
        "metadata_version": _NINT,
        "controller": _object({"url": _NSTR, "up": _BOOL, "error": _NSTR}),
        "brokers": _object({"total": _INT, "registered": _INT, "up": _INT, "fenced": _INT, "down": _INTS}),
        "topics": _INT, "internal_topics": _INT, "partitions": _INT,
        "offline_partitions": _INT, "under_replicated_partitions": _INT,
        "groups": _INT, "total_lag": _INT,
    }),
    "Broker": _object({
        "broker_id": _INT, "address": _NSTR, "rack": _NSTR, "registered": _BOOL,
        "fenced": {"type": ["boolean", "null"]}, "drained": {"type": ["boolean", "null"]}, "epoch": _NINT,
        "admin_url": _NSTR, "up": _BOOL, "error": _NSTR, "partitions": _INT, "partitions_led": _INT,
        "bytes_in": _NUM, "bytes_out": _NUM, "records_in": _NUM, "requests": _NUM,
    }),
    "Partition": _object({
        "partition": _INT, "leader": _NINT, "replicas": _INTS, "isr": _INTS, "leader_epoch": _INT,
        "offline": _BOOL, "under_replicated": _BOOL,
        "log_start_offset": _NINT, "log_end_offset": _NINT, "high_watermark": _NINT,
        "size_bytes": _NINT, "segments": _NINT, "retention_ms": _NINT, "retention_bytes": _NINT,
        "stats_from": _NINT,
    }),
    "Topic": _object({
        "name": _STR, "topic_id": _NSTR, "internal": _BOOL,
        "config": {"type": "object", "additionalProperties": _STR},
        "replication_factor": _INT, "messages": _INT, "size_bytes": _INT,
        "partitions": {"type": "array", "items": {"$ref": "#/components/schemas/Partition"}},
    }),
    "GroupOffset": _object({
        "topic": _STR, "partition": _INT, "committed": _INT, "end_offset": _NINT, "lag": _NINT,
        "member_id": _NSTR,
    }),
    "GroupMember": _object({
        "member_id": _STR, "group_instance_id": _NSTR, "client_id": _STR, "client_host": _STR,
        "assignment": {"type": "array", "items": _object({"topic": _STR, "partitions": _INTS})},
    }),
    "GroupActivity": _object({
        "joins": _INT, "leaves": _INT, "expirations": _INT, "commits": _INT, "records_committed": _INT,
        "rebalances": {"type": "object", "additionalProperties": _INT},
        "rebalance_history": {"type": "array", "items": _object({"at_ms": _INT, "cause": _STR, "generation": _INT})},
    }),
    "Group": _object({
        "group_id": _STR, "state": _STR, "protocol_type": _NSTR, "protocol": _NSTR, "coordinator": _NINT,
        "members": {"type": "array", "items": {"$ref": "#/components/schemas/GroupMember"}},
        "offsets": {"type": "array", "items": {"$ref": "#/components/schemas/GroupOffset"}},
        "total_lag": _INT,
        "activity": {"oneOf": [{"$ref": "#/components/schemas/GroupActivity"}, {"type": "null"}]},
    }),
    "ThroughputPoint": _object({"at": {"type": "number"}, "bytes_in": {"type": "number"},
                                "bytes_out": {"type": "number"}, "records_in": {"type": "number"}}),
    "Throughput": _object({
        "interval_s": {"type": "number"},
        "totals": _object({"bytes_in": {"type": "number"}, "bytes_out": {"type": "number"},
                           "records_in": {"type": "number"}}),
        "points": {"type": "array", "items": {"$ref": "#/components/schemas/ThroughputPoint"}},
    }),
}

#: path -> (summary, response schema)
PATHS: dict[str, tuple[str, dict[str, Any]]] = {
    "/api/overview": ("Cluster overview: brokers up / fenced, controller, offline and under-replicated partitions",
                      {"$ref": "#/components/schemas/Overview"}),
    "/api/brokers": ("Brokers: address, rack, partitions led, bytes in / out",
                     _object({"brokers": {"type": "array", "items": {"$ref": "#/components/schemas/Broker"}}})),
    "/api/topics": ("Topics and partitions: leader, replicas, ISR, epoch, offsets, HW, size, retention",
                    _object({"topics": {"type": "array", "items": {"$ref": "#/components/schemas/Topic"}}})),
    "/api/groups": ("Consumer groups: state, members, assignment, committed offset and lag per partition, "
                    "joins, leaves, commits and rebalances over time",
                    _object({"groups": {"type": "array", "items": {"$ref": "#/components/schemas/Group"}}})),
    "/api/throughput": ("Cluster throughput over time (per second, from the brokers' counters)",
                        {"$ref": "#/components/schemas/Throughput"}),
}


def openapi_document() -> dict[str, Any]:
    paths = {
        path: {"get": {"summary": summary, "operationId": path.rsplit("/", 1)[-1],
                       "responses": {"200": {"description": summary,
                                             "content": {"application/json": {"schema": schema}}}}}}
        for path, (summary, schema) in PATHS.items()
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "TinyStream dashboard API", "version": "1",
                 "description": "Read-only JSON twins of the dashboard's views."},
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }
