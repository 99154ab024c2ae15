"""The OpenAPI 3.1 description of the controller API, served at /v1/openapi.json.

Request schemas are generated from the request dataclasses (request_bodies.py),
the very types the handlers decode with, so the document cannot drift from
what the service accepts; replies are described by hand, once, below.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

from tinystream.operator.controller import SCHEMA_VERSION
from tinystream.operator.service import request_bodies as rq

API_VERSION = "1.0.0"

_ERROR = {"$ref": "#/components/schemas/Error"}


def _schema(hint: Any) -> dict[str, Any]:
    """JSON Schema for a type hint of the plain-dict codec."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        options = [_schema(a) for a in args]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        if type(None) in typing.get_args(hint):
            return {"anyOf": [schema, {"type": "null"}]}
        return schema
    if origin is tuple:
        return {"type": "array", "items": _schema(typing.get_args(hint)[0])}
    if origin in (dict, Mapping):
        return {"type": "object", "additionalProperties": _schema(typing.get_args(hint)[1])}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"type": "string", "enum": [m.value for m in hint]}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _object(hint)
    simple = {int: "integer", str: "string", bool: "boolean", float: "number"}
    return {"type": simple[hint]}


def _object(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    required = [
        f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f.name: _schema(hints[f.name]) for f in fields},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def _ints(*names: str) -> dict[str, Any]:
    return {name: {"type": "integer"} for name in names}


_PARTITION = {
    "type": "object",
    "properties": {
        **_ints("partition", "leader", "leader_epoch", "partition_epoch"),
        "replicas": {"type": "array", "items": {"type": "integer"}},
        "isr": {"type": "array", "items": {"type": "integer"}},
        "adding_replicas": {"type": "array", "items": {"type": "integer"}},
        "removing_replicas": {"type": "array", "items": {"type": "integer"}},
        "leader_recovery_state": {"type": "string", "enum": ["RECOVERED", "RECOVERING"]},
    },
}
_TOPIC = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "topic_id": {"type": "string"},
        "config": {"type": "object"},
        "partitions": {"type": "array", "items": {"$ref": "#/components/schemas/Partition"}},
    },
}
_BROKER = {
    "type": "object",
    "properties": {
        **_ints("broker_id", "port", "epoch"),
        "host": {"type": "string"},
        "rack": {"type": ["string", "null"]},
        "incarnation_id": {"type": "string"},
        "fenced": {"type": "boolean"},
        "drained": {"type": "boolean"},
        "endpoints": {"type": "array", "items": {
            "type": "object",
            "properties": {**_ints("port"), "name": {"type": "string"}, "host": {"type": "string"},
                           "security_protocol": {"type": "string"}},
        }},
    },
}
_ADMIN_COMMON = {
    "metadata_version": {"type": "integer"},
    "validate_only": {"type": "boolean"},
    "actions": {"type": "array", "items": {"type": "object"}, "description": "what changed (core actions)"},
}

_REPLIES: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "required": ["error", "code", "message"],
        "properties": {
            "error": {"type": "string", "description": "Kafka error name, e.g. STALE_BROKER_EPOCH"},
            "code": {"type": "integer", "description": "Kafka error code"},
            "message": {"type": "string"},
        },
    },
    "Partition": _PARTITION,
    "Topic": _TOPIC,
    "Broker": _BROKER,
    "Image": {
        "type": "object",
        "description": f"the metadata image (schema_version {SCHEMA_VERSION})",
        "properties": {
            **_ints("schema_version", "version"),
            "cluster_id": {"type": "string"},
            "brokers": {"type": "array", "items": {"$ref": "#/components/schemas/Broker"}},
            "topics": {"type": "array", "items": {"$ref": "#/components/schemas/Topic"}},
        },
    },
    "Unchanged": {
        "type": "object",
        "properties": {"version": {"type": "integer"}, "unchanged": {"const": True}},
    },
    "RegisterReply": {
        "type": "object",
        "properties": {
            **_ints("broker_id", "broker_epoch", "metadata_version", "session_timeout_ms"),
            "fenced": {"type": "boolean"},
            "cluster_id": {"type": "string"},
        },
    },
    "HeartbeatReply": {
        "type": "object",
        "properties": {
            **_ints("broker_id", "metadata_version", "session_timeout_ms"),
            "fenced": {"type": "boolean"},
            "newer_image_available": {"type": "boolean"},
        },
    },
    "ProducerIdsReply": {
        "type": "object",
        "description": "producer ids [producer_id_start, producer_id_start + producer_id_len) (KIP-730)",
        "properties": _ints("broker_id", "producer_id_start", "producer_id_len"),
    },
    "PartitionReply": {
        "allOf": [
            {"$ref": "#/components/schemas/Partition"},
            {"type": "object", "properties": {"topic": {"type": "string"}, "metadata_version": {"type": "integer"}}},
        ]
    },
    "TopicReply": {
        "type": "object",
        "properties": {"topic": {"$ref": "#/components/schemas/Topic"}, **_ADMIN_COMMON},
    },
    "DeleteTopicReply": {"type": "object", "properties": {"name": {"type": "string"}, **_ADMIN_COMMON}},
    "BrokerChangeReply": {
        "type": "object",
        "properties": {
            "broker": {"anyOf": [{"$ref": "#/components/schemas/Broker"}, {"type": "null"}]},
            "leaderships": {"type": "array", "items": {"type": "object"}, "description": "partitions it still leads"},
            **_ADMIN_COMMON,
        },
    },
    "ElectionReply": {
        "type": "object",
        "properties": {"leaders_changed": {"type": "array", "items": {"type": "object"}}, **_ADMIN_COMMON},
    },
    "ReassignReply": {
        "type": "object",
        "properties": {
            "partitions": {"type": "array", "items": {"$ref": "#/components/schemas/PartitionReply"}},
            **_ADMIN_COMMON,
        },
    },
    "AdminReply": {"type": "object", "properties": {**_ADMIN_COMMON}},
    "RebalanceProposalReply": {
        "type": "object",
        "properties": {"proposal": {"type": "object", "description": "moves, num_replica_movements, "
                                    "num_leader_movements, data_to_move_bytes, score_before/after (lower is "
                                    "better), goals and broker loads before/after"},
                       "sizes_measured": {"type": "integer"}, "metadata_version": {"type": "integer"}},
    },
    "RebalanceProgressReply": {
        "type": "object",
        "properties": {"remaining": {"type": "array", "items": {"type": "object"}},
                       "done": {"type": "boolean"}, "cancelled": {"type": "array", "items": {"type": "object"}},
                       "throttled_topics": {"type": "array", "items": {"type": "string"}},
                       "unthrottled_topics": {"type": "array", "items": {"type": "string"}},
                       "rate_brokers": {"type": "array", "items": {"type": "integer"}},
                       "metadata_version": {"type": "integer"}},
    },
    "AclDeleteReply": {
        "type": "object",
        "properties": {"matched": {"type": "array", "items": {"type": "array", "items": {"type": "object"}},
                                   "description": "per filter, the ACLs it removed"}, **_ADMIN_COMMON},
    },
    "Health": {"type": "object", "properties": {"status": {"const": "ok"}, "cluster_id": {"type": "string"},
                                                "metadata_version": {"type": "integer"}}},
    "State": {"type": "object", "properties": {"now_ms": {"type": "integer"}, "state": {"type": "object"}}},
}

_REQUESTS = {
    "RegisterRequest": rq.RegisterRequest,
    "HeartbeatRequest": rq.HeartbeatRequest,
    "AlterPartitionRequest": rq.AlterPartitionRequest,
    "AllocateProducerIdsRequest": rq.AllocateProducerIdsRequest,
    "CreateTopicRequest": rq.CreateTopicRequest,
    "CreatePartitionsRequest": rq.CreatePartitionsRequest,
    "AlterConfigRequest": rq.AlterConfigRequest,
    "ElectLeadersRequest": rq.ElectLeadersRequest,
    "ReassignRequest": rq.ReassignRequest,
    "RebalanceProposalRequest": rq.RebalanceProposalRequest,
    "RebalanceMovesRequest": rq.RebalanceMovesRequest,
    "CreateAclsRequest": rq.CreateAclsRequest,
    "DeleteAclsRequest": rq.DeleteAclsRequest,
    "AlterScramRequest": rq.AlterScramRequest,
    "AlterClientQuotasRequest": rq.AlterClientQuotasRequest,
    "AlterBrokerConfigsRequest": rq.AlterBrokerConfigsRequest,
}

_BROKER_ID = {"name": "broker_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}
_TOPIC_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}

# (method, path, summary, request schema name, (status, reply schema name), error statuses, parameters)
_ENDPOINTS: list[tuple[str, str, str, str | None, tuple[int, str], tuple[int, ...], list[dict[str, Any]]]] = [
    ("get", "/healthz", "Liveness and the current metadata version", None, (200, "Health"), (), []),
    ("get", "/v1/openapi.json", "This document", None, (200, "OpenApi"), (), []),
    ("get", "/v1/state", "The whole controller state (debugging)", None, (200, "State"), (), []),
    (
        "get", "/v1/metadata",
        "The metadata image; with `since`, only if newer, waiting up to `wait_ms` (long poll)",
        None, (200, "Image"), (400,),
        [
            {"name": "since", "in": "query", "schema": {"type": "integer", "minimum": -1},
             "description": "the version the caller has; the reply is {version, unchanged: true} if still current"},
            {"name": "wait_ms", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 30000},
             "description": "with since: wait this long for a newer image (capped at 30000)"},
        ],
    ),
    ("post", "/v1/brokers/register", "BrokerRegistration (KIP-631): the broker starts fenced",
     "RegisterRequest", (200, "RegisterReply"), (400,), []),
    ("post", "/v1/brokers/{broker_id}/heartbeat",
     "BrokerHeartbeat: renews the session; unfences once the broker has applied its registration",
     "HeartbeatRequest", (200, "HeartbeatReply"), (400, 404, 409), [_BROKER_ID]),
    ("post", "/v1/brokers/{broker_id}/drain", "Controlled shutdown (KIP-841): move leaderships away, keep it drained",
     None, (200, "BrokerChangeReply"), (400, 404), [_BROKER_ID]),
    ("post", "/v1/brokers/{broker_id}/undrain", "Undo a drain", None, (200, "BrokerChangeReply"), (400, 404),
     [_BROKER_ID]),
    ("delete", "/v1/brokers/{broker_id}", "UnregisterBroker (scale-down)", None, (200, "BrokerChangeReply"),
     (400, 404), [_BROKER_ID]),
    ("post", "/v1/partitions/alter", "AlterPartition (KIP-497) from the partition leader",
     "AlterPartitionRequest", (200, "PartitionReply"), (400, 404, 409, 503), []),
    ("post", "/v1/producer-ids", "AllocateProducerIds (KIP-730): the next block of producer ids for a broker",
     "AllocateProducerIdsRequest", (200, "ProducerIdsReply"), (400, 404, 409, 503), []),
    ("post", "/v1/topics", "CreateTopics (201; 200 with validate_only)", "CreateTopicRequest",
     (201, "TopicReply"), (400, 409), []),
    ("get", "/v1/topics/{name}", "One topic", None, (200, "TopicReply"), (404,), [_TOPIC_NAME]),
    ("delete", "/v1/topics/{name}", "DeleteTopics", None, (200, "DeleteTopicReply"), (403, 404), [_TOPIC_NAME]),
    ("post", "/v1/topics/{name}/partitions", "CreatePartitions: grow to `count` partitions",
     "CreatePartitionsRequest", (200, "TopicReply"), (400, 404), [_TOPIC_NAME]),
    ("patch", "/v1/topics/{name}/config", "IncrementalAlterConfigs (or, with replace, AlterConfigs)",
     "AlterConfigRequest", (200, "TopicReply"), (400, 404), [_TOPIC_NAME]),
    ("post", "/v1/elections/preferred", "ElectLeaders(PREFERRED) for some or all partitions",
     "ElectLeadersRequest", (200, "ElectionReply"), (400, 404), []),
    ("post", "/v1/reassignments", "AlterPartitionReassignments (KIP-455); replicas null cancels",
     "ReassignRequest", (200, "ReassignReply"), (400, 404, 409), []),
    ("post", "/v1/rebalance/proposal", "A rebalance proposal (modes full, add-brokers, remove-brokers); admin only",
     "RebalanceProposalRequest", (200, "RebalanceProposalReply"), (400,), []),
    ("post", "/v1/rebalance/execute", "Start a reviewed proposal's moves, optionally with throttled replicas and broker rates",
     "RebalanceMovesRequest", (200, "RebalanceProgressReply"), (400, 404, 409), []),
    ("post", "/v1/rebalance/verify", "What is left of the moves; when done, throttles go, preferred leaders elected",
     "RebalanceMovesRequest", (200, "RebalanceProgressReply"), (400,), []),
    ("post", "/v1/rebalance/stop", "Cancel the moves still running and take their throttles out",
     "RebalanceMovesRequest", (200, "RebalanceProgressReply"), (400, 409), []),
    ("post", "/v1/acls", "CreateAcls: add ACLs to the image (a broker forwards its clients' request)",
     "CreateAclsRequest", (200, "AdminReply"), (400,), []),
    ("post", "/v1/acls/delete", "DeleteAcls: remove the ACLs each filter matches", "DeleteAclsRequest",
     (200, "AclDeleteReply"), (400,), []),
    ("post", "/v1/scram-credentials", "AlterUserScramCredentials: salted credentials only, never passwords",
     "AlterScramRequest", (200, "AdminReply"), (400, 404), []),
    ("post", "/v1/client-quotas", "AlterClientQuotas (KIP-546): set or remove quotas of user / client-id entities",
     "AlterClientQuotasRequest", (200, "AdminReply"), (400,), []),
    ("post", "/v1/broker-configs", "IncrementalAlterConfigs on BROKER resources: the cluster default (\"\") or "
     "one broker's dynamic configs", "AlterBrokerConfigsRequest", (200, "AdminReply"), (400,), []),
]

_PUBLIC = ("/healthz", "/v1/openapi.json")
_STATUS_TEXT = {400: "bad request", 401: "no token, or one this cluster's secret did not make",
                403: "forbidden by policy, or for this principal", 404: "unknown broker, topic or partition",
                409: "stale epoch or conflicting state", 503: "retry later"}


@functools.cache
def _document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, request, (status, reply_name), errors, params in _ENDPOINTS:
        op: dict[str, Any] = {"summary": summary, "responses": {}}
        if params:
            op["parameters"] = params
        if request is not None:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{request}"}}},
            }
        content = {"type": "object"} if reply_name == "OpenApi" else {"$ref": f"#/components/schemas/{reply_name}"}
        if path == "/v1/metadata":
            content = {"anyOf": [content, {"$ref": "#/components/schemas/Unchanged"}]}
        op["responses"][str(status)] = {"description": "success", "content": {"application/json": {"schema": content}}}
        if path not in _PUBLIC:
            op["security"] = [{"bearer": []}]
        for code in sorted(set(errors) | {500} | (set() if path in _PUBLIC else {401, 403})):
            op["responses"][str(code)] = {
                "description": _STATUS_TEXT.get(code, "unexpected error"),
                "content": {"application/json": {"schema": _ERROR}},
            }
        paths.setdefault(path, {})[method] = op
    schemas = {**_REPLIES, **{name: _object(cls) for name, cls in _REQUESTS.items()}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "TinyStream controller API",
            "version": API_VERSION,
            "description": "Broker registration, heartbeats, metadata images, ISR changes and topic admin. "
            "Errors answer {error: KAFKA_ERROR_NAME, code, message}. Every path but /healthz and "
            "/v1/openapi.json needs a bearer token: broker-<id> (acts only as that broker) or admin.",
        },
        "paths": paths,
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                      "description": "tinystream token --secret-file ..."}}},
    }


def openapi_document() -> dict[str, Any]:
    return _document()
