"""ACLs and SCRAM credentials: where CreateAcls, DeleteAcls and AlterUserScramCredentials take effect.

Under a controller (`controller.url`) they are cluster metadata, as in KRaft:
`ForwardedAccessAdmin` sends them to the controller (`/v1/acls`,
`/v1/acls/delete`, `/v1/scram-credentials`) and answers once this broker has
applied the image that holds them; every broker applies the same image
(`security.access_records.apply_access`, called by `image.ImageApplier`), so all agree.

A broker without a controller (a single-node test or laptop broker) keeps them
in `<metadata dir>/access.json`, in the image's own shape
({"acls": [...], "scram_credentials": [...]}), written atomically
(`LocalAccessAdmin`); it survives a restart of that broker and applies the
same way. Both checks bindings with `tinystream.acls` before anything is
stored; the handlers have already checked the caller may (ALTER on CLUSTER).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tinystream.acls import AclBinding, AclBindingFilter
from tinystream.atomic_file import write_atomically
from tinystream.broker.control.forwarding import error_code
from tinystream.broker.control.session import ControllerSession
from tinystream.broker.errors import ErrorCode
from tinystream.broker.security.access_records import apply_access
from tinystream.broker.security.authorizer import Authorizer
from tinystream.controller_client import ControllerClient, ControllerClientError
from tinystream.scram_users import ScramCredential, UserStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AccessResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    matched: tuple[tuple[AclBinding, ...], ...] = ()  # DeleteAcls: per filter, what it removed


def scram_record(user: str, mechanism: str, credential: ScramCredential) -> dict[str, Any]:
    return {"user": user, "mechanism": mechanism, **credential.to_json()}


class AccessAdmin(Protocol):
    async def create_acls(self, acls: Sequence[AclBinding]) -> AccessResult: ...

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> AccessResult: ...

    async def alter_scram(self, upsertions: Sequence[dict[str, Any]],
                          deletions: Sequence[tuple[str, str]]) -> AccessResult: ...


class ForwardedAccessAdmin:
    """Changes go to the controller; answered once this broker applied them."""

    def __init__(self, *, controller: ControllerClient, session: ControllerSession) -> None:
        self.controller = controller
        self.session = session

    async def _done(self, version: int) -> AccessResult:
        if not await self.session.wait_for_version(version):
            return AccessResult(ErrorCode.request_timed_out, "the change did not reach this broker in time")
        return AccessResult()

    async def create_acls(self, acls: Sequence[AclBinding]) -> AccessResult:
        try:
            reply = await self.controller.create_acls([a.to_dict() for a in acls])
        except ControllerClientError as exc:
            return AccessResult(error_code(exc), exc.message)
        return await self._done(reply.metadata_version)

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> AccessResult:
        try:
            reply = await self.controller.delete_acls([f.to_dict() for f in filters])
        except ControllerClientError as exc:
            return AccessResult(error_code(exc), exc.message)
        done = await self._done(reply.metadata_version)
        matched = tuple(tuple(AclBinding.from_dict(dict(a)) for a in m) for m in reply.matched)
        return AccessResult(done.error, done.message, matched)

    async def alter_scram(self, upsertions: Sequence[dict[str, Any]],
                          deletions: Sequence[tuple[str, str]]) -> AccessResult:
        try:
            reply = await self.controller.alter_scram_credentials(
                upsertions=upsertions, deletions=[{"user": u, "mechanism": m} for u, m in deletions])
        except ControllerClientError as exc:
            return AccessResult(error_code(exc), exc.message)
        return await self._done(reply.metadata_version)


class LocalAccessAdmin:
    """A broker without a controller: ACLs and credentials in `<metadata dir>/access.json`."""

    FILE = "access.json"

    def __init__(self, metadata_dir: str | Path, *, authorizer: Authorizer | None, users: UserStore | None) -> None:
        self.path = Path(metadata_dir) / self.FILE
        self.authorizer = authorizer
        self.users = users
        self.state: dict[str, list[dict[str, Any]]] = {"acls": [], "scram_credentials": []}
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text())
                self.state = {"acls": list(data.get("acls", ())),
                              "scram_credentials": list(data.get("scram_credentials", ()))}
            except (ValueError, AttributeError, TypeError) as exc:
                raise ValueError(f"{self.path}: not an ACL and credential file ({exc}); fix or remove it") from exc
        apply_access(self.state, authorizer=authorizer, users=users)

    def _save(self) -> None:
        payload = json.dumps(self.state, indent=1).encode()
        write_atomically(self.path, payload, durable=False, mode=0o600)  # salted keys: owner only
        apply_access(self.state, authorizer=self.authorizer, users=self.users)

    def _acls(self) -> list[AclBinding]:
        return [AclBinding.from_dict(a) for a in self.state["acls"]]

    async def create_acls(self, acls: Sequence[AclBinding]) -> AccessResult:
        merged = sorted(set(self._acls()) | set(acls))
        self.state["acls"] = [a.to_dict() for a in merged]
        self._save()
        return AccessResult()

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> AccessResult:
        current = self._acls()
        matched = tuple(tuple(a for a in current if f.matches(a)) for f in filters)
        gone = {a for m in matched for a in m}
        self.state["acls"] = [a.to_dict() for a in current if a not in gone]
        self._save()
        return AccessResult(matched=matched)

    async def alter_scram(self, upsertions: Sequence[dict[str, Any]],
                          deletions: Sequence[tuple[str, str]]) -> AccessResult:
        current = {(c["user"], c["mechanism"]): c for c in self.state["scram_credentials"]}
        for user, mechanism in deletions:
            if current.pop((user, mechanism), None) is None:
                return AccessResult(ErrorCode.resource_not_found, f"user {user!r} has no {mechanism} credential")
        for u in upsertions:
            current[(u["user"], u["mechanism"])] = dict(u)
        self.state["scram_credentials"] = [current[k] for k in sorted(current)]
        self._save()
        return AccessResult()
