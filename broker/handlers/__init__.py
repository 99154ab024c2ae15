"""Request handlers, one module per API family; `HANDLERS` maps API keys to them.

A handler is `async def handle(ctx: BrokerContext, call: Call) -> entity | bytes | None`:
a kio response entity (the dispatcher encodes it), already framed bytes (a
layout kio does not have, e.g. legacy Produce), None for no response
(acks=0), or `context.CLOSE_CONNECTION`.

What each API needs the caller to be allowed is `authz.RULES` (one table,
held against HANDLERS by a test); handlers call its checks with the
resources their request names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tinystream.broker.handlers import (
    acls,
    alter_log_dirs,
    api_versions,
    client_quotas,
    cluster,
    configs,
    consumer_groups,
    elect_leaders,
    fetch,
    groups,
    list_offsets,
    log_dirs,
    metadata,
    partition_reassignments,
    produce,
    producer_id,
    records_admin,
    sasl,
    scram_credentials,
    topics_admin,
    transactions,
)
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol import api_versions as keys

Handler = Callable[[BrokerContext, Call], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    keys.PRODUCE: produce.handle_produce,
    keys.FETCH: fetch.handle_fetch,
    keys.LIST_OFFSETS: list_offsets.handle_list_offsets,
    keys.METADATA: metadata.handle_metadata,
    keys.OFFSET_COMMIT: groups.handle_offset_commit,
    keys.OFFSET_FETCH: groups.handle_offset_fetch,
    keys.FIND_COORDINATOR: groups.handle_find_coordinator,
    keys.JOIN_GROUP: groups.handle_join_group,
    keys.HEARTBEAT: groups.handle_heartbeat,
    keys.LEAVE_GROUP: groups.handle_leave_group,
    keys.SYNC_GROUP: groups.handle_sync_group,
    keys.DESCRIBE_GROUPS: groups.handle_describe_groups,
    keys.LIST_GROUPS: groups.handle_list_groups,
    keys.SASL_HANDSHAKE: sasl.handle_sasl_handshake,
    keys.API_VERSIONS: api_versions.handle_api_versions,
    keys.SASL_AUTHENTICATE: sasl.handle_sasl_authenticate,
    keys.CREATE_TOPICS: topics_admin.handle_create_topics,
    keys.DELETE_TOPICS: topics_admin.handle_delete_topics,
    keys.DELETE_RECORDS: records_admin.handle_delete_records,
    keys.INIT_PRODUCER_ID: producer_id.handle_init_producer_id,
    keys.OFFSET_FOR_LEADER_EPOCH: list_offsets.handle_offset_for_leader_epoch,
    keys.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    keys.ALTER_CONFIGS: configs.handle_alter_configs,
    keys.CREATE_PARTITIONS: topics_admin.handle_create_partitions,
    keys.DELETE_GROUPS: groups.handle_delete_groups,
    keys.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    keys.DESCRIBE_CLUSTER: cluster.handle_describe_cluster,
    keys.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
    keys.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
    keys.END_TXN: transactions.handle_end_txn,
    keys.WRITE_TXN_MARKERS: transactions.handle_write_txn_markers,
    keys.TXN_OFFSET_COMMIT: transactions.handle_txn_offset_commit,
    keys.DESCRIBE_PRODUCERS: transactions.handle_describe_producers,
    keys.DESCRIBE_TRANSACTIONS: transactions.handle_describe_transactions,
    keys.LIST_TRANSACTIONS: transactions.handle_list_transactions,
    keys.DESCRIBE_ACLS: acls.handle_describe_acls,
    keys.CREATE_ACLS: acls.handle_create_acls,
    keys.DELETE_ACLS: acls.handle_delete_acls,
    keys.DESCRIBE_CLIENT_QUOTAS: client_quotas.handle_describe_client_quotas,
    keys.ALTER_CLIENT_QUOTAS: client_quotas.handle_alter_client_quotas,
    keys.DESCRIBE_LOG_DIRS: log_dirs.handle_describe_log_dirs,
    keys.ALTER_REPLICA_LOG_DIRS: alter_log_dirs.handle_alter_replica_log_dirs,
    keys.ELECT_LEADERS: elect_leaders.handle_elect_leaders,
    keys.ALTER_PARTITION_REASSIGNMENTS: partition_reassignments.handle_alter_partition_reassignments,
    keys.LIST_PARTITION_REASSIGNMENTS: partition_reassignments.handle_list_partition_reassignments,
    keys.DESCRIBE_USER_SCRAM_CREDENTIALS: scram_credentials.handle_describe_user_scram_credentials,
    keys.ALTER_USER_SCRAM_CREDENTIALS: scram_credentials.handle_alter_user_scram_credentials,
    keys.CONSUMER_GROUP_HEARTBEAT: consumer_groups.handle_consumer_group_heartbeat,
    keys.CONSUMER_GROUP_DESCRIBE: consumer_groups.handle_consumer_group_describe,
}
