"""The pure parts of several instances: who leads from the group's members, what a follower does with a call."""

from __future__ import annotations

import pytest

from tinystream.registry.election import (
    Action,
    Member,
    assignment_data,
    choose_leader,
    is_write,
    member_metadata,
    parse_assignment,
    parse_member,
    write_action,
)

A, B, C = "http://a:8081", "http://b:8081", "http://c:8081"


def test_the_smallest_eligible_url_leads_whatever_the_join_order():
    members = [Member("m3", C, True), Member("m1", B, True), Member("m2", A, False)]
    assert choose_leader(members).url == B
    assert choose_leader(list(reversed(members))).url == B


def test_a_leader_still_in_the_group_keeps_leading_when_a_smaller_url_joins():
    members = [Member("m1", A, True), Member("m2", C, True, seen_leader=C)]
    assert choose_leader(members).url == C


def test_a_seen_leader_that_may_no_longer_lead_or_has_left_is_not_kept():
    assert choose_leader([Member("m1", B, True, seen_leader=A), Member("m2", C, True, seen_leader=A)]).url == B
    assert choose_leader([Member("m1", A, False, seen_leader=A), Member("m2", C, True, seen_leader=A)]).url == C


def test_no_eligible_member_means_no_leader():
    assert choose_leader([Member("m1", A, False)]) is None
    assert choose_leader([]) is None
    assert parse_assignment(assignment_data(None)) is None


def test_metadata_and_assignment_round_trip_and_garbage_cannot_lead():
    member = parse_member("m1", member_metadata(A, eligible=True, seen_leader=B))
    assert member == Member("m1", A, True, B)
    assert parse_assignment(assignment_data(member)) == A
    for junk in (b"", b"not json", b"[]", b'{"url": 5, "eligible": true}', b'{"url": "x", "eligible": "yes"}',
                 b'{"url": "", "eligible": true}'):
        assert parse_member("m9", junk).eligible is False
    assert parse_assignment(b"\x00\x01") is None
    assert parse_assignment(b'{"leader": 3}') is None


@pytest.mark.parametrize(("method", "route", "write"), [
    ("POST", "/subjects/{subject}/versions", True),
    ("DELETE", "/subjects/{subject}", True),
    ("DELETE", "/subjects/{subject}/versions/{version}", True),
    ("PUT", "/config", True),
    ("DELETE", "/mode/{subject}", True),
    ("POST", "/subjects/{subject}", False),  # a lookup
    ("POST", "/compatibility/subjects/{subject}/versions", False),
    ("GET", "/schemas/ids/{id}", False),
])
def test_which_calls_are_writes(method, route, write):
    assert is_write(method, route) is write


def test_a_follower_serves_reads_forwards_writes_and_never_forwards_twice():
    register = ("POST", "/subjects/{subject}/versions")
    assert write_action("GET", "/subjects", own_url=A, leader_url=None, forwarded=False) is Action.SERVE
    assert write_action(*register, own_url=A, leader_url=A, forwarded=False) is Action.SERVE
    assert write_action(*register, own_url=A, leader_url=A, forwarded=True) is Action.SERVE
    assert write_action(*register, own_url=A, leader_url=B, forwarded=False) is Action.FORWARD
    assert write_action(*register, own_url=A, leader_url=B, forwarded=True) is Action.NO_LEADER
    assert write_action(*register, own_url=A, leader_url=None, forwarded=False) is Action.NO_LEADER
