"""The API table this broker advertises in ApiVersions: exactly what it serves.

Ranges follow KAFKA-NOTES.md: wide enough for Java 4.x (KIP-896 minimums) and
for the older versions librdkafka, aiokafka and kafka-python still send.

Produce is advertised from v0 although kio (and this broker) only parse v3+:
librdkafka up to 2.11 turns gzip/snappy/lz4 off unless the advertised Produce
range reaches v0. Versions 0-2 are answered per partition with
UNSUPPORTED_VERSION (`served_from` marks the split).

Versions above the table's top are not advertised even when kio could parse
them, because they need things this broker does not have (Fetch 15+'s
replica_state in place of replica_id, KIP-890 transactions in Produce 12+,
KIP-848 in OffsetCommit 10+).

`test_api_versions.py` checks each row against kio's schemas and against the
handler registry, so the table cannot drift from the code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApiRange:
    key: int
    name: str
    min_version: int
    max_version: int
    served_from: int | None = None  # None: every advertised version is served

    @property
    def first_served(self) -> int:
        return self.min_version if self.served_from is None else self.served_from

    def advertises(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def serves(self, version: int) -> bool:
        return self.first_served <= version <= self.max_version


PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
WRITE_TXN_MARKERS = 27
TXN_OFFSET_COMMIT = 28
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35
SASL_AUTHENTICATE = 36
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
DESCRIBE_CLUSTER = 60
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69

# Requests without a group coordinator wired: advertised only when one is.
GROUP_APIS = frozenset(
    {
        OFFSET_COMMIT,
        OFFSET_FETCH,
        JOIN_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        SYNC_GROUP,
        DESCRIBE_GROUPS,
        LIST_GROUPS,
        DELETE_GROUPS,
        CONSUMER_GROUP_HEARTBEAT,
        CONSUMER_GROUP_DESCRIBE,
        # Transactions: TxnOffsetCommit needs the group coordinator, and so does the
        # transaction service (the broker wires both or neither).
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        WRITE_TXN_MARKERS,
        TXN_OFFSET_COMMIT,
        DESCRIBE_TRANSACTIONS,
        LIST_TRANSACTIONS,
    }
)

# Served (and advertised) only on a SASL listener; before authentication nothing else is served there.
SASL_APIS = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})

API_TABLE: tuple[ApiRange, ...] = (
    ApiRange(PRODUCE, "Produce", 0, 11, served_from=3),
    ApiRange(FETCH, "Fetch", 4, 14),  # 13+: topic ids (KIP-516); 15 moves replica_id into replica_state
    ApiRange(LIST_OFFSETS, "ListOffsets", 1, 10),  # 8: earliest-local, 9: pending upload, 10: a timeout (KIP-1075)
    ApiRange(METADATA, "Metadata", 0, 12),
    ApiRange(OFFSET_COMMIT, "OffsetCommit", 2, 9),
    ApiRange(OFFSET_FETCH, "OffsetFetch", 1, 9),  # 9: member id and epoch (KIP-848); 10 names topics by id
    ApiRange(FIND_COORDINATOR, "FindCoordinator", 0, 4),
    ApiRange(JOIN_GROUP, "JoinGroup", 0, 9),
    ApiRange(HEARTBEAT, "Heartbeat", 0, 4),
    ApiRange(LEAVE_GROUP, "LeaveGroup", 0, 5),
    ApiRange(SYNC_GROUP, "SyncGroup", 0, 5),
    ApiRange(DESCRIBE_GROUPS, "DescribeGroups", 0, 5),
    ApiRange(LIST_GROUPS, "ListGroups", 0, 5),  # 5: group types (KIP-848)
    # v0 is advertised because librdkafka (kcat, confluent-kafka < 2.x) only sees SASL support when the range
    # holds 0; clients that then send SaslAuthenticate (all current ones) use v1. A v0 client's unframed
    # tokens are refused like any malformed request.
    ApiRange(SASL_HANDSHAKE, "SaslHandshake", 0, 1),
    ApiRange(API_VERSIONS, "ApiVersions", 0, 4),
    ApiRange(CREATE_TOPICS, "CreateTopics", 2, 7),
    ApiRange(DELETE_TOPICS, "DeleteTopics", 1, 6),
    ApiRange(DELETE_RECORDS, "DeleteRecords", 0, 2),
    ApiRange(INIT_PRODUCER_ID, "InitProducerId", 0, 4),
    ApiRange(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4),
    # Transactions (KIP-98/447), transaction version 1: AddPartitionsToTxn v4-5 are the batched
    # broker form (KIP-890 verify_only); EndTxn 5, TxnOffsetCommit 5 and Produce 12 are TV2, not served.
    ApiRange(ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 5),
    ApiRange(ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4),
    ApiRange(END_TXN, "EndTxn", 0, 4),
    ApiRange(WRITE_TXN_MARKERS, "WriteTxnMarkers", 1, 1),
    ApiRange(TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 4),
    # ACLs (KIP-140; v2 prefixed patterns, KIP-290; v2+ flexible): v0 is gone from Kafka 4 (KIP-896) and kio.
    ApiRange(DESCRIBE_ACLS, "DescribeAcls", 1, 3),
    ApiRange(CREATE_ACLS, "CreateAcls", 1, 3),
    ApiRange(DELETE_ACLS, "DeleteAcls", 1, 3),
    ApiRange(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4),
    ApiRange(ALTER_CONFIGS, "AlterConfigs", 0, 2),
    ApiRange(DESCRIBE_LOG_DIRS, "DescribeLogDirs", 1, 4),  # v0 is gone from Kafka 4 (KIP-896)
    ApiRange(ALTER_REPLICA_LOG_DIRS, "AlterReplicaLogDirs", 1, 2),  # v0 is gone from Kafka 4 (KIP-896)
    ApiRange(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2),
    ApiRange(CREATE_PARTITIONS, "CreatePartitions", 0, 3),
    ApiRange(DELETE_GROUPS, "DeleteGroups", 0, 2),
    ApiRange(ELECT_LEADERS, "ElectLeaders", 0, 2),  # preferred only (elect_leaders.py)
    ApiRange(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1),
    ApiRange(ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1),  # KIP-455 (partition_reassignments.py)
    ApiRange(LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0),
    ApiRange(DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", 0, 1),  # client_quotas.py (KIP-546)
    ApiRange(ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0, 1),
    ApiRange(DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0),  # KIP-554
    ApiRange(ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0),
    ApiRange(DESCRIBE_CLUSTER, "DescribeCluster", 0, 1),
    ApiRange(DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0),
    ApiRange(DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0),
    ApiRange(LIST_TRANSACTIONS, "ListTransactions", 0, 1),
    # KIP-848 consumer groups: v1 has client-generated member ids (KIP-1082), what Java 4.x and librdkafka 2.12 send.
    ApiRange(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1),
    ApiRange(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1),
)

_BY_KEY = {api.key: api for api in API_TABLE}


def lookup(api_key: int) -> ApiRange | None:
    return _BY_KEY.get(api_key)


def api_name(api_key: int) -> str:
    api = _BY_KEY.get(api_key)
    return api.name if api else f"Unknown({api_key})"


def advertised(*, with_groups: bool = True, with_sasl: bool = False) -> tuple[ApiRange, ...]:
    """The rows ApiVersions answers with, in key order."""
    rows = API_TABLE if with_groups else tuple(a for a in API_TABLE if a.key not in GROUP_APIS)
    if not with_sasl:
        rows = tuple(a for a in rows if a.key not in SASL_APIS)
    return tuple(sorted(rows, key=lambda a: a.key))
