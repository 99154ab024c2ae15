"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554).

Who may: DESCRIBE on the CLUSTER to describe, ALTER on it to alter; a
refusal is CLUSTER_AUTHORIZATION_FAILED (per user for Alter, top level for
Describe). The client sends a salt and the salted password (never the
password); this broker derives StoredKey and ServerKey (RFC 5802) and stores
only those, through `ctx.access` (the controller's image, replicated to every
broker; a broker without a controller: its access.json). Per user, as Kafka:
an unknown mechanism is UNSUPPORTED_SASL_MECHANISM, iterations outside
[4096, 16384] or an empty salt/password UNACCEPTABLE_CREDENTIAL, a user named
twice DUPLICATE_RESOURCE, deleting a credential that does not exist
RESOURCE_NOT_FOUND. The inter-broker user is the brokers' own: altering it
is UNACCEPTABLE_CREDENTIAL, and its file credential is the only one a broker
takes (UserStore.file_only), so no client can log in as a broker.
Describe shows mechanisms and iterations only.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.scram_users import MIN_ITERATIONS, ScramCredential

# Kafka's ScramMechanism ids.
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS = {name: i for i, name in MECHANISMS.items()}
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism maximum
_HASH = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


def derive(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    """RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    digest = _HASH[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(salt, digest(client_key).digest(), server_key, iterations)


async def handle_describe_user_scram_credentials(ctx: BrokerContext, call: Call) -> Any:
    if not authz.allowed_cluster(ctx, call, AclOperation.DESCRIBE):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.cluster_authorization_failed,
                            error_message="DESCRIBE on the cluster is not allowed", results=())
    users = ctx.users
    asked = call.body.users
    names = [u.name for u in asked] if asked is not None else (users.user_names() if users else [])
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        creds = users.mechanisms_of(name) if users else {}
        if counts[name] > 1:
            error, message = ErrorCode.duplicate_resource, f"user {name!r} is named more than once"
        elif not creds:
            error, message = ErrorCode.resource_not_found, f"user {name!r} has no SCRAM credentials"
        else:
            error, message = ErrorCode.none, None
        infos = tuple(call.make("CredentialInfo", mechanism=MECHANISM_IDS[m], iterations=c.iterations)
                      for m, c in sorted(creds.items())) if error == ErrorCode.none else ()
        results.append(call.make("DescribeUserScramCredentialsResult", user=name, error_code=error,
                                 error_message=message, credential_infos=infos))
    return call.respond(throttle_time=millis(0), error_code=ErrorCode.none, error_message=None,
                        results=tuple(results))


async def handle_alter_user_scram_credentials(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    names = [d.name for d in body.deletions] + [u.name for u in body.upsertions]
    errors: dict[str, tuple[ErrorCode, str]] = {}
    if not authz.allowed_cluster(ctx, call, AclOperation.ALTER):
        errors = dict.fromkeys(names, (ErrorCode.cluster_authorization_failed, "ALTER on the cluster is not allowed"))
    keys = Counter((d.name, d.mechanism) for d in body.deletions) + Counter((u.name, u.mechanism)
                                                                             for u in body.upsertions)
    for (name, _), count in keys.items():
        if count > 1:
            errors.setdefault(name, (ErrorCode.duplicate_resource, f"user {name!r} names a mechanism twice"))
    protected = ctx.users.file_only
    for name in names:
        if name in protected:
            errors.setdefault(name, (ErrorCode.unacceptable_credential, f"user {name!r} is the brokers' own "
                                     "(inter.broker.sasl.username): its credential is set in the users file"))
    deletions: list[tuple[str, str]] = []
    for d in body.deletions:
        mechanism = MECHANISMS.get(d.mechanism)
        if mechanism is None:
            errors.setdefault(d.name, (ErrorCode.unsupported_sasl_mechanism, f"unknown mechanism {d.mechanism}"))
        elif ctx.users.replicated.get(d.name, {}).get(mechanism) is None:
            errors.setdefault(d.name, (ErrorCode.resource_not_found,
                                       f"user {d.name!r} has no {mechanism} credential to delete"))
        else:
            deletions.append((d.name, mechanism))
    upsertions: list[tuple[str, dict[str, Any]]] = []
    for u in body.upsertions:
        mechanism = MECHANISMS.get(u.mechanism)
        if mechanism is None:
            errors.setdefault(u.name, (ErrorCode.unsupported_sasl_mechanism, f"unknown mechanism {u.mechanism}"))
        elif not u.name or "," in u.name or "=" in u.name:
            errors.setdefault(u.name, (ErrorCode.unacceptable_credential, "a user name is non-empty without ',' or '='"))
        elif not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            errors.setdefault(u.name, (ErrorCode.unacceptable_credential,
                                       f"iterations must be within [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"))
        elif not u.salt or not u.salted_password:
            errors.setdefault(u.name, (ErrorCode.unacceptable_credential, "the salt and salted password are required"))
        else:
            credential = derive(mechanism, u.salt, u.salted_password, u.iterations)
            upsertions.append((u.name, {"user": u.name, "mechanism": mechanism, **credential.to_json()}))
    ok_deletions = [(n, m) for n, m in deletions if n not in errors]
    ok_upsertions = [record for n, record in upsertions if n not in errors]
    if ok_deletions or ok_upsertions:
        outcome = await ctx.access.alter_scram(ok_upsertions, ok_deletions)
        if outcome.error != ErrorCode.none:
            for n in {n for n, _ in ok_deletions} | {r["user"] for r in ok_upsertions}:
                errors[n] = (outcome.error, outcome.message or outcome.error.name)
    results = tuple(
        call.make("AlterUserScramCredentialsResult", user=name, error_code=errors.get(name, (ErrorCode.none,))[0],
                  error_message=errors[name][1] if name in errors else None)
        for name in dict.fromkeys(names)
    )
    return call.respond(throttle_time=millis(0), results=results)
