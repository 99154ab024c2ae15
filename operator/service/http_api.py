"""The controller API over HTTP/JSON: thin handlers around `ControllerService`.

Each handler decodes its body (requests.py: strict, 400 on anything odd),
turns it into one core event, submits it, and answers JSON (orjson). A
refusal by the core becomes `{"error", "code", "message"}` with the status
from errors.py; so do routing errors (404/405), oversized bodies (413) and,
as a last resort, bugs (500, logged). Paths are versioned under /v1; the
table with bodies and replies is in README.md and at /v1/openapi.json.

Who may call what (tokens: tinystream/controller_auth.py). Epochs are not
public: with them anyone could forge an AlterPartition.

    anyone              GET /healthz, /v1/openapi.json, /metrics
    any principal       GET /v1/metadata, /v1/state, /v1/topics/{name}
    broker-<id> itself  register, heartbeat, producer-ids, partitions/alter: for its own id only
    a broker or admin   topic create, delete, partitions, config; ACL create/delete; SCRAM credential
                        changes; preferred elections, reassignments, client quotas, dynamic broker
                        configs (brokers forward their clients' requests, after their own authorizer
                        said yes)
    admin               drain, undrain, unregister; rebalance proposal, execute, verify, stop (a broker
                        forwards no client request that plans moves over the whole cluster)

A controller made without a secret (tests of the API itself) lets every caller
act as admin; `tinystream controller`, `tinystream dev` and the operator always
have one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from tinystream.controller_auth import ADMIN, bearer, broker_id_of, principal_of
from tinystream.operator.controller import (
    AclsDeleted,
    AllocateProducerIds,
    AlterBrokerConfigs,
    AlterClientQuotas,
    AlterPartition,
    AlterScramCredentials,
    AlterTopicConfig,
    BrokerHeartbeat,
    ControllerError,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    Decision,
    DeleteAcls,
    DeleteTopic,
    DrainBroker,
    ElectPreferredLeaders,
    Event,
    LeaderChanged,
    ProducerIdsAllocated,
    ReassignPartitions,
    RegisterBroker,
    UndrainBroker,
    UnregisterBroker,
)
from tinystream.operator.controller.codec import to_plain
from tinystream.operator.controller.errors import PlacementError
from tinystream.operator.service import rebalancing
from tinystream.operator.service.controller_service import ControllerService
from tinystream.operator.service.errors import INVALID_REQUEST, ApiError
from tinystream.operator.service.metrics import ControllerMetrics, http_middleware, metrics_handler
from tinystream.operator.service.openapi import openapi_document
from tinystream.operator.service.request_bodies import (
    AllocateProducerIdsRequest,
    AlterBrokerConfigsRequest,
    AlterClientQuotasRequest,
    AlterConfigRequest,
    AlterPartitionRequest,
    AlterScramRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicRequest,
    DeleteAclsRequest,
    ElectLeadersRequest,
    EmptyRequest,
    HeartbeatRequest,
    ReassignRequest,
    RebalanceMovesRequest,
    RebalanceProposalRequest,
    RegisterRequest,
    decode,
    default_if_negative_one,
)

log = logging.getLogger(__name__)

SERVICE_KEY = web.AppKey("controller_service", ControllerService)
JSON = "application/json"
MAX_BODY_BYTES = 4 * 1024 * 1024  # a CreateTopics with a large manual assignment fits

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _routes(prefix: str = "") -> list[web.RouteDef]:
    return [
        web.get(prefix + "/healthz", healthz),
        web.get(prefix + "/v1/openapi.json", openapi),
        web.get(prefix + "/v1/state", state),
        web.get(prefix + "/v1/metadata", metadata),
        web.post(prefix + "/v1/brokers/register", register_broker),
        web.post(prefix + "/v1/brokers/{broker_id}/heartbeat", heartbeat),
        web.post(prefix + "/v1/brokers/{broker_id}/drain", drain_broker),
        web.post(prefix + "/v1/brokers/{broker_id}/undrain", undrain_broker),
        web.delete(prefix + "/v1/brokers/{broker_id}", unregister_broker),
        web.post(prefix + "/v1/partitions/alter", alter_partition),
        web.post(prefix + "/v1/producer-ids", allocate_producer_ids),
        web.post(prefix + "/v1/topics", create_topic),
        web.get(prefix + "/v1/topics/{name}", describe_topic),
        web.delete(prefix + "/v1/topics/{name}", delete_topic),
        web.post(prefix + "/v1/topics/{name}/partitions", create_partitions),
        web.patch(prefix + "/v1/topics/{name}/config", alter_topic_config),
        web.post(prefix + "/v1/elections/preferred", elect_preferred_leaders),
        web.post(prefix + "/v1/reassignments", reassign_partitions),
        web.post(prefix + "/v1/rebalance/proposal", rebalance_proposal),
        web.post(prefix + "/v1/rebalance/execute", rebalance_execute),
        web.post(prefix + "/v1/rebalance/verify", rebalance_verify),
        web.post(prefix + "/v1/rebalance/stop", rebalance_stop),
        web.post(prefix + "/v1/acls", create_acls),
        web.post(prefix + "/v1/acls/delete", delete_acls),
        web.post(prefix + "/v1/scram-credentials", alter_scram_credentials),
        web.post(prefix + "/v1/client-quotas", alter_client_quotas),
        web.post(prefix + "/v1/broker-configs", alter_broker_configs),
    ]


def make_app(service: ControllerService, *, secret: str | None,
             metrics: ControllerMetrics | None = None) -> web.Application:
    """The API of one controller, whose tokens `secret` signs; with `metrics`, also GET /metrics."""
    app = web.Application(middlewares=_middlewares(metrics), client_max_size=MAX_BODY_BYTES)
    app[SERVICE_KEY] = service
    app[SECRET_KEY] = lambda _request: secret
    app.add_routes(_routes())
    if metrics is not None:
        app.router.add_get("/metrics", metrics_handler(metrics))
    return app


def _middlewares(metrics: ControllerMetrics | None, *, strip_prefix: str = "") -> list[Any]:
    # The metrics middleware is outermost: it sees the status _errors turned an exception into.
    if metrics is None:
        return [_errors, _authenticate]
    return [http_middleware(metrics, strip_prefix=strip_prefix), _errors, _authenticate]


# The Kubernetes operator serves one controller per TinyStreamCluster from one port:
# the same API under /clusters/{namespace}/{cluster} (the brokers' controller.url).
CLUSTER_PREFIX = "/clusters/{namespace}/{cluster}"
ServiceLookup = Callable[[str, str], "ControllerService | None"]
SecretLookup = Callable[[str, str], "str | None"]
LOOKUP_KEY = web.AppKey("controller_lookup", object)
SECRET_KEY = web.AppKey("controller_secret", object)  # request -> the secret its tokens must be made with
IdentityLookup = Callable[[str, str, str], Awaitable["str | None"]]  # (namespace, cluster, token) -> broker
IDENTITY_KEY = web.AppKey("broker_identity", object)
LegacyLookup = Callable[[str, str, int], Awaitable[bool]]  # (namespace, cluster, broker id) -> old pod?
LEGACY_KEY = web.AppKey("legacy_broker_tokens", object)


async def _root_healthz(request: web.Request) -> web.Response:
    return reply({"status": "ok"})


def make_clusters_app(lookup: ServiceLookup, *, secrets: SecretLookup,
                      metrics: ControllerMetrics | None = None,
                      brokers: IdentityLookup | None = None,
                      legacy_brokers: LegacyLookup | None = None) -> web.Application:
    """Many controllers behind one server; `lookup(namespace, cluster)` finds each request's,
    `secrets(namespace, cluster)` the secret of its tokens (a token of one cluster is worthless at another).

    With `brokers`, a broker proves who it is only through it (`await brokers(namespace, cluster, token)`
    -> "broker-<id>" or None: on Kubernetes, its pod's own service-account token), never with a token
    the cluster secret made (but while `legacy_brokers(namespace, cluster, id)` says that broker's pod
    predates pod identities: an upgrade's roll); the secret's tokens then serve the admin alone.

    A cluster without a running controller (not reconciled yet, deleted)
    answers NOT_CONTROLLER, which brokers treat as "retry later". With
    `metrics`, GET /metrics serves that registry (the operator's: its own
    series and every cluster's controller series) and requests are counted
    by route template without the cluster prefix.
    """
    app = web.Application(middlewares=_middlewares(metrics, strip_prefix=CLUSTER_PREFIX),
                          client_max_size=MAX_BODY_BYTES)
    app[LOOKUP_KEY] = lookup
    app[SECRET_KEY] = lambda request: _cluster_secret(secrets, request)
    if brokers is not None:
        app[IDENTITY_KEY] = brokers
    if legacy_brokers is not None:
        app[LEGACY_KEY] = legacy_brokers
    app.add_routes([web.get("/healthz", _root_healthz), *_routes(CLUSTER_PREFIX)])
    if metrics is not None:
        app.router.add_get("/metrics", metrics_handler(metrics))
    return app


# -- plumbing ------------------------------------------------------------------


def reply(body: Any, *, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        response = reply(exc.body(), status=exc.status)
        if exc.status == 503:  # retry later: on a new connection, which may reach the controller that took over
            response.force_close()
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        name, code = INVALID_REQUEST
        if isinstance(exc, web.HTTPNotFound):
            message = f"no endpoint {request.method} {request.path} (see /v1/openapi.json)"
        elif isinstance(exc, web.HTTPMethodNotAllowed):
            allowed = ", ".join(sorted(exc.allowed_methods))
            message = f"{request.method} is not allowed on {request.path}; allowed: {allowed}"
        else:
            message = exc.text or exc.reason
        return reply({"error": name, "code": code, "message": message}, status=exc.status)
    except Exception:
        log.exception("unexpected error in %s %s", request.method, request.path)
        error = ApiError.internal(f"unexpected error in {request.method} {request.path}; see the controller log")
        return reply(error.body(), status=error.status)


def _cluster_secret(secrets: SecretLookup, request: web.Request) -> str:
    """A cluster served here always has a secret; one without is not open: nobody may call it."""
    namespace, cluster = request.match_info["namespace"], request.match_info["cluster"]
    secret = secrets(namespace, cluster)
    if secret is None:
        raise ApiError.from_controller(ControllerError.NOT_CONTROLLER,
                                       f"no controller runs for cluster {namespace}/{cluster} in this operator")
    return secret


PUBLIC_PATHS = ("/healthz", "/v1/openapi.json", "/metrics")
PRINCIPAL = web.RequestKey("principal", str)  # who is calling
AUTHENTICATION_FAILED = ("SASL_AUTHENTICATION_FAILED", 58)
AUTHORIZATION_FAILED = ("CLUSTER_AUTHORIZATION_FAILED", 31)


@web.middleware
async def _authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    route = request.match_info.route.resource
    path = route.canonical if route is not None else request.path
    if path.endswith(PUBLIC_PATHS) or request.match_info.http_exception is not None:
        return await handler(request)
    secret = request.app[SECRET_KEY](request)  # type: ignore[operator]
    if secret is None:
        request[PRINCIPAL] = ADMIN  # a controller without a secret: the API's own tests
        return await handler(request)
    token = bearer(request.headers.get("Authorization"))
    principal = principal_of(secret, token) if token else None
    identities = request.app.get(IDENTITY_KEY)
    if identities is not None:  # brokers prove themselves there alone; the secret's tokens serve the admin
        namespace, cluster = request.match_info["namespace"], request.match_info["cluster"]
        legacy_id = broker_id_of(principal) if principal is not None else None
        if legacy_id is not None:  # a token the cluster secret made: only an old pod mid-upgrade may use it
            legacy = request.app.get(LEGACY_KEY)
            principal = principal if legacy is not None and await legacy(namespace, cluster, legacy_id) else None  # type: ignore[operator]
        if principal is None and token:
            principal = await identities(namespace, cluster, token)  # type: ignore[operator]
    if principal is None:
        why = "the token was not made for this cluster" if token else "no bearer token (Authorization: Bearer ...)"
        raise ApiError(*AUTHENTICATION_FAILED, 401, f"{_where(request)}: {why}")
    request[PRINCIPAL] = principal
    return await handler(request)


def _refuse(request: web.Request, needs: str) -> ApiError:
    return ApiError(*AUTHORIZATION_FAILED, 403, f"{_where(request)}: {request[PRINCIPAL]} may not do this ({needs})")


def _require_admin(request: web.Request) -> None:
    if request[PRINCIPAL] != ADMIN:
        raise _refuse(request, "admin only")


def _require_broker_or_admin(request: web.Request) -> None:
    if request[PRINCIPAL] != ADMIN and broker_id_of(request[PRINCIPAL]) is None:
        raise _refuse(request, "a broker or admin")


def _require_access_admin(request: web.Request) -> None:
    """ACLs and SCRAM credentials. Where brokers prove themselves by their pods (IDENTITY_KEY: the Kubernetes
    operator), they are the admin's alone: TinyStreamUser resources make them, and a broker, trusted to
    replicate, is not trusted to grant (a broken broker pod could otherwise give anyone any right). A local
    controller takes them from brokers too, which forward their clients' CreateAcls (Kafka's way)."""
    if IDENTITY_KEY in request.app:
        if request[PRINCIPAL] != ADMIN:
            raise _refuse(request, "ACLs and SCRAM credentials of a cluster on Kubernetes come from "
                                   "TinyStreamUser resources")
        return
    _require_broker_or_admin(request)


def _require_self(request: web.Request, broker_id: int) -> None:
    """Only broker-<id> itself (or the admin, a super user) speaks for broker <id>."""
    if broker_id_of(request[PRINCIPAL]) != broker_id and request[PRINCIPAL] != ADMIN:
        raise _refuse(request, f"only broker-{broker_id} acts as broker {broker_id}")


def _service(request: web.Request) -> ControllerService:
    if SERVICE_KEY in request.app:
        return request.app[SERVICE_KEY]
    namespace, cluster = request.match_info["namespace"], request.match_info["cluster"]
    service = request.app[LOOKUP_KEY](namespace, cluster)  # type: ignore[operator]
    if service is None:
        raise ApiError.from_controller(ControllerError.NOT_CONTROLLER,
                                       f"no controller runs for cluster {namespace}/{cluster} in this operator")
    return service


def _where(request: web.Request) -> str:
    return f"{request.method} {request.path}"


async def _body(request: web.Request, cls: type[Any]) -> Any:
    raw = await request.read()
    if not raw.strip():
        data: Any = {}
    else:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ApiError.bad_request(f"{_where(request)}: the body is not valid JSON ({exc})") from None
    return decode(cls, data, where=_where(request))


def _broker_id(request: web.Request) -> int:
    text = request.match_info["broker_id"]
    try:
        value = int(text)
    except ValueError:
        raise ApiError.bad_request(f"{_where(request)}: broker id {text!r} is not an integer") from None
    if value < 0:
        raise ApiError.bad_request(f"{_where(request)}: broker id {value} is negative")
    return value


def _query_int(request: web.Request, name: str, default: int, *, minimum: int) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ApiError.bad_request(f"{_where(request)}: query parameter {name}={text!r} is not an integer") from None
    if value < minimum:
        raise ApiError.bad_request(f"{_where(request)}: query parameter {name}={value} is below {minimum}")
    return value


def _no_unknown_query(request: web.Request, allowed: set[str]) -> None:
    unknown = sorted(set(request.query) - allowed)
    if unknown:
        raise ApiError.bad_request(
            f"{_where(request)}: unknown query parameter(s) {unknown}; allowed: {', '.join(sorted(allowed))}"
        )


def _accepted(decision: Decision) -> Decision:
    if decision.error is not None:
        raise ApiError.from_controller(decision.error, decision.message)
    return decision


async def _run(request: web.Request, event: Event, *, validate_only: bool = False) -> Decision:
    service = _service(request)
    if validate_only:
        return _accepted(service.preview(event))
    return _accepted(await service.submit(event))


def _admin_reply(request: web.Request, decision: Decision, *, validate_only: bool = False, **body: Any) -> dict:
    # validate_only: the image is unchanged, so report the current version, not the previewed one.
    version = _service(request).image.version if validate_only else decision.state.image.version
    return {
        **body,
        "metadata_version": version,
        "validate_only": validate_only,
        "actions": [action.to_dict() for action in decision.actions],
    }


# -- service -------------------------------------------------------------------


async def healthz(request: web.Request) -> web.Response:
    image = _service(request).image
    return reply({"status": "ok", "cluster_id": image.cluster_id, "metadata_version": image.version})


async def openapi(request: web.Request) -> web.Response:
    return reply(openapi_document())


async def state(request: web.Request) -> web.Response:
    service = _service(request)
    return reply({"now_ms": service.clock(), "state": service.state.to_dict()})


async def metadata(request: web.Request) -> web.Response:
    """The image; with ?since=V only when newer than V, waiting up to ?wait_ms= for it."""
    _no_unknown_query(request, {"since", "wait_ms"})
    since = _query_int(request, "since", -1, minimum=-1)
    wait_ms = _query_int(request, "wait_ms", 0, minimum=0)
    service = _service(request)
    if "since" in request.query:
        image = await service.wait_for_change(since, wait_ms=wait_ms) if wait_ms else service.image
        if image.version == since:
            return reply({"version": since, "unchanged": True})
    return web.Response(body=service.image_json(), content_type=JSON)


# -- brokers -------------------------------------------------------------------


async def register_broker(request: web.Request) -> web.Response:
    body: RegisterRequest = await _body(request, RegisterRequest)
    _require_self(request, body.broker_id)
    decision = await _run(
        request,
        RegisterBroker(
            broker_id=body.broker_id, incarnation_id=body.incarnation_id, host=body.host, port=body.port, rack=body.rack,
            endpoints=body.endpoints,
        ),
    )
    image = decision.state.image
    broker = image.brokers[body.broker_id]
    return reply(
        {
            "broker_id": broker.broker_id,
            "broker_epoch": broker.epoch,
            "fenced": broker.fenced,
            "metadata_version": image.version,
            "cluster_id": image.cluster_id,
            "session_timeout_ms": decision.state.config.broker_session_timeout_ms,
        }
    )


async def heartbeat(request: web.Request) -> web.Response:
    broker_id = _broker_id(request)
    _require_self(request, broker_id)
    body: HeartbeatRequest = await _body(request, HeartbeatRequest)
    decision = await _run(
        request,
        BrokerHeartbeat(
            broker_id=broker_id,
            broker_epoch=body.broker_epoch,
            metadata_version=body.metadata_version,
            want_fence=body.want_fence,
        ),
    )
    image = decision.state.image
    return reply(
        {
            "broker_id": broker_id,
            "fenced": image.brokers[broker_id].fenced,
            "metadata_version": image.version,
            "newer_image_available": image.version > body.metadata_version,
            "session_timeout_ms": decision.state.config.broker_session_timeout_ms,
        }
    )


async def _broker_change(request: web.Request, make: Callable[[int], Event]) -> web.Response:
    broker_id = _broker_id(request)
    _require_admin(request)
    await _body(request, EmptyRequest)
    decision = await _run(request, make(broker_id))
    image = decision.state.image
    record = image.brokers.get(broker_id)
    return reply(
        _admin_reply(
            request,
            decision,
            broker=to_plain(record) if record is not None else None,
            leaderships=[to_plain(tp) for tp in image.leaderships(broker_id)],
        )
    )


async def drain_broker(request: web.Request) -> web.Response:
    """Controlled shutdown (KIP-841): leaderships move away; `leaderships` lists what is left."""
    return await _broker_change(request, lambda b: DrainBroker(broker_id=b))


async def undrain_broker(request: web.Request) -> web.Response:
    return await _broker_change(request, lambda b: UndrainBroker(broker_id=b))


async def unregister_broker(request: web.Request) -> web.Response:
    return await _broker_change(request, lambda b: UnregisterBroker(broker_id=b))


async def allocate_producer_ids(request: web.Request) -> web.Response:
    """AllocateProducerIds (KIP-730): the next block, saved before it is answered."""
    body: AllocateProducerIdsRequest = await _body(request, AllocateProducerIdsRequest)
    _require_self(request, body.broker_id)
    decision = await _run(request, AllocateProducerIds(broker_id=body.broker_id, broker_epoch=body.broker_epoch))
    block = next(a for a in decision.actions if isinstance(a, ProducerIdsAllocated))
    return reply(
        {
            "broker_id": block.broker_id,
            "producer_id_start": block.producer_id_start,
            "producer_id_len": block.producer_id_len,
        }
    )


# -- partitions ----------------------------------------------------------------


async def alter_partition(request: web.Request) -> web.Response:
    """A leader's ISR change (KIP-497), accepted only with the current epochs."""
    body: AlterPartitionRequest = await _body(request, AlterPartitionRequest)
    _require_self(request, body.broker_id)
    decision = await _run(
        request,
        AlterPartition(
            broker_id=body.broker_id,
            broker_epoch=body.broker_epoch,
            topic=body.topic,
            partition=body.partition,
            leader_epoch=body.leader_epoch,
            partition_epoch=body.partition_epoch,
            isr=body.isr,
            leader_recovery_state=body.leader_recovery_state,
        ),
    )
    image = decision.state.image
    record = image.partition(body.topic, body.partition)
    assert record is not None  # accepted, so it exists
    return reply({"topic": body.topic, **to_plain(record), "metadata_version": image.version})


async def elect_preferred_leaders(request: web.Request) -> web.Response:
    # A broker forwards its clients' ElectLeaders (their ACL checked there). A preferred election
    # only gives leadership back to an in-sync first replica, which the controller also does
    # on its own every leader.imbalance.check.interval: nothing a broker could abuse.
    _require_broker_or_admin(request)
    body: ElectLeadersRequest = await _body(request, ElectLeadersRequest)
    decision = await _run(request, ElectPreferredLeaders(partitions=body.partitions))
    changed = [a.to_dict() for a in decision.actions if isinstance(a, LeaderChanged)]
    return reply(_admin_reply(request, decision, leaders_changed=changed))


async def reassign_partitions(request: web.Request) -> web.Response:
    # A broker forwards its clients' AlterPartitionReassignments (ALTER on the cluster checked there).
    # A move keeps every copy until its replacement is in sync, and a broker may already delete
    # whole topics: nothing here a broker could abuse that it could not do more simply.
    _require_broker_or_admin(request)
    body: ReassignRequest = await _body(request, ReassignRequest)
    decision = await _run(request, ReassignPartitions(assignments=body.assignments))
    image = decision.state.image
    partitions = []
    for a in body.assignments:
        record = image.partition(a.topic, a.partition)
        if record is not None:
            partitions.append({"topic": a.topic, **to_plain(record)})
    return reply(_admin_reply(request, decision, partitions=partitions))


# -- rebalance (operator/controller/rebalance) ----------------------------------
# Admin only: a plan over the whole cluster is no client request a broker forwards. Stateless: the caller
# (the CLI, or the operator with the proposal in a TinyStreamRebalance's status) sends the reviewed moves.


async def rebalance_proposal(request: web.Request) -> web.Response:
    _require_admin(request)
    body: RebalanceProposalRequest = await _body(request, RebalanceProposalRequest)
    sizes = {(s.topic, s.partition): s.size_bytes for s in body.sizes}
    try:
        proposal = await rebalancing.proposal(_service(request), body.mode, body.brokers, sizes)
    except ValueError as exc:
        raise ApiError.bad_request(f"{_where(request)}: {exc}") from None
    except PlacementError as exc:
        raise ApiError.from_controller(exc.error, f"{_where(request)}: {exc.message}") from None
    return reply({"proposal": proposal.to_dict(), "sizes_measured": len(sizes),
                  "metadata_version": _service(request).image.version})


def _moves(body: RebalanceMovesRequest) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(a.topic, a.partition): a.replicas for a in body.assignments if a.replicas is not None}


def _submitter(request: web.Request) -> rebalancing.Submit:
    async def submit(event: Event, *, validate_only: bool = False) -> Decision:
        return await _run(request, event, validate_only=validate_only)
    return submit


def _progress(request: web.Request, progress: rebalancing.Progress, *, topics_key: str) -> web.Response:
    def keys(items: tuple[tuple[str, int], ...]) -> list[dict[str, Any]]:
        return [{"topic": t, "partition": p} for t, p in items]

    return reply({"remaining": keys(progress.remaining), "done": progress.done, topics_key: list(progress.topics),
                  "cancelled": keys(progress.cancelled), "rate_brokers": list(progress.rate_brokers),
                  "metadata_version": _service(request).image.version})


def _rate(request: web.Request, body: RebalanceMovesRequest) -> int | None:
    try:
        rebalancing.check_rate(body.throttle_rate)
    except ValueError as exc:
        raise ApiError.bad_request(f"{_where(request)}: {exc}") from None
    return body.throttle_rate


async def rebalance_execute(request: web.Request) -> web.Response:
    _require_admin(request)
    body: RebalanceMovesRequest = await _body(request, RebalanceMovesRequest)
    progress = await rebalancing.execute(_service(request), _submitter(request), _moves(body), throttle=body.throttle,
                                         rate=_rate(request, body))
    return _progress(request, progress, topics_key="throttled_topics")


async def rebalance_verify(request: web.Request) -> web.Response:
    """kafka-reassign-partitions --verify: what is left; once nothing is, the throttles go and the moved
    partitions' preferred leaders (the proposal's leader moves) are elected."""
    _require_admin(request)
    body: RebalanceMovesRequest = await _body(request, RebalanceMovesRequest)
    progress = await rebalancing.verify(_service(request), _submitter(request), _moves(body),
                                        rate=_rate(request, body))
    return _progress(request, progress, topics_key="unthrottled_topics")


async def rebalance_stop(request: web.Request) -> web.Response:
    """Cancel the moves still running (KIP-455: back to the original replicas) and take the throttles out;
    moves already done stay done."""
    _require_admin(request)
    body: RebalanceMovesRequest = await _body(request, RebalanceMovesRequest)
    progress = await rebalancing.stop(_service(request), _submitter(request), _moves(body),
                                      rate=_rate(request, body))
    return _progress(request, progress, topics_key="unthrottled_topics")


# -- topics --------------------------------------------------------------------


def _topic_name(request: web.Request) -> str:
    return request.match_info["name"]


def _topic_reply(
    request: web.Request, decision: Decision, name: str, *, validate_only: bool, status: int = 200
) -> web.Response:
    topic = decision.state.image.topic(name)
    return reply(
        _admin_reply(request, decision, validate_only=validate_only, topic=to_plain(topic) if topic else None),
        status=status,
    )


async def create_topic(request: web.Request) -> web.Response:
    _require_broker_or_admin(request)
    body: CreateTopicRequest = await _body(request, CreateTopicRequest)
    event = CreateTopic(
        topic=body.name,
        partitions=default_if_negative_one(body.partitions),
        replication_factor=default_if_negative_one(body.replication_factor),
        config=body.config,
        replica_assignment=body.replica_assignment,
    )
    decision = await _run(request, event, validate_only=body.validate_only)
    status = 200 if body.validate_only else 201
    return _topic_reply(request, decision, body.name, validate_only=body.validate_only, status=status)


async def describe_topic(request: web.Request) -> web.Response:
    name = _topic_name(request)
    topic = _service(request).image.topic(name)
    if topic is None:
        raise ApiError.from_controller(ControllerError.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return reply({"topic": to_plain(topic), "metadata_version": _service(request).image.version})


async def delete_topic(request: web.Request) -> web.Response:
    name = _topic_name(request)
    _require_broker_or_admin(request)
    await _body(request, EmptyRequest)
    decision = await _run(request, DeleteTopic(topic=name))
    return reply(_admin_reply(request, decision, name=name))


async def create_partitions(request: web.Request) -> web.Response:
    name = _topic_name(request)
    _require_broker_or_admin(request)
    body: CreatePartitionsRequest = await _body(request, CreatePartitionsRequest)
    event = CreatePartitions(topic=name, count=body.count, replica_assignment=body.replica_assignment)
    decision = await _run(request, event, validate_only=body.validate_only)
    return _topic_reply(request, decision, name, validate_only=body.validate_only)


async def alter_topic_config(request: web.Request) -> web.Response:
    name = _topic_name(request)
    _require_broker_or_admin(request)
    body: AlterConfigRequest = await _body(request, AlterConfigRequest)
    event = AlterTopicConfig(topic=name, config=body.config, replace=body.replace)
    decision = await _run(request, event, validate_only=body.validate_only)
    return _topic_reply(request, decision, name, validate_only=body.validate_only)


# -- access: ACLs and SCRAM credentials (cluster metadata, KRaft's AccessControlEntryRecord) -----------------


async def create_acls(request: web.Request) -> web.Response:
    _require_access_admin(request)
    body: CreateAclsRequest = await _body(request, CreateAclsRequest)
    decision = await _run(request, CreateAcls(acls=body.acls))
    return reply(_admin_reply(request, decision))


async def delete_acls(request: web.Request) -> web.Response:
    _require_access_admin(request)
    body: DeleteAclsRequest = await _body(request, DeleteAclsRequest)
    decision = await _run(request, DeleteAcls(filters=body.filters))
    deleted = next(a for a in decision.actions if isinstance(a, AclsDeleted))
    return reply(_admin_reply(request, decision, matched=to_plain(deleted.matched)))


async def alter_scram_credentials(request: web.Request) -> web.Response:
    _require_access_admin(request)
    body: AlterScramRequest = await _body(request, AlterScramRequest)
    decision = await _run(request, AlterScramCredentials(upsertions=body.upsertions, deletions=body.deletions))
    return reply(_admin_reply(request, decision))


# -- client quotas (cluster metadata, KRaft's ClientQuotaRecord) -----------------------------------------------


async def alter_client_quotas(request: web.Request) -> web.Response:
    # A broker forwards its clients' AlterClientQuotas (ALTER_CONFIGS on the cluster checked there), the
    # operator sets a TinyStreamUser's spec.quotas as the admin. A quota only slows clients down; a broker
    # can already delete whole topics, so nothing here a broker could abuse more than that.
    _require_broker_or_admin(request)
    body: AlterClientQuotasRequest = await _body(request, AlterClientQuotasRequest)
    decision = await _run(request, AlterClientQuotas(alterations=body.alterations), validate_only=body.validate_only)
    return reply(_admin_reply(request, decision, validate_only=body.validate_only))


# -- dynamic broker configs (cluster metadata, KRaft's ConfigRecord on BROKER resources) -----------------------


async def alter_broker_configs(request: web.Request) -> web.Response:
    # A broker forwards its clients' IncrementalAlterConfigs on BROKER resources (ALTER_CONFIGS on the cluster
    # checked there), the admin may set them directly. The keys are the few that change live (log defaults,
    # connection limits, replication throttles): nothing a broker could not already do to its own topics.
    _require_broker_or_admin(request)
    body: AlterBrokerConfigsRequest = await _body(request, AlterBrokerConfigsRequest)
    decision = await _run(request, AlterBrokerConfigs(alterations=body.alterations), validate_only=body.validate_only)
    return reply(_admin_reply(request, decision, validate_only=body.validate_only))
