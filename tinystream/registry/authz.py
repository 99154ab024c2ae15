"""Who may do what to which subject: the registry's rules file and one pure decision.

Kafka's ACLs have no SUBJECT resource (Confluent's Security Plugin keeps its
own), so the registry reads a small JSON file of its own, in Kafka's terms
(principal `User:name`, a LITERAL or PREFIXED pattern, "*" for every subject):

    {"admins": ["User:ops"],
     "rules": [{"principal": "User:orders-app", "subject": "orders-", "pattern": "PREFIXED",
                "operations": ["READ", "WRITE"]},
               {"principal": "User:*", "subject": "*", "operations": ["READ"]}]}

READ: get schemas, versions, lookups, compatibility checks. WRITE: register,
soft-delete, set the subject's config and mode; it implies READ (a writer
looks up what it registered). ADMIN (the `admins` list): the global config
and mode, hard deletes, and everything else. Nothing allowed unless a rule
says so. `allowed` is the whole decision; the REST layer only maps a route
to (operation, subject).
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class Operation(enum.Enum):
    READ = "READ"
    WRITE = "WRITE"
    ADMIN = "ADMIN"


@dataclass(frozen=True, slots=True)
class Rule:
    principal: str
    subject: str
    prefixed: bool
    operations: frozenset[Operation]

    def covers(self, principal: str, operation: Operation, subject: str) -> bool:
        if self.principal not in (principal, WILDCARD_PRINCIPAL):
            return False
        if operation not in self.operations and not (operation is Operation.READ and Operation.WRITE in self.operations):
            return False
        if self.subject == WILDCARD:
            return True
        return subject.startswith(self.subject) if self.prefixed else subject == self.subject


@dataclass(frozen=True, slots=True)
class Rules:
    admins: frozenset[str] = frozenset()
    rules: tuple[Rule, ...] = ()


def allowed(rules: Rules, principal: str, operation: Operation, subject: str | None) -> bool:
    """May `principal` (User:name) do `operation` to `subject` (None: the registry as a whole)?"""
    if principal in rules.admins or WILDCARD_PRINCIPAL in rules.admins:
        return True
    if operation is Operation.ADMIN or subject is None:
        return False
    return any(rule.covers(principal, operation, subject) for rule in rules.rules)


class RulesError(ValueError):
    """The rules file is malformed; the message says where."""


def parse_rules(data: Any) -> Rules:
    if not isinstance(data, dict) or set(data) - {"admins", "rules"}:
        raise RulesError('the rules file is a JSON object with "admins" and "rules"')
    admins = data.get("admins") or []
    if not isinstance(admins, list) or not all(isinstance(a, str) and a.startswith("User:") for a in admins):
        raise RulesError('"admins" is a list of principals like "User:ops"')
    parsed = []
    for number, entry in enumerate(data.get("rules") or []):
        where = f"rule {number}"
        if not isinstance(entry, dict) or set(entry) - {"principal", "subject", "pattern", "operations"}:
            raise RulesError(f'{where}: an object with "principal", "subject", "pattern", "operations"')
        principal, subject = entry.get("principal"), entry.get("subject")
        if not isinstance(principal, str) or not principal.startswith("User:") or len(principal) == 5:
            raise RulesError(f'{where}: "principal" is "User:name" or "User:*"')
        if not isinstance(subject, str) or not subject:
            raise RulesError(f'{where}: "subject" is a subject name, a prefix, or "*"')
        pattern = entry.get("pattern", "LITERAL")
        if pattern not in ("LITERAL", "PREFIXED"):
            raise RulesError(f'{where}: "pattern" is LITERAL or PREFIXED')
        operations = entry.get("operations")
        try:
            ops = frozenset(Operation(o) for o in operations) if isinstance(operations, list) else None
        except ValueError:
            ops = None
        if not ops or Operation.ADMIN in ops:
            raise RulesError(f'{where}: "operations" is a non-empty list of READ, WRITE (admins go in "admins")')
        parsed.append(Rule(principal, subject, pattern == "PREFIXED", ops))
    return Rules(frozenset(admins), tuple(parsed))


def file_version(path: Path) -> tuple[str, int]:
    """What a file is now: where it resolves to and its mtime. A mounted Kubernetes Secret or ConfigMap
    changes by swapping its `..data` symlink to a new folder, so the resolved path changes even when the
    mtime would not."""
    return os.path.realpath(path), path.stat().st_mtime_ns


class RulesFile:
    """The rules file, read again when it changes (like the users file); a bad edit keeps the last good rules."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._mtime: tuple[str, int] | None = None
        self._rules = load_rules(self.path)
        self._mtime = file_version(self.path)

    def rules(self) -> Rules:
        try:
            mtime = file_version(self.path)
            if mtime != self._mtime:
                self._mtime = mtime  # a bad edit is read once, not on every call
                self._rules = load_rules(self.path)
        except (OSError, RulesError):
            pass  # keep the last good rules; the start-up load already refused a bad file
        return self._rules


def load_rules(path: Path) -> Rules:
    try:
        return parse_rules(json.loads(path.read_text()))
    except ValueError as exc:
        raise RulesError(f"{path}: {exc}") from None
