"""The per-subject decision as a table, the rules file's refusals, and which routes need what."""

from __future__ import annotations

import pytest

from tinystream.registry.authz import Operation, RulesError, allowed, parse_rules
from tinystream.registry.server import required

R, W, A = Operation.READ, Operation.WRITE, Operation.ADMIN

RULES = parse_rules({
    "admins": ["User:ops"],
    "rules": [
        {"principal": "User:orders-app", "subject": "orders-", "pattern": "PREFIXED", "operations": ["WRITE"]},
        {"principal": "User:reader", "subject": "orders-value", "operations": ["READ"]},
        {"principal": "User:*", "subject": "public-", "pattern": "PREFIXED", "operations": ["READ"]},
        {"principal": "User:auditor", "subject": "*", "operations": ["READ"]},
    ],
})


@pytest.mark.parametrize(("principal", "operation", "subject", "expected"), [
    ("User:ops", A, None, True),                        # admins: the registry as a whole
    ("User:ops", W, "anything", True),
    ("User:orders-app", W, "orders-value", True),       # prefixed
    ("User:orders-app", R, "orders-value", True),       # WRITE implies READ
    ("User:orders-app", W, "payments-value", False),
    ("User:orders-app", A, None, False),                # hard deletes, global config: admins only
    ("User:orders-app", W, None, False),
    ("User:reader", R, "orders-value", True),           # literal
    ("User:reader", R, "orders-value-v2", False),       # literal is not a prefix
    ("User:reader", W, "orders-value", False),          # READ does not imply WRITE
    ("User:someone", R, "public-events", True),         # the wildcard principal
    ("User:someone", W, "public-events", False),
    ("User:someone", R, "orders-value", False),         # nothing unless a rule says so
    ("User:auditor", R, "whatever", True),              # "*" subject
    ("User:auditor", W, "whatever", False),
])
def test_the_decision(principal, operation, subject, expected):
    assert allowed(RULES, principal, operation, subject) is expected


def test_no_rules_allow_nothing():
    assert not allowed(parse_rules({}), "User:alice", R, "s")


@pytest.mark.parametrize(("data", "says"), [
    ([], "JSON object"),
    ({"rulez": []}, "JSON object"),
    ({"admins": ["ops"]}, "User:ops"),
    ({"rules": [{"principal": "alice", "subject": "s", "operations": ["READ"]}]}, "rule 0"),
    ({"rules": [{"principal": "User:a", "subject": "", "operations": ["READ"]}]}, '"subject"'),
    ({"rules": [{"principal": "User:a", "subject": "s", "pattern": "MATCH", "operations": ["READ"]}]}, '"pattern"'),
    ({"rules": [{"principal": "User:a", "subject": "s", "operations": ["DELETE"]}]}, '"operations"'),
    ({"rules": [{"principal": "User:a", "subject": "s", "operations": ["ADMIN"]}]}, "admins"),
    ({"rules": [{"principal": "User:a", "subject": "s", "operations": []}]}, '"operations"'),
])
def test_a_bad_rules_file_says_where(data, says):
    with pytest.raises(RulesError, match=says):
        parse_rules(data)


@pytest.mark.parametrize(("method", "route", "match", "query", "expected"), [
    ("GET", "/subjects/{subject}/versions", {"subject": "s"}, {}, (R, "s")),
    ("POST", "/subjects/{subject}/versions", {"subject": "s"}, {}, (W, "s")),
    ("POST", "/subjects/{subject}", {"subject": "s"}, {}, (R, "s")),                      # lookup
    ("POST", "/compatibility/subjects/{subject}/versions", {"subject": "s"}, {}, (R, "s")),
    ("DELETE", "/subjects/{subject}", {"subject": "s"}, {}, (W, "s")),                    # soft
    ("DELETE", "/subjects/{subject}/versions/{version}", {"subject": "s", "version": "1"}, {"permanent": "true"},
     (A, None)),                                                                          # hard
    ("PUT", "/config/{subject}", {"subject": "s"}, {}, (W, "s")),
    ("GET", "/config/{subject}", {"subject": "s"}, {}, (R, "s")),
    ("PUT", "/config", {}, {}, (A, None)),
    ("DELETE", "/mode", {}, {}, (A, None)),
    ("GET", "/config", {}, {}, None),
    ("GET", "/subjects", {}, {}, None),                                                   # filtered instead
    ("GET", "/schemas/ids/{id}", {"id": "1"}, {}, None),                                  # decided by the handler
])
def test_what_each_route_needs(method, route, match, query, expected):
    assert required(method, route, match, query) == expected


def test_the_rules_file_is_read_again_when_it_changes_and_a_bad_edit_keeps_the_last_good_rules(tmp_path):
    import json
    import os

    from tinystream.registry.authz import RulesFile
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [{"principal": "User:a", "subject": "s", "operations": ["READ"]}]}))
    rules = RulesFile(path)
    assert allowed(rules.rules(), "User:a", R, "s") and not allowed(rules.rules(), "User:b", R, "s")
    path.write_text(json.dumps({"rules": [{"principal": "User:b", "subject": "s", "operations": ["READ"]}]}))
    os.utime(path, (1, 1))  # another mtime, whatever the clock's resolution
    assert allowed(rules.rules(), "User:b", R, "s") and not allowed(rules.rules(), "User:a", R, "s")
    path.write_text("{broken")
    os.utime(path, (2, 2))
    assert allowed(rules.rules(), "User:b", R, "s")
    with pytest.raises(RulesError, match="rules.json"):
        RulesFile(path)  # at start-up a bad file is refused
