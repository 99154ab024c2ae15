"""DescribeCluster (key 60, v0-1): cluster id, controller and brokers (KIP-700).

Only the broker endpoint type (1) is served; asking for controllers (2,
KIP-919) is UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers.
"""

from __future__ import annotations

from typing import Any

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis

BROKERS_ENDPOINT = 1


async def handle_describe_cluster(ctx: BrokerContext, call: Call) -> Any:
    # Kafka answers DescribeCluster to anyone authenticated; DESCRIBE on the cluster only matters for
    # cluster_authorized_operations, which is not computed here (authz.RULES).
    endpoint_type = getattr(call.body, "endpoint_type", BROKERS_ENDPOINT)
    error = ErrorCode.none if endpoint_type == BROKERS_ENDPOINT else ErrorCode.unsupported_endpoint_type
    brokers = tuple(
        call.make("DescribeClusterBroker", broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in ctx.cluster.brokers(call.client.listener)
    ) if error == ErrorCode.none else ()
    return call.respond(
        throttle_time=millis(0),
        error_code=error,
        error_message=None if error == ErrorCode.none else f"endpoint type {endpoint_type} is not served",
        endpoint_type=endpoint_type,
        cluster_id=ctx.cluster.cluster_id,
        controller_id=ctx.cluster.controller_id,
        brokers=brokers,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
