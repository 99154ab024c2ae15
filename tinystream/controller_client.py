"""An async client for the controller API (operator/service/README.md).

Brokers use it to register, heartbeat, pull metadata images and report ISR
changes; admin tools and the Kubernetes operator use it for topics and
brokers. One method per endpoint, typed arguments, frozen replies::

    async with ControllerClient("http://127.0.0.1:9091") as controller:
        reg = await controller.register_broker(broker_id=1, incarnation_id=uuid4().hex,
                                               host="127.0.0.1", port=9092)
        meta = await controller.metadata(since=-1)
        hb = await controller.heartbeat(1, broker_epoch=reg.broker_epoch,
                                        metadata_version=meta.version)

Errors are translated here, at the boundary, and nowhere else::

    Exception
    └── ControllerClientError        error (Kafka name), code, status, message
        ├── ControllerUnavailable    no answer (connection refused, timeout) or
        │                            5xx (NOT_CONTROLLER, KAFKA_STORAGE_ERROR):
        │                            retry later, nothing was changed
        └── ControllerRefused        4xx: the controller said no, with the Kafka
                                     error name (STALE_BROKER_EPOCH, ...)

The client does not retry: what to do next depends on the caller (a broker
re-registers on `REREGISTER_ERRORS`, refreshes metadata on a stale epoch,
backs off on ControllerUnavailable). Metadata images come back as plain
dicts in the image's JSON shape; `tinystream.operator.controller.
MetadataImage.from_dict` turns one into typed records if wanted.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

# A broker that gets one of these from a heartbeat (or AlterPartition) has
# lost its registration (the controller fenced a newer incarnation, or lost
# its state): register again with the same incarnation id and go on.
REREGISTER_ERRORS = frozenset({"STALE_BROKER_EPOCH", "BROKER_ID_NOT_REGISTERED"})

ConfigValue = str | int | float | bool


class ControllerClientError(Exception):
    """Base: `error` is the Kafka error name (None when there was no answer)."""

    def __init__(self, message: str, *, error: str | None = None, code: int | None = None,
                 status: int | None = None) -> None:
        super().__init__(f"{error}: {message}" if error else message)
        self.error = error
        self.code = code
        self.status = status
        self.message = message


class ControllerUnavailable(ControllerClientError):
    """No usable answer (network, timeout) or a 5xx: retry later."""


class ControllerRefused(ControllerClientError):
    """The controller refused the request (4xx) with a Kafka error."""


# -- replies -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterReply:
    broker_id: int
    broker_epoch: int
    fenced: bool
    metadata_version: int  # the latest image; the broker is unfenced once it has applied >= broker_epoch
    cluster_id: str
    session_timeout_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatReply:
    broker_id: int
    fenced: bool
    metadata_version: int  # the latest image version
    newer_image_available: bool  # pull /v1/metadata?since=<yours>
    session_timeout_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataReply:
    """`image` is None when the caller's version is still the latest."""

    version: int
    image: dict[str, Any] | None

    @property
    def changed(self) -> bool:
        return self.image is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionState:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int  # -1: offline
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    leader_recovery_state: str = "RECOVERED"

    @classmethod
    def from_json(cls, topic: str, data: Mapping[str, Any]) -> PartitionState:
        return cls(
            topic=topic,
            partition=data["partition"],
            replicas=tuple(data["replicas"]),
            isr=tuple(data["isr"]),
            leader=data["leader"],
            leader_epoch=data["leader_epoch"],
            partition_epoch=data["partition_epoch"],
            adding_replicas=tuple(data.get("adding_replicas", ())),
            removing_replicas=tuple(data.get("removing_replicas", ())),
            leader_recovery_state=data.get("leader_recovery_state", "RECOVERED"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsBlock:
    """Producer ids [producer_id_start, producer_id_start + producer_id_len), this broker's alone (KIP-730)."""

    broker_id: int
    producer_id_start: int
    producer_id_len: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReply:
    partition: PartitionState  # the partition after the change, epochs bumped
    metadata_version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicState:
    name: str
    topic_id: str
    config: Mapping[str, ConfigValue]
    partitions: tuple[PartitionState, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TopicState:
        name = data["name"]
        return cls(
            name=name,
            topic_id=data["topic_id"],
            config=dict(data.get("config", {})),
            partitions=tuple(PartitionState.from_json(name, p) for p in data.get("partitions", ())),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminReply:
    """Common to admin changes: the image version after it and what changed."""

    metadata_version: int
    validate_only: bool
    actions: tuple[Mapping[str, Any], ...]  # the core's actions: {"type": "TopicCreated", ...}


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicReply(AdminReply):
    topic: TopicState | None  # None after a change that removed it


@dataclass(frozen=True, slots=True, kw_only=True)
class AclDeleteReply(AdminReply):
    matched: tuple[tuple[Mapping[str, Any], ...], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerChangeReply(AdminReply):
    broker: Mapping[str, Any] | None  # the broker record, None once unregistered
    leaderships: tuple[tuple[str, int], ...]  # partitions it still leads (empty: drain done)


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionReply(AdminReply):
    leaders_changed: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignReply(AdminReply):
    partitions: tuple[PartitionState, ...]


def _admin(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "metadata_version": data["metadata_version"],
        "validate_only": data.get("validate_only", False),
        "actions": tuple(data.get("actions", ())),
    }


# -- the client ----------------------------------------------------------------


def controller_ssl_context(base_url: str, cafile: str | None) -> ssl.SSLContext | None:
    """How to verify an https controller: against `cafile` (PEM), else the system's CAs; None for http.

    A truststore given for an http URL, or one that cannot be read, is a ValueError naming it."""
    if not base_url.startswith("https://"):
        if cafile:
            raise ValueError(f"controller.ssl.truststore.location is set but controller.url {base_url} is not https")
        return None
    if cafile is None:
        return ssl.create_default_context()
    try:
        pem = Path(cafile).read_text()
        return ssl.create_default_context(cadata=pem)
    except (OSError, ssl.SSLError, ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"controller.ssl.truststore.location {cafile}: not a readable PEM certificate ({exc})") from exc



class ControllerClient:
    """One controller at `base_url` (http://host:port); reuse one per process.

    `token` is the caller's bearer token (tinystream/controller_auth.py), or a function that gives the
    current one (a TokenFile: a rotated token is used from its next call); the
    controller refuses every call but /healthz and /v1/openapi.json without one.
    `ssl_context` verifies an https controller (controller_ssl_context); None: the system's CAs.
    """

    def __init__(self, base_url: str, *, token: str | Callable[[], str] | None = None, timeout_s: float = 10.0,
                 session: aiohttp.ClientSession | None = None, ssl_context: ssl.SSLContext | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._token = token
        self._session = session
        self._owns_session = session is None

    async def __aenter__(self) -> ControllerClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
        self._session = None

    # -- brokers ---------------------------------------------------------------

    async def register_broker(self, *, broker_id: int, incarnation_id: str, host: str, port: int,
                              rack: str | None = None, endpoints: Sequence[Mapping[str, Any]] = ()) -> RegisterReply:
        """Register (or re-register, same incarnation: keeps the epoch); the broker starts fenced.

        `endpoints`: every advertised listener, {"name", "host", "port", "security_protocol"}; host:port is
        the inter-broker one."""
        body: dict[str, Any] = {
            "broker_id": broker_id, "incarnation_id": incarnation_id, "host": host, "port": port, "rack": rack,
        }
        if endpoints:
            body["endpoints"] = [dict(e) for e in endpoints]
        data = await self._call("POST", "/v1/brokers/register", body)
        return RegisterReply(**data)

    async def heartbeat(self, broker_id: int, *, broker_epoch: int, metadata_version: int,
                        want_fence: bool = False, timeout_s: float | None = None) -> HeartbeatReply:
        """`timeout_s` (default: the client's) bounds this call: a broker keeps it well under its session."""
        data = await self._call("POST", f"/v1/brokers/{broker_id}/heartbeat", {
            "broker_epoch": broker_epoch, "metadata_version": metadata_version, "want_fence": want_fence,
        }, timeout_s=timeout_s)
        return HeartbeatReply(**data)

    async def drain_broker(self, broker_id: int) -> BrokerChangeReply:
        return self._broker_change(await self._call("POST", f"/v1/brokers/{broker_id}/drain", {}))

    async def undrain_broker(self, broker_id: int) -> BrokerChangeReply:
        return self._broker_change(await self._call("POST", f"/v1/brokers/{broker_id}/undrain", {}))

    async def unregister_broker(self, broker_id: int) -> BrokerChangeReply:
        return self._broker_change(await self._call("DELETE", f"/v1/brokers/{broker_id}", None))

    @staticmethod
    def _broker_change(data: Mapping[str, Any]) -> BrokerChangeReply:
        return BrokerChangeReply(
            **_admin(data),
            broker=data.get("broker"),
            leaderships=tuple((tp["topic"], tp["partition"]) for tp in data.get("leaderships", ())),
        )

    # -- metadata --------------------------------------------------------------

    async def metadata(self, *, since: int | None = None, wait_ms: int = 0,
                       timeout_s: float | None = None) -> MetadataReply:
        """The image; with `since`, only if newer, waiting up to `wait_ms` for one (long poll).

        `timeout_s` (default: the client's) is on top of `wait_ms`."""
        params: dict[str, str] = {}
        if since is not None:
            params["since"] = str(since)
            if wait_ms:
                params["wait_ms"] = str(wait_ms)
        data = await self._call("GET", "/v1/metadata", None, params=params, timeout_s=timeout_s,
                                extra_timeout_s=wait_ms / 1000)
        if data.get("unchanged"):
            return MetadataReply(version=data["version"], image=None)
        return MetadataReply(version=data["version"], image=data)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        """AllocateProducerIds (KIP-730): the next block of producer ids, saved by the controller."""
        data = await self._call("POST", "/v1/producer-ids", {"broker_id": broker_id, "broker_epoch": broker_epoch})
        return ProducerIdsBlock(**data)

    async def alter_partition(self, *, broker_id: int, broker_epoch: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, isr: Sequence[int],
                              leader_recovery_state: str = "RECOVERED") -> AlterPartitionReply:
        """Ask for a new ISR as the partition's leader (KIP-497), naming the epochs you know."""
        data = await self._call("POST", "/v1/partitions/alter", {
            "broker_id": broker_id, "broker_epoch": broker_epoch, "topic": topic, "partition": partition,
            "leader_epoch": leader_epoch, "partition_epoch": partition_epoch, "isr": list(isr),
            "leader_recovery_state": leader_recovery_state,
        })
        return AlterPartitionReply(
            partition=PartitionState.from_json(data["topic"], data), metadata_version=data["metadata_version"]
        )

    # -- topics ----------------------------------------------------------------

    async def create_topic(self, name: str, *, partitions: int | None = None,
                           replication_factor: int | None = None, config: Mapping[str, ConfigValue] | None = None,
                           replica_assignment: Sequence[Sequence[int]] | None = None,
                           validate_only: bool = False) -> TopicReply:
        """None (or Kafka's -1) for partitions / replication_factor: the controller's defaults."""
        body: dict[str, Any] = {"name": name, "partitions": partitions, "replication_factor": replication_factor,
                                "config": dict(config or {}), "validate_only": validate_only}
        if replica_assignment is not None:
            body["replica_assignment"] = [list(r) for r in replica_assignment]
        return self._topic_reply(await self._call("POST", "/v1/topics", body))

    async def describe_topic(self, name: str) -> TopicState:
        data = await self._call("GET", f"/v1/topics/{_quote(name)}", None)
        return TopicState.from_json(data["topic"])

    async def delete_topic(self, name: str) -> AdminReply:
        return AdminReply(**_admin(await self._call("DELETE", f"/v1/topics/{_quote(name)}", None)))

    async def create_partitions(self, name: str, *, count: int,
                                replica_assignment: Sequence[Sequence[int]] | None = None,
                                validate_only: bool = False) -> TopicReply:
        """Grow `name` to `count` partitions in total."""
        body: dict[str, Any] = {"count": count, "validate_only": validate_only}
        if replica_assignment is not None:
            body["replica_assignment"] = [list(r) for r in replica_assignment]
        return self._topic_reply(await self._call("POST", f"/v1/topics/{_quote(name)}/partitions", body))

    async def alter_topic_config(self, name: str, config: Mapping[str, ConfigValue | None], *,
                                 replace: bool = False, validate_only: bool = False) -> TopicReply:
        """Merge `config` (None deletes a key), or with `replace` make it the whole config."""
        body = {"config": dict(config), "replace": replace, "validate_only": validate_only}
        return self._topic_reply(await self._call("PATCH", f"/v1/topics/{_quote(name)}/config", body))

    @staticmethod
    def _topic_reply(data: Mapping[str, Any]) -> TopicReply:
        topic = data.get("topic")
        return TopicReply(**_admin(data), topic=TopicState.from_json(topic) if topic else None)

    # -- access: ACLs and SCRAM credentials (dicts in the image's shape, operator/controller/image.py) -------

    async def create_acls(self, acls: Sequence[Mapping[str, Any]]) -> AdminReply:
        return AdminReply(**_admin(await self._call("POST", "/v1/acls", {"acls": [dict(a) for a in acls]})))

    async def delete_acls(self, filters: Sequence[Mapping[str, Any]]) -> AclDeleteReply:
        """`matched[i]`: the ACLs filter i removed."""
        data = await self._call("POST", "/v1/acls/delete", {"filters": [dict(f) for f in filters]})
        return AclDeleteReply(**_admin(data), matched=tuple(tuple(m) for m in data.get("matched", ())))

    async def alter_scram_credentials(self, *, upsertions: Sequence[Mapping[str, Any]] = (),
                                      deletions: Sequence[Mapping[str, str]] = ()) -> AdminReply:
        body = {"upsertions": [dict(u) for u in upsertions], "deletions": [dict(d) for d in deletions]}
        return AdminReply(**_admin(await self._call("POST", "/v1/scram-credentials", body)))

    async def alter_client_quotas(self, alterations: Sequence[Mapping[str, Any]], *,
                                  validate_only: bool = False) -> AdminReply:
        """AlterClientQuotas (KIP-546), all or nothing: each {"entity": {"user"?: name, "client-id"?: name}
        (None: <default>), "ops": [{"key", "value", "remove"}]}."""
        body = {"alterations": [dict(a) for a in alterations], "validate_only": validate_only}
        return AdminReply(**_admin(await self._call("POST", "/v1/client-quotas", body)))

    async def alter_broker_configs(self, alterations: Sequence[Mapping[str, Any]], *,
                                   validate_only: bool = False) -> AdminReply:
        """Dynamic broker configs, all or nothing: each {"resource": "" (the cluster default) or a broker id
        ("2"), "ops": [{"key", "op": "SET" | "DELETE", "value"}]}."""
        body = {"alterations": [dict(a) for a in alterations], "validate_only": validate_only}
        return AdminReply(**_admin(await self._call("POST", "/v1/broker-configs", body)))

    # -- leadership and replicas -----------------------------------------------

    async def elect_preferred_leaders(self, partitions: Sequence[tuple[str, int]] | None = None) -> ElectionReply:
        body = {"partitions": None if partitions is None else [{"topic": t, "partition": p} for t, p in partitions]}
        data = await self._call("POST", "/v1/elections/preferred", body)
        return ElectionReply(**_admin(data), leaders_changed=tuple(data.get("leaders_changed", ())))

    async def reassign_partitions(self, assignments: Mapping[tuple[str, int], Sequence[int] | None]) -> ReassignReply:
        """Move partitions to new replicas (KIP-455); None cancels a running reassignment."""
        body = {"assignments": [
            {"topic": t, "partition": p, "replicas": None if r is None else list(r)}
            for (t, p), r in assignments.items()
        ]}
        data = await self._call("POST", "/v1/reassignments", body)
        parts = tuple(PartitionState.from_json(p["topic"], p) for p in data.get("partitions", ()))
        return ReassignReply(**_admin(data), partitions=parts)

    # -- rebalance (admin only; the reply dicts are the API's, see operator/service/README.md) --------

    async def rebalance_proposal(self, mode: str, *, brokers: Sequence[int] = (),
                                 sizes: Mapping[tuple[str, int], int] | None = None) -> dict[str, Any]:
        """A proposal for `mode` (full, add-brokers, remove-brokers); `sizes` are measured bytes per partition."""
        body = {"mode": mode, "brokers": list(brokers),
                "sizes": [{"topic": t, "partition": p, "size_bytes": n} for (t, p), n in (sizes or {}).items()]}
        return await self._call("POST", "/v1/rebalance/proposal", body, extra_timeout_s=60.0)

    async def rebalance_execute(self, moves: Mapping[tuple[str, int], Sequence[int]], *,
                                throttle: bool = False, rate: int | None = None) -> dict[str, Any]:
        """Start the moves; `rate` (bytes/s) also sets the involved brokers' replication throttle rates."""
        return await self._call("POST", "/v1/rebalance/execute", _moves_body(moves, throttle=throttle, rate=rate))

    async def rebalance_verify(self, moves: Mapping[tuple[str, int], Sequence[int]], *,
                               rate: int | None = None) -> dict[str, Any]:
        """What is left; when done, the throttles go (pass execute's `rate` to remove the rates it set)."""
        return await self._call("POST", "/v1/rebalance/verify", _moves_body(moves, rate=rate))

    async def rebalance_stop(self, moves: Mapping[tuple[str, int], Sequence[int]], *,
                             rate: int | None = None) -> dict[str, Any]:
        return await self._call("POST", "/v1/rebalance/stop", _moves_body(moves, rate=rate))

    # -- service ---------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        return await self._call("GET", "/healthz", None)

    async def state(self) -> dict[str, Any]:
        """The whole controller state (debugging; its shape is the state file's)."""
        return await self._call("GET", "/v1/state", None)

    async def openapi(self) -> dict[str, Any]:
        return await self._call("GET", "/v1/openapi.json", None)

    # -- transport -------------------------------------------------------------

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
            self._owns_session = True
        return self._session

    async def _call(self, method: str, path: str, body: Any, *, params: Mapping[str, str] | None = None,
                    timeout_s: float | None = None, extra_timeout_s: float = 0.0) -> Any:
        url = self.base_url + path
        data = None if body is None else orjson.dumps(body)
        token = self._token() if callable(self._token) else self._token
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        headers = {**auth, **({"Content-Type": "application/json"} if data is not None else {})}
        timeout = aiohttp.ClientTimeout(total=(self.timeout_s if timeout_s is None else timeout_s) + extra_timeout_s)
        try:
            async with self._client().request(method, url, data=data, headers=headers, params=params,
                                              timeout=timeout, ssl=self._ssl) as response:
                raw = await response.read()
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ControllerUnavailable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        try:
            payload = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            payload = None
        if 200 <= status < 300:
            if not isinstance(payload, dict):
                raise ControllerUnavailable(f"{method} {url}: answered {status} without a JSON object", status=status)
            return payload
        error = payload.get("error") if isinstance(payload, dict) else None
        code = payload.get("code") if isinstance(payload, dict) else None
        message = payload.get("message") if isinstance(payload, dict) else None
        message = message or f"{method} {url}: HTTP {status}: {raw[:200].decode(errors='replace')}"
        kind = ControllerUnavailable if status >= 500 else ControllerRefused
        raise kind(message, error=error or "UNKNOWN_SERVER_ERROR", code=code if code is not None else -1,
                   status=status)


def _moves_body(moves: Mapping[tuple[str, int], Sequence[int]], *, throttle: bool = False,
                rate: int | None = None) -> dict[str, Any]:
    return {"assignments": [{"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in moves.items()],
            "throttle": throttle, "throttle_rate": rate}


def _quote(name: str) -> str:
    # Kafka topic names are [a-zA-Z0-9._-]; quote anyway so a bad name reaches
    # the controller (and its clear error) instead of another path.
    return quote(name, safe="")
