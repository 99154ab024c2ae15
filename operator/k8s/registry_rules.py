"""The registry's per-subject rules on Kubernetes, derived from the TinyStreamUsers' topic ACLs (pure).

A cluster with authorization (spec.authorization, on by default) gives its
registry a rules file (tinystream/registry/authz.py's format) in the users
Secret, next to users.json. Nothing new to write: a user's rights on subjects
follow its ACLs on the topic the subject is named after, as Confluent's Topic
ACL Authorizer (SimpleTopicAclAuthorizer) does, with TopicNameStrategy's
subject names `<topic>-key` and `<topic>-value`:

    topic ACL (allow)        subject rule                        operations
    Read                     ->  READ                             get, look up, check compatibility
    Write, All               ->  WRITE (implies READ)             register, soft-delete, subject config/mode
    literal  orders          ->  LITERAL orders-key, orders-value
    literal  *               ->  every subject ("*")
    prefix   orders          ->  PREFIXED orders  (orders-value, orders.eu-key, ...)

Admins (global config and mode, hard deletes): the cluster's super users and
the operator's own login (it registers TinyStreamSchemas). Describe, Create
and the other operations give nothing (Confluent's table needs Read or Write).

Fail closed where the rules file cannot say what the ACLs say: it has no
deny and no host, so an allow limited to a host gives nothing, and a user with
a deny ACL on topics loses what that deny could take: Read or All denied
anywhere -> no rules at all, Write denied anywhere -> its WRITE rules become READ.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tinystream.operator.k8s.model import UserAcl, UserSpec

WILDCARD = "*"
_READ, _WRITE = "READ", "WRITE"
_GRANTS = {"Read": _READ, "Write": _WRITE, "All": _WRITE}  # Kafka's topic operation -> the subject's


def _subjects(acl: UserAcl) -> list[tuple[str, str]]:
    """(subject, LITERAL|PREFIXED) a topic ACL's resource stands for (TopicNameStrategy)."""
    if acl.pattern_type == "prefix":
        return [(acl.name, "PREFIXED")] if acl.name else [(WILDCARD, "LITERAL")]
    if acl.name == WILDCARD:
        return [(WILDCARD, "LITERAL")]
    return [(f"{acl.name}-key", "LITERAL"), (f"{acl.name}-value", "LITERAL")]


def _operation(acl: UserAcl) -> str | None:
    """The subject operation an allow ACL grants: WRITE over READ; None when it grants neither."""
    granted = {_GRANTS[o] for o in acl.operations if o in _GRANTS}
    return _WRITE if _WRITE in granted else _READ if granted else None


def user_rules(user: UserSpec) -> list[dict[str, Any]]:
    """One user's rules, fail-closed for denies and host-limited allows (see the module docstring)."""
    topics = [acl for acl in user.acls if acl.resource_type == "topic"]
    denied = {o for acl in topics if not acl.allow for o in acl.operations}
    if denied & {"Read", "All"}:
        return []
    rules: dict[tuple[str, str], str] = {}
    for acl in topics:
        operation = _operation(acl) if acl.allow and acl.host == WILDCARD else None
        if operation is None:
            continue
        if operation == _WRITE and "Write" in denied:
            operation = _READ
        for subject, pattern in _subjects(acl):
            if rules.get((subject, pattern)) != _WRITE:
                rules[(subject, pattern)] = operation
    return [{"principal": user.principal, "subject": subject, "pattern": pattern, "operations": [operation]}
            for (subject, pattern), operation in sorted(rules.items())]


def subject_rules(users: Iterable[UserSpec], *, admins: Iterable[str]) -> dict[str, Any]:
    """The rules file's content for the cluster's users (sorted: the same users give the same bytes)."""
    rules = [rule for user in sorted(users, key=lambda u: u.name) for rule in user_rules(user)]
    return {"admins": sorted(set(admins)), "rules": rules}


def rules_json(users: Iterable[UserSpec], *, admins: Iterable[str]) -> str:
    return json.dumps(subject_rules(users, admins=admins), indent=1, sort_keys=True)
