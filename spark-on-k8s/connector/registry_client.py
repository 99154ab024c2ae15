"""A small client of a Confluent-compatible schema registry (ours or Confluent's), over HTTP.

Only what the connector needs: a schema by id (cached: ids are immutable),
a subject's latest version, and registering a schema. Errors carry the
registry's own error_code and message. Basic auth takes Confluent's
`user:password` form (`schema.registry.basic.auth.user.info`).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from tinystream.spark.errors import SchemaRegistryError

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: int
    schema_type: str  # AVRO | JSON | PROTOBUF
    schema: str  # a Protobuf schema asked with serialized=True: the base64 FileDescriptorProto
    references: tuple[tuple[str, str, int], ...] = ()  # (import name, subject, version)


class RegistryClient:
    def __init__(self, url: str, user_info: str | None = None):
        self.url = url.rstrip("/")
        self.headers = {"Accept": "application/vnd.schemaregistry.v1+json",
                        "Content-Type": "application/vnd.schemaregistry.v1+json"}
        if user_info:
            self.headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode()).decode()
        self._by_id: dict[tuple[int, bool], RegisteredSchema] = {}

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            try:
                parsed = json.loads(detail)
                detail = f"error_code {parsed.get('error_code')}: {parsed.get('message')}"
            except (ValueError, AttributeError):
                pass
            raise SchemaRegistryError(f"schema registry {self.url}: {method} {path} -> HTTP {exc.code}, {detail}") from exc
        except OSError as exc:
            raise SchemaRegistryError(f"schema registry {self.url} unreachable: {exc}") from exc

    def by_id(self, schema_id: int, *, serialized: bool = False) -> RegisteredSchema:
        """`serialized`: a Protobuf schema as its descriptor (`?format=serialized`, as confluent-kafka asks)."""
        key = (schema_id, serialized)
        found = self._by_id.get(key)
        if found is None:
            reply = self._call("GET", f"/schemas/ids/{schema_id}" + ("?format=serialized" if serialized else ""))
            found = self._by_id[key] = _registered(schema_id, reply)
        return found

    def latest(self, subject: str, *, serialized: bool = False) -> RegisteredSchema:
        return self.version(subject, "latest", serialized=serialized)

    def version(self, subject: str, version: int | str, *, serialized: bool = False) -> RegisteredSchema:
        query = "?format=serialized" if serialized else ""
        reply = self._call("GET", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}{query}")
        return _registered(int(reply["id"]), reply)

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """The schema's id under `subject` (registered when new)."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        reply = self._call("POST", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", body)
        return int(reply["id"])


def _registered(schema_id: int, reply: dict[str, Any]) -> RegisteredSchema:
    refs = tuple((str(r["name"]), str(r["subject"]), int(r["version"])) for r in reply.get("references") or ())
    return RegisteredSchema(schema_id, reply.get("schemaType", "AVRO"), reply["schema"], refs)
