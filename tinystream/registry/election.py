"""Which registry instance writes, and what a follower does with a write: pure decisions, no I/O.

Instances join one Kafka consumer group (leadership.py); each member's JoinGroup
metadata says its advertised URL, whether it may lead, and the leader it last
knew. The group's leader (chosen by the broker's coordinator) runs
`choose_leader` over every member and hands the choice to all of them in the
SyncGroup assignment, so every member of one generation names the same writer
(Confluent's "schema-registry" group protocol does the same with
`leader.eligibility`). The choice keeps a leader that is still in the group
(no needless change when an instance joins) and otherwise takes the eligible
member with the smallest URL, so the outcome does not depend on join order.

A follower serves reads itself and forwards writes (`write_action`). A
request that was already forwarded once is never forwarded again: if the
instance it reached does not think it leads either, the caller gets 50004
instead of a loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

PROTOCOL_VERSION = 0
FORWARDED_HEADER = "X-TinyStream-Forwarded-By"  # set on a forwarded request; its value is the forwarder's URL


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    url: str
    eligible: bool
    seen_leader: str | None = None  # the leader this member last knew (stickiness)


def member_metadata(url: str, *, eligible: bool, seen_leader: str | None) -> bytes:
    """What an instance puts in its JoinGroup protocol metadata (user_data)."""
    return json.dumps({"version": PROTOCOL_VERSION, "url": url, "eligible": eligible,
                       "leader": seen_leader}, sort_keys=True).encode()


def parse_member(member_id: str, data: bytes) -> Member:
    """A member from its metadata; anything unreadable is a member that may not lead."""
    try:
        fields = json.loads(data)
        url, eligible, seen = fields["url"], fields["eligible"], fields.get("leader")
    except (ValueError, KeyError, TypeError):
        return Member(member_id, "", False)
    if not isinstance(url, str) or not url or not isinstance(eligible, bool):
        return Member(member_id, "", False)
    return Member(member_id, url, eligible, seen if isinstance(seen, str) else None)


def choose_leader(members: list[Member]) -> Member | None:
    """The writer for this generation: a still-present leader first, else the smallest eligible URL; None if none may."""
    eligible = sorted((m for m in members if m.eligible), key=lambda m: (m.url, m.member_id))
    if not eligible:
        return None
    seen = {m.seen_leader for m in members if m.seen_leader}
    for member in eligible:
        if member.url in seen:
            return member
    return eligible[0]


def assignment_data(leader: Member | None) -> bytes:
    """What every member receives in SyncGroup (user_data): the leader's URL, or null."""
    return json.dumps({"version": PROTOCOL_VERSION, "leader": None if leader is None else leader.url,
                       "leader_member": None if leader is None else leader.member_id}, sort_keys=True).encode()


def parse_assignment(data: bytes) -> str | None:
    """The leader's URL from an assignment; None for no leader or an assignment that is not ours."""
    try:
        leader = json.loads(data).get("leader")
    except (ValueError, AttributeError):
        return None
    return leader if isinstance(leader, str) and leader else None


def is_write(method: str, route: str) -> bool:
    """Whether a call changes `_schemas`: register, deletes, PUT/DELETE config and mode. Lookups and
    compatibility checks are POSTs that only read."""
    if method in ("PUT", "DELETE"):
        return True
    return method == "POST" and route == "/subjects/{subject}/versions"


class Action(Enum):
    SERVE = "serve"  # answer here
    FORWARD = "forward"  # send to the leader with the caller's credentials
    NO_LEADER = "no-leader"  # 50004: nobody to write


def write_action(method: str, route: str, *, own_url: str, leader_url: str | None, forwarded: bool) -> Action:
    """What this instance does with a call (after authentication and the rules have let it through)."""
    if not is_write(method, route) or leader_url == own_url:
        return Action.SERVE
    if leader_url is None or forwarded:
        return Action.NO_LEADER
    return Action.FORWARD
