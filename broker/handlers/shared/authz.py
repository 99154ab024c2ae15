"""What each API needs the caller to be allowed (Kafka's KafkaApis checks), in one table, and the checks.

`RULES` lists, per API key, the (operation, resource type) pairs the handler
checks, and the error a refusal gives; a test holds it against `HANDLERS`
so no API is served unchecked, and each handler calls `allowed` /
`allowed_cluster` / `allowed_any` with the resource names from its request.
With no authorizer (`authorizer.class.name` unset) every check passes.

Errors, as Kafka answers: TOPIC_AUTHORIZATION_FAILED (29) per topic or
partition, GROUP_AUTHORIZATION_FAILED (30) for the group of a group API,
CLUSTER_AUTHORIZATION_FAILED (31) for a cluster-level operation,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) for a transactional id. Metadata
leaves out the topics a caller may not DESCRIBE when it asked for all, so a
name's existence does not leak.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinystream.acls import CLUSTER_NAME, AclOperation, ResourceType
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol import api_versions as keys

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID

#: The error a refused check on each resource type answers.
ERROR_FOR: dict[ResourceType, ErrorCode] = {
    TOPIC: ErrorCode.topic_authorization_failed,
    GROUP: ErrorCode.group_authorization_failed,
    CLUSTER: ErrorCode.cluster_authorization_failed,
    TXN: ErrorCode.transactional_id_authorization_failed,
}


@dataclass(frozen=True, slots=True)
class Check:
    operation: AclOperation
    resource: ResourceType
    note: str = ""

    @property
    def error(self) -> ErrorCode:
        return ERROR_FOR[self.resource]


NONE: tuple[Check, ...] = ()

RULES: dict[int, tuple[Check, ...]] = {
    keys.PRODUCE: (Check(Op.WRITE, TXN, "transactional produce: the whole request"), Check(Op.WRITE, TOPIC)),
    keys.FETCH: (Check(Op.READ, TOPIC, "consumers"), Check(Op.CLUSTER_ACTION, CLUSTER, "followers (replica_id >= 0)")),
    keys.LIST_OFFSETS: (Check(Op.DESCRIBE, TOPIC),),
    keys.METADATA: (Check(Op.DESCRIBE, TOPIC, "others left out of 'all topics'"),
                    Check(Op.CREATE, CLUSTER, "auto-create: CREATE on the cluster or on the topic")),
    keys.OFFSET_COMMIT: (Check(Op.READ, GROUP), Check(Op.READ, TOPIC)),
    keys.OFFSET_FETCH: (Check(Op.DESCRIBE, GROUP), Check(Op.DESCRIBE, TOPIC, "partitions left out / refused")),
    keys.FIND_COORDINATOR: (Check(Op.DESCRIBE, GROUP), Check(Op.DESCRIBE, TXN)),
    keys.JOIN_GROUP: (Check(Op.READ, GROUP),),
    keys.HEARTBEAT: (Check(Op.READ, GROUP),),
    keys.LEAVE_GROUP: (Check(Op.READ, GROUP),),
    keys.SYNC_GROUP: (Check(Op.READ, GROUP),),
    keys.DESCRIBE_GROUPS: (Check(Op.DESCRIBE, GROUP),),
    keys.LIST_GROUPS: (Check(Op.DESCRIBE, GROUP, "DESCRIBE on the cluster lists all, else the describable ones"),),
    keys.SASL_HANDSHAKE: NONE,
    keys.API_VERSIONS: NONE,
    keys.SASL_AUTHENTICATE: NONE,
    keys.CREATE_TOPICS: (Check(Op.CREATE, TOPIC, "or CREATE on the cluster"),
                         Check(Op.DESCRIBE_CONFIGS, TOPIC, "configs in the answer, else TOPIC_AUTHORIZATION_FAILED")),
    keys.DELETE_TOPICS: (Check(Op.DELETE, TOPIC),),
    keys.DELETE_RECORDS: (Check(Op.DELETE, TOPIC),),
    keys.INIT_PRODUCER_ID: (Check(Op.WRITE, TXN),
                            Check(Op.IDEMPOTENT_WRITE, CLUSTER, "without a transactional id; or WRITE on any topic")),
    keys.OFFSET_FOR_LEADER_EPOCH: (Check(Op.DESCRIBE, TOPIC, "followers: CLUSTER_ACTION on the cluster"),),
    keys.ADD_PARTITIONS_TO_TXN: (Check(Op.WRITE, TXN, "v0-3 clients"), Check(Op.WRITE, TOPIC),
                                 Check(Op.CLUSTER_ACTION, CLUSTER, "v4+ broker verification")),
    keys.ADD_OFFSETS_TO_TXN: (Check(Op.WRITE, TXN), Check(Op.READ, GROUP)),
    keys.END_TXN: (Check(Op.WRITE, TXN),),
    keys.WRITE_TXN_MARKERS: (Check(Op.CLUSTER_ACTION, CLUSTER),),
    keys.TXN_OFFSET_COMMIT: (Check(Op.WRITE, TXN), Check(Op.READ, GROUP), Check(Op.READ, TOPIC)),
    keys.DESCRIBE_ACLS: (Check(Op.DESCRIBE, CLUSTER),),
    keys.CREATE_ACLS: (Check(Op.ALTER, CLUSTER),),
    keys.DELETE_ACLS: (Check(Op.ALTER, CLUSTER),),
    keys.DESCRIBE_CONFIGS: (Check(Op.DESCRIBE_CONFIGS, TOPIC), Check(Op.DESCRIBE_CONFIGS, CLUSTER, "broker configs")),
    keys.ALTER_CONFIGS: (Check(Op.ALTER_CONFIGS, TOPIC), Check(Op.ALTER_CONFIGS, CLUSTER, "broker configs")),
    keys.CREATE_PARTITIONS: (Check(Op.ALTER, TOPIC),),
    keys.DELETE_GROUPS: (Check(Op.DELETE, GROUP),),
    keys.INCREMENTAL_ALTER_CONFIGS: (Check(Op.ALTER_CONFIGS, TOPIC),
                                     Check(Op.ALTER_CONFIGS, CLUSTER, "broker configs")),
    keys.DESCRIBE_CLIENT_QUOTAS: (Check(Op.DESCRIBE_CONFIGS, CLUSTER),),
    keys.ALTER_CLIENT_QUOTAS: (Check(Op.ALTER_CONFIGS, CLUSTER),),
    keys.DESCRIBE_LOG_DIRS: (Check(Op.DESCRIBE, CLUSTER),),
    keys.ALTER_REPLICA_LOG_DIRS: (Check(Op.ALTER, CLUSTER),),
    keys.ELECT_LEADERS: (Check(Op.ALTER, CLUSTER),),
    keys.ALTER_PARTITION_REASSIGNMENTS: (Check(Op.ALTER, CLUSTER),),
    keys.LIST_PARTITION_REASSIGNMENTS: (Check(Op.DESCRIBE, CLUSTER),),
    keys.DESCRIBE_USER_SCRAM_CREDENTIALS: (Check(Op.DESCRIBE, CLUSTER),),
    keys.ALTER_USER_SCRAM_CREDENTIALS: (Check(Op.ALTER, CLUSTER),),
    keys.DESCRIBE_CLUSTER: (Check(Op.DESCRIBE, CLUSTER, "cluster_authorized_operations only: Kafka answers all"),),
    keys.DESCRIBE_PRODUCERS: (Check(Op.READ, TOPIC),),
    keys.DESCRIBE_TRANSACTIONS: (Check(Op.DESCRIBE, TXN), Check(Op.DESCRIBE, TOPIC, "partitions it names")),
    keys.LIST_TRANSACTIONS: (Check(Op.DESCRIBE, TXN, "the ids the caller may describe"),),
    keys.CONSUMER_GROUP_HEARTBEAT: (Check(Op.READ, GROUP), Check(Op.DESCRIBE, TOPIC, "a regex matches only these")),
    keys.CONSUMER_GROUP_DESCRIBE: (Check(Op.DESCRIBE, GROUP), Check(Op.DESCRIBE, TOPIC, "every topic the group names")),
}


def allowed(ctx: BrokerContext, call: Call, operation: AclOperation, resource: ResourceType, name: str) -> bool:
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    client = call.client
    return authorizer.authorize(client.auth.principal, client.host, operation, resource, name)


def allowed_cluster(ctx: BrokerContext, call: Call, operation: AclOperation) -> bool:
    return allowed(ctx, call, operation, CLUSTER, CLUSTER_NAME)


def allowed_any(ctx: BrokerContext, call: Call, operation: AclOperation, resource: ResourceType) -> bool:
    """Kafka's authorizeByResourceType: the caller may do `operation` on some resource of the type."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    client = call.client
    return authorizer.authorize_any(client.auth.principal, client.host, operation, resource)


def topic_filter(ctx: BrokerContext, call: Call, operation: AclOperation) -> Callable[[str], bool]:
    """A cached per-request `name -> allowed` for one operation on topics (a request names a topic many times)."""
    cache: dict[str, bool] = {}

    def check(name: str) -> bool:
        found = cache.get(name)
        if found is None:
            found = cache[name] = allowed(ctx, call, operation, TOPIC, name)
        return found

    return check
