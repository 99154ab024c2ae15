"""DescribeClientQuotas (48, v0-1, KIP-546): this broker enforces no client quotas, so none are described.

Served because `kafka-configs.sh --describe --entity-type users` asks for
quotas and SCRAM credentials together (ConfigCommand) and fails on a broker
without it. The answer is the truth: no quota entries. AlterClientQuotas is not
served (setting a quota that is not enforced would mislead). Needs
DESCRIBE_CONFIGS on the CLUSTER (Kafka's rule), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis


async def handle_describe_client_quotas(ctx: BrokerContext, call: Call) -> Any:
    if not authz.allowed_cluster(ctx, call, AclOperation.DESCRIBE_CONFIGS):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.cluster_authorization_failed,
                            error_message="DESCRIBE_CONFIGS on the cluster is not allowed", entries=None)
    return call.respond(throttle_time=millis(0), error_code=ErrorCode.none, error_message=None, entries=())
