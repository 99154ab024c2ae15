"""Confluent Schema Registry REST API v1 over aiohttp: routes that read the state or plan, write, answer.

Every write goes through one lock: plan against the state, write the records
to `_schemas`, wait until they are applied, answer from the state. Errors are
RegistryError, answered as Confluent's `{"error_code", "message"}`; bodies
above `max_body_bytes` get 413; with `auth` set, every route answers
401 without valid Basic credentials (after `failed_login_delay` for a wrong
password); with `certificates` too, a verified client certificate is a login
when the call sends no Authorization header (Basic, when sent, decides); with
`rules` 403 (40301) to a call `required` says the user may not make. At most `max_concurrent` requests are handled at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tinystream.registry import protobuf_parse
from tinystream.registry.auth import BasicAuth, CertificateAuth
from tinystream.registry.authz import Operation, RulesFile, allowed
from tinystream.registry.compatibility import compact
from tinystream.registry.election import is_write
from tinystream.registry.errors import ErrorCode, RegistryError
from tinystream.registry.forward import Forwarder
from tinystream.registry.model import Reference, SchemaDef, SchemaType, SubjectVersion
from tinystream.registry.normalize import normalize
from tinystream.registry.records import Record
from tinystream.registry.state import RegistryState, parse_version
from tinystream.registry.store import SchemaLog

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_MAX_BODY = 1024 * 1024  # bytes; a schema is text, Confluent's own limit is the servlet's (a few MB)
DEFAULT_MAX_CONCURRENT = 64  # requests handled at once; more wait their turn (the event loop stays fair)
DEFAULT_FAILED_LOGIN_DELAY = 1.0  # seconds before a wrong password's 401: guessing costs time, others are not held
_REGISTER_ATTEMPTS = 3  # an id race with another instance is retried with the state that won

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


_USER = web.RequestKey("user", str)  # the logged-in user (with a users file or client certificates)
_BY_CERTIFICATE = web.RequestKey("by_certificate", bool)  # logged in by a client certificate (mTLS)
Rights = Callable[[Operation, "str | None"], bool]
_MAY: web.RequestKey[Rights] = web.RequestKey("may")  # the caller's rights (with a rules file)


def _may(request: web.Request, operation: Operation, subject: str | None) -> bool:
    """The caller's rights (set by the middleware; without rules, everything)."""
    check = request.get(_MAY)
    return True if check is None else check(operation, subject)


def _user(request: web.Request) -> str | None:
    return request.get(_USER)


def required(method: str, route: str, match: dict[str, str], query: dict[str, str]) -> tuple[Operation, str | None] | None:
    """What a call needs: (operation, subject; None = the registry), or None when any logged-in user may.

    /schemas/ids/... is decided by the handler (any subject the id is under); GET /subjects filters its answer.
    """
    subject = match.get("subject")
    if route.startswith(("/config", "/mode")):
        if method == "GET":
            return None if subject is None else (Operation.READ, subject)
        return (Operation.ADMIN, None) if subject is None else (Operation.WRITE, subject)
    if subject is None:
        return None
    if method == "DELETE":
        permanent = query.get("permanent", "false").lower() == "true"
        return (Operation.ADMIN, None) if permanent else (Operation.WRITE, subject)
    if method == "POST" and route == "/subjects/{subject}/versions":
        return Operation.WRITE, subject
    return Operation.READ, subject


class RegistryApi:
    def __init__(self, state: RegistryState, store: SchemaLog) -> None:
        self.state = state
        self.store = store
        self._writing = asyncio.Lock()

    async def _write(self, plan: Callable[[], list[Record]]) -> None:
        async with self._writing:
            await self.store.write(plan())

    @staticmethod
    async def _body(request: web.Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError:
            raise RegistryError(ErrorCode.UNPROCESSABLE, "Request body is not JSON") from None
        if not isinstance(body, dict):
            raise RegistryError(ErrorCode.UNPROCESSABLE, "Request body must be a JSON object")
        return body

    @staticmethod
    def _schema_of(body: dict[str, Any]) -> SchemaDef:
        text = body.get("schema")
        if not isinstance(text, str):
            raise RegistryError(ErrorCode.INVALID_SCHEMA, "Invalid schema: the body needs a \"schema\" string")
        try:
            schema_type = SchemaType(body.get("schemaType") or "AVRO")
            references = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
        except (ValueError, KeyError, TypeError) as exc:
            raise RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: {exc}") from None
        if any(r.version < 1 for r in references):
            raise RegistryError(ErrorCode.INVALID_SCHEMA, "Invalid schema: a reference names a version from 1")
        return SchemaDef(schema_type, compact(text, schema_type), references)

    def _normalized(self, request: web.Request, subject: str, schema: SchemaDef) -> SchemaDef:
        """The schema in canonical form when `?normalize=true` or the subject's config says so, else as given."""
        if not (_flag(request, "normalize") or self.state.normalizes(subject)):
            return schema
        return SchemaDef(schema.schema_type, normalize(schema.text, schema.schema_type), schema.references)

    def _text(self, schema_id: int, schema: SchemaDef, fmt: str | None) -> str:
        """The schema's text; `format=serialized` asks a Protobuf one as a base64 FileDescriptorProto."""
        if schema.schema_type is not SchemaType.PROTOBUF or fmt != "serialized" or protobuf_parse.as_descriptor(schema.text):
            return schema.text
        return protobuf_parse.serialized(self.state.parsed(schema, schema_id).parsed)

    def _raw(self, schema: SchemaDef) -> web.Response:
        """`.../schema`: the schema itself (JSON for Avro and JSON Schema, the text for Protobuf)."""
        if schema.schema_type is SchemaType.PROTOBUF:
            return web.Response(text=schema.text, content_type=CONTENT_TYPE)
        return answer(json.loads(schema.text))

    def _schema_body(self, schema_id: int, schema: SchemaDef, fmt: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self._text(schema_id, schema, fmt)}
        if schema.schema_type is not SchemaType.AVRO:
            body["schemaType"] = schema.schema_type.value
        if schema.references:
            body["references"] = [r.to_json() for r in schema.references]
        return body

    def _version_body(self, found: SubjectVersion, fmt: str | None = None) -> dict[str, Any]:
        schema = self.state.schemas[found.schema_id]
        body = {"subject": found.subject, "version": found.version, "id": found.schema_id}
        return {**body, **self._schema_body(found.schema_id, schema, fmt)}

    # -- schemas ----------------------------------------------------------------------------
    async def root(self, request: web.Request) -> web.Response:
        return answer({})

    async def schema_types(self, request: web.Request) -> web.Response:
        return answer([t.value for t in SchemaType])

    def _id(self, request: web.Request) -> int:
        """The id in the URL; the caller must be allowed to read a subject it is registered under."""
        try:
            schema_id = int(request.match_info["id"])
        except ValueError:
            raise RegistryError(ErrorCode.SCHEMA_NOT_FOUND, "Schema not found") from None
        uses = self.state.uses_of(schema_id, deleted=True)
        if not any(_may(request, Operation.READ, use.subject) for use in uses):
            raise forbidden(_user(request), Operation.READ, f"the subjects of schema {schema_id}")
        return schema_id

    async def schema_by_id(self, request: web.Request) -> web.Response:
        schema_id = self._id(request)
        return answer(self._schema_body(schema_id, self.state.schema(schema_id), request.query.get("format")))

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        return self._raw(self.state.schema(self._id(request)))

    async def subjects_of_id(self, request: web.Request) -> web.Response:
        uses = self.state.uses_of(self._id(request), deleted=_flag(request, "deleted"))
        return answer(sorted({v.subject for v in uses if _may(request, Operation.READ, v.subject)}))

    async def versions_of_id(self, request: web.Request) -> web.Response:
        uses = self.state.uses_of(self._id(request), deleted=_flag(request, "deleted"))
        return answer([{"subject": v.subject, "version": v.version} for v in uses
                       if _may(request, Operation.READ, v.subject)])

    # -- subjects ---------------------------------------------------------------------------
    async def subjects(self, request: web.Request) -> web.Response:
        names = self.state.subject_names(deleted=_flag(request, "deleted"))
        return answer([name for name in names if _may(request, Operation.READ, name)])

    async def versions(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        return answer([v.version for v in self.state.versions(subject, deleted=_flag(request, "deleted"))])

    async def register(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        body = await self._body(request)
        given = self._schema_of(body)
        schema = self._normalized(request, subject, given)
        given_id, given_version = body.get("id"), body.get("version")
        if given_id is not None and (not isinstance(given_id, int) or isinstance(given_id, bool) or given_id < 1):
            raise RegistryError(ErrorCode.INVALID_SCHEMA, "Invalid schema: \"id\" is a number from 1")
        for _ in range(_REGISTER_ATTEMPTS):
            async with self._writing:
                plan = self.state.plan_register(subject, schema, schema_id=given_id, owner=_user(request),
                                                normalized=schema is not given,
                                                version=None if given_version is None else parse_version(given_version))
                await self.store.write(plan.records)
            try:
                return answer({"id": self.state.lookup(subject, schema).schema_id})
            except RegistryError:
                continue  # another instance took the id first; plan again on the state that won
        raise RegistryError(ErrorCode.STORE_ERROR, "Could not register the schema: ids kept racing")

    async def version(self, request: web.Request) -> web.Response:
        subject, version = request.match_info["subject"], request.match_info["version"]
        found = self.state.version(subject, version, deleted=_flag(request, "deleted"))
        return answer(self._version_body(found, request.query.get("format")))

    async def version_schema(self, request: web.Request) -> web.Response:
        found = self.state.version(request.match_info["subject"], request.match_info["version"],
                                   deleted=_flag(request, "deleted"))
        return self._raw(self.state.schemas[found.schema_id])

    async def referenced_by(self, request: web.Request) -> web.Response:
        found = self.state.version(request.match_info["subject"], request.match_info["version"])
        return answer(self.state.referenced_by(found.subject, found.version))

    async def delete_version(self, request: web.Request) -> web.Response:
        subject, version = request.match_info["subject"], request.match_info["version"]
        async with self._writing:
            number, records = self.state.plan_delete_version(subject, version, permanent=_flag(request, "permanent"))
            await self.store.write(records)
        return answer(number)

    async def lookup(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        given = self._schema_of(await self._body(request))
        schema = self._normalized(request, subject, given)
        self.state.parsed(schema)
        found = self.state.lookup(subject, schema, deleted=_flag(request, "deleted"), normalized=schema is not given)
        return answer(self._version_body(found))

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        async with self._writing:
            versions, records = self.state.plan_delete_subject(subject, permanent=_flag(request, "permanent"))
            await self.store.write(records)
        return answer(versions)

    # -- config and mode --------------------------------------------------------------------
    def _subject_setting(self, request: web.Request, table: dict[str | None, Any], code: ErrorCode,
                         what: str) -> Any:
        subject = request.match_info.get("subject")
        if subject is not None and subject not in table and not _flag(request, "defaultToGlobal"):
            raise RegistryError(code, f"Subject '{subject}' does not have subject-level {what} configured")
        return table.get(subject, table[None])

    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        configured = subject in self.state.configs or subject in self.state.normalize
        if subject is not None and not configured and not _flag(request, "defaultToGlobal"):
            raise RegistryError(ErrorCode.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                                f"Subject '{subject}' does not have subject-level compatibility level configured")
        body: dict[str, Any] = {"compatibilityLevel": self.state.compatibility(subject).value}
        normalize = self.state.normalize.get(subject, self.state.normalize.get(None))
        if normalize is not None:
            body["normalize"] = normalize
        return answer(body)

    async def put_config(self, request: web.Request) -> web.Response:
        """A level, `normalize`, or both; what the body leaves out stays as it was for this key."""
        subject = request.match_info.get("subject")
        body = await self._body(request)
        level = body.get("compatibility") or body.get("compatibilityLevel")  # set_config() sends the latter
        normalize = body.get("normalize")
        if level is None and normalize is None or level is not None and not isinstance(level, str):
            raise RegistryError(ErrorCode.INVALID_COMPATIBILITY_LEVEL, "Invalid compatibility level")
        if normalize is not None and not isinstance(normalize, bool):
            raise RegistryError(ErrorCode.UNPROCESSABLE, "\"normalize\" is true or false")
        if level is None and subject in self.state.configs:
            level = self.state.configs[subject].value
        if normalize is None:
            normalize = self.state.normalize.get(subject)
        chosen = None if level is None else level.upper()
        await self._write(lambda: self.state.plan_config(subject, chosen, normalize))
        reply: dict[str, Any] = {} if chosen is None else {"compatibility": chosen}
        return answer(reply if normalize is None else {**reply, "normalize": normalize})

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        before = self.state.compatibility(subject)
        if subject is None:
            default = self.state.default_compatibility.value
            await self._write(lambda: self.state.plan_config(None, default))  # the global level back to the default
        else:
            if subject not in self.state.subjects:
                raise RegistryError(ErrorCode.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
            await self._write(lambda: self.state.plan_config(subject, None))
        return answer({"compatibilityLevel": before.value})

    async def get_mode(self, request: web.Request) -> web.Response:
        mode = self._subject_setting(request, self.state.modes, ErrorCode.SUBJECT_LEVEL_MODE_NOT_CONFIGURED, "mode")
        return answer({"mode": mode.value})

    async def put_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        mode = (await self._body(request)).get("mode")
        if not isinstance(mode, str):
            raise RegistryError(ErrorCode.INVALID_MODE, "Invalid mode")
        await self._write(lambda: self.state.plan_mode(subject, mode.upper(), force=_flag(request, "force")))
        return answer({"mode": mode.upper()})

    async def delete_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        before = self.state.mode(subject)
        await self._write(lambda: self.state.plan_mode(subject, None if subject else "READWRITE"))
        return answer({"mode": before.value})

    # -- compatibility ----------------------------------------------------------------------
    async def compatibility(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        schema = self._schema_of(await self._body(request))
        version = request.match_info.get("version")
        if version is not None:
            self.state.version(subject, version)  # 40401 / 40402 / 42202 before any check
        problems = self.state.incompatibilities(subject, schema, against=version)
        body: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            body["messages"] = problems
        return answer(body)

    async def contexts(self, request: web.Request) -> web.Response:
        return answer(["."])


def forbidden(user: str | None, operation: Operation, what: str) -> RegistryError:
    """Confluent's 40301 shape, naming the user and what was refused."""
    return RegistryError(ErrorCode.FORBIDDEN, f"User '{user}' is denied operation {operation.value} on {what}")


def peer_certificate(request: web.Request) -> bytes | None:
    """The client certificate (DER) the TLS handshake verified; None over HTTP or without one."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    return ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None


def build_app(api: RegistryApi, *, auth: BasicAuth | None = None, rules: RulesFile | None = None,
              certificates: CertificateAuth | None = None,
              max_body_bytes: int = DEFAULT_MAX_BODY, max_concurrent: int = DEFAULT_MAX_CONCURRENT,
              failed_login_delay: float = DEFAULT_FAILED_LOGIN_DELAY, forwarder: Forwarder | None = None,
              ) -> web.Application:
    """The app; `rules` (needs `auth` or `certificates`) decides per subject, without it every logged-in user
    may do everything. With a `forwarder` (several instances), writes that passed those gates go to the leader."""
    if rules is not None and auth is None and certificates is None:
        raise ValueError("subject rules need a login: a users file or client certificates")
    turns = asyncio.Semaphore(max_concurrent)

    @web.middleware
    async def confluent_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        if auth is not None or certificates is not None:
            header = request.headers.get("Authorization")
            user = auth.check(header) if auth is not None else None
            if user is None and header is None and certificates is not None:
                user = certificates.check(peer_certificate(request))
                request[_BY_CERTIFICATE] = user is not None
            if user is None:
                if header is not None:
                    await asyncio.sleep(failed_login_delay)  # on this request only: other clients go on
                response = answer({"error_code": ErrorCode.UNAUTHORIZED, "message": "Unauthorized"}, 401)
                response.headers["WWW-Authenticate"] = 'Basic realm="tinystream-schema-registry"'
                return response
            request[_USER] = user
            if rules is not None:
                current, principal = rules.rules(), f"User:{user}"
                request[_MAY] = lambda op, subject: allowed(current, principal, op, subject)
        async with turns:
            return await _handle(request, handler)

    async def _handle(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            resource = request.match_info.route.resource
            route = resource.canonical if resource is not None else ""
            needs = required(request.method, route, dict(request.match_info), dict(request.query))
            if needs is not None and not _may(request, *needs):
                operation, subject = needs
                raise forbidden(_user(request), operation, "the registry" if subject is None else f"subject '{subject}'")
            if forwarder is not None and is_write(request.method, route):
                return await forwarder.route(request, route, lambda: handler(request),
                                             by_certificate=request.get(_BY_CERTIFICATE, False))
            return await handler(request)
        except RegistryError as exc:
            return answer(exc.body(), exc.code.http_status)
        except web.HTTPRequestEntityTooLarge:
            return answer({"error_code": 413, "message": f"Request body larger than {max_body_bytes} bytes"}, 413)
        except web.HTTPNotFound:
            return answer({"error_code": 404, "message": "HTTP 404 Not Found"}, 404)
        except web.HTTPMethodNotAllowed:
            return answer({"error_code": 405, "message": "HTTP 405 Method Not Allowed"}, 405)

    app = web.Application(middlewares=[confluent_errors], client_max_size=max_body_bytes)
    add_routes(app.router, api)
    return app


def add_routes(r: web.UrlDispatcher, api: RegistryApi) -> None:
    """Confluent's REST API v1, the parts clients and tools call."""
    r.add_get("/", api.root)
    r.add_get("/schemas/types", api.schema_types)
    r.add_get("/schemas/ids/{id}", api.schema_by_id)
    r.add_get("/schemas/ids/{id}/schema", api.raw_schema_by_id)
    r.add_get("/schemas/ids/{id}/subjects", api.subjects_of_id)
    r.add_get("/schemas/ids/{id}/versions", api.versions_of_id)
    r.add_get("/subjects", api.subjects)
    r.add_post("/subjects/{subject}", api.lookup)
    r.add_delete("/subjects/{subject}", api.delete_subject)
    r.add_get("/subjects/{subject}/versions", api.versions)
    r.add_post("/subjects/{subject}/versions", api.register)
    r.add_get("/subjects/{subject}/versions/{version}", api.version)
    r.add_delete("/subjects/{subject}/versions/{version}", api.delete_version)
    r.add_get("/subjects/{subject}/versions/{version}/schema", api.version_schema)
    r.add_get("/subjects/{subject}/versions/{version}/referencedby", api.referenced_by)
    for path in ("/config", "/config/{subject}"):
        r.add_get(path, api.get_config)
        r.add_put(path, api.put_config)
        r.add_delete(path, api.delete_config)
    for path in ("/mode", "/mode/{subject}"):
        r.add_get(path, api.get_mode)
        r.add_put(path, api.put_mode)
        r.add_delete(path, api.delete_mode)
    r.add_post("/compatibility/subjects/{subject}/versions/{version}", api.compatibility)
    r.add_post("/compatibility/subjects/{subject}/versions", api.compatibility)
    r.add_get("/contexts", api.contexts)
