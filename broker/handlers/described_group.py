"""The DescribedGroup rows of DescribeGroups (15) and ConsumerGroupDescribe (69), built one way.

Both APIs answer one row per asked group: the coordinator's description of it, or, for a group the
caller may not DESCRIBE (authz.RULES), GROUP_AUTHORIZATION_FAILED with nothing else, as Kafka's
KafkaApis answers. The refusal is the row of a description that holds only that error and the group
id: the result types' defaults (groups/results.py: no state, no members, epochs -1) are the empty
values, so a refusal and a description cannot disagree on them. Authorized operations (KIP-430) are
not computed: every row says AUTHORIZED_OPERATIONS_OMITTED.

What differs between the two APIs is data, a `RowLayout` each: which wire field shows which attribute
of the group's and of a member's description (groups/results.py), and the member's entity name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call


@dataclass(frozen=True, slots=True)
class RowLayout:
    """One API's DescribedGroup: wire field -> description attribute, for the group and for each member."""

    group: Mapping[str, str]
    member_class: str  # the member entity's kio class name
    member: Mapping[str, str]


def describable(ctx: BrokerContext, call: Call, group_ids: Iterable[str]) -> list[str]:
    """The asked groups the caller may DESCRIBE, in the order asked."""
    return [g for g in group_ids if authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.GROUP, g)]


def described_group(call: Call, layout: RowLayout, description: Any,
                    member_extra: Callable[[Any], Mapping[str, Any]] = lambda member: {}) -> Any:
    """The DescribedGroup row of `description`; `member_extra` gives member fields that are not attributes."""
    return call.make(
        "DescribedGroup",
        **{field: getattr(description, name) for field, name in layout.group.items()},
        members=tuple(
            call.make(layout.member_class, **{field: getattr(m, name) for field, name in layout.member.items()},
                      **member_extra(m))
            for m in description.members
        ),
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
