"""ConsumerGroupDescribe (KIP-848) for `tinystream groups describe`.

kafka-python (the CLI's usual client) has no ConsumerGroupDescribe, and its
DescribeGroups shows a consumer-protocol group as Dead with no members, as
Kafka answers. So the command asks the group's coordinator itself over the
broker's small protocol client: FindCoordinator, then ConsumerGroupDescribe.
A classic group (GROUP_ID_NOT_FOUND) or a broker without the API gives None,
and the command shows what DescribeGroups said.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.protocol.codec import build, schemas

_FIND_COORDINATOR, _API_VERSIONS, _DESCRIBE = 10, 18, 69


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: dict[str, list[int]]
    target_assignment: dict[str, list[int]]


@dataclass(frozen=True)
class DescribedConsumerGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[DescribedMember]


def _request(api_key: int, version: int, /, **fields: Any) -> Any:
    return build(schemas(api_key, version).request_type, fields)


def _assignment(value: Any) -> dict[str, list[int]]:
    return {tp.topic_name: sorted(tp.partitions) for tp in value.topic_partitions}


async def _describe(bootstrap: str, group_id: str) -> DescribedConsumerGroup | None:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    client = await KafkaClient.connect(host, int(port), client_id="tinystream-cli")
    try:
        versions = await client.request(_request(_API_VERSIONS, 3, client_software_name="tinystream",
                                                 client_software_version="cli"), timeout=15)
        if not any(a.api_key == _DESCRIBE for a in versions.api_keys):
            return None
        found = await client.request(_request(_FIND_COORDINATOR, 3, key=group_id, key_type=0), timeout=15)
        if found.error_code != 0:
            return None
    finally:
        await client.close()
    coordinator = await KafkaClient.connect(found.host, found.port, client_id="tinystream-cli")
    try:
        answer = await coordinator.request(_request(_DESCRIBE, 0, group_ids=(group_id,),
                                                    include_authorized_operations=False), timeout=15)
    finally:
        await coordinator.close()
    group = answer.groups[0]
    if group.error_code != 0:
        return None
    return DescribedConsumerGroup(
        group_id=group.group_id, state=group.group_state, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor=group.assignor_name,
        members=[
            DescribedMember(member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                            member_epoch=m.member_epoch, assignment=_assignment(m.assignment),
                            target_assignment=_assignment(m.target_assignment))
            for m in group.members
        ],
    )


def describe_consumer_group(bootstrap: str, group_id: str) -> DescribedConsumerGroup | None:
    """The KIP-848 group `group_id`, or None (classic, unknown, or a broker without the API)."""
    try:
        return asyncio.run(_describe(bootstrap, group_id))
    except (OSError, TimeoutError, ConnectionError):
        return None
