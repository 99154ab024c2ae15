"""Controller core: pure logic, no I/O.

A driver (the local `tinystream controller`, or the kopf operator) owns I/O
and time; this package owns the decisions::

    state = ControllerState.bootstrap(cluster_id="c1", seed=seed)
    decision = apply(state, RegisterBroker(broker_id=1, ...), now_ms)
    if decision.error: reply with decision.error.code / decision.message
    state = decision.state            # persist when decision.image_changed
    serve state.image.to_dict()       # brokers pull the versioned image

Modules, one idea each: events (inputs), actions (outputs), image (the
metadata brokers follow), state (image + sessions + settings + id source),
core (`apply`), liveness, placement, election, isr, reassignment (with
flow, the planner's min-cost flow), settle, builder (epoch bookkeeping),
invariants, topic_config, access (ACL and SCRAM credential records, with
`tinystream.acls`), quotas (client quota records), config, ids, codec, errors.
"""

from tinystream.operator.controller.actions import (
    AclsCreated,
    AclsDeleted,
    Action,
    BrokerConfigsChanged,
    BrokerDrained,
    BrokerFenced,
    BrokerRegistered,
    BrokerUndrained,
    BrokerUnfenced,
    BrokerUnregistered,
    ClientQuotasChanged,
    FenceReason,
    IsrChanged,
    LeaderChanged,
    PartitionsCreated,
    PartitionsOffline,
    ProducerIdsAllocated,
    ReassignmentCancelled,
    ReassignmentCompleted,
    ReassignmentStarted,
    ScramCredentialsChanged,
    TopicConfigChanged,
    TopicCreated,
    TopicDeleted,
)
from tinystream.operator.controller.codec import SCHEMA_VERSION
from tinystream.operator.controller.config import ControllerConfig, PreferredElection
from tinystream.operator.controller.core import Decision, apply
from tinystream.operator.controller.election import ElectionReason
from tinystream.operator.controller.errors import ControllerError, PlacementError, StateFormatError
from tinystream.operator.controller.events import (
    AclFilter,
    AdvanceTime,
    AllocateProducerIds,
    AlterBrokerConfigs,
    AlterClientQuotas,
    AlterPartition,
    AlterScramCredentials,
    AlterTopicConfig,
    BrokerConfigAlteration,
    BrokerConfigOp,
    BrokerHeartbeat,
    ControllerActivated,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    DeleteAcls,
    DeleteTopic,
    DrainBroker,
    ElectPreferredLeaders,
    Event,
    ExpireSession,
    QuotaAlteration,
    QuotaOp,
    ReassignPartitions,
    RegisterBroker,
    ReplicaAssignment,
    ScramDeletion,
    UndrainBroker,
    UnregisterBroker,
)
from tinystream.operator.controller.ids import IdSource
from tinystream.operator.controller.image import (
    NO_LEADER,
    AclRecord,
    BrokerConfigsRecord,
    BrokerRecord,
    ClientQuotaRecord,
    LeaderRecoveryState,
    ListenerEndpoint,
    MetadataImage,
    PartitionRecord,
    ScramCredentialRecord,
    TopicPartition,
    TopicRecord,
)
from tinystream.operator.controller.invariants import violations
from tinystream.operator.controller.liveness import BrokerSession
from tinystream.operator.controller.reassignment import plan_reassignment
from tinystream.operator.controller.state import ControllerState

__all__ = [
    "AlterBrokerConfigs",
    "BrokerConfigAlteration",
    "BrokerConfigOp",
    "BrokerConfigsChanged",
    "BrokerConfigsRecord",
    "AlterClientQuotas",
    "ClientQuotaRecord",
    "ClientQuotasChanged",
    "QuotaAlteration",
    "QuotaOp",
    "AclFilter",
    "AclRecord",
    "AclsCreated",
    "AclsDeleted",
    "AlterScramCredentials",
    "CreateAcls",
    "DeleteAcls",
    "ScramCredentialRecord",
    "ScramCredentialsChanged",
    "ScramDeletion",
    "NO_LEADER",
    "SCHEMA_VERSION",
    "Action",
    "AdvanceTime",
    "AllocateProducerIds",
    "AlterPartition",
    "AlterTopicConfig",
    "BrokerDrained",
    "BrokerFenced",
    "BrokerHeartbeat",
    "BrokerRecord",
    "ListenerEndpoint",
    "BrokerRegistered",
    "BrokerSession",
    "BrokerUndrained",
    "BrokerUnfenced",
    "BrokerUnregistered",
    "ControllerActivated",
    "ControllerConfig",
    "ControllerError",
    "ControllerState",
    "CreatePartitions",
    "CreateTopic",
    "Decision",
    "DeleteTopic",
    "DrainBroker",
    "ElectPreferredLeaders",
    "ElectionReason",
    "Event",
    "ExpireSession",
    "FenceReason",
    "IdSource",
    "IsrChanged",
    "LeaderChanged",
    "LeaderRecoveryState",
    "MetadataImage",
    "PartitionRecord",
    "PartitionsCreated",
    "ProducerIdsAllocated",
    "PartitionsOffline",
    "PlacementError",
    "PreferredElection",
    "ReassignPartitions",
    "ReassignmentCancelled",
    "ReassignmentCompleted",
    "ReassignmentStarted",
    "RegisterBroker",
    "ReplicaAssignment",
    "StateFormatError",
    "TopicConfigChanged",
    "TopicCreated",
    "TopicDeleted",
    "TopicPartition",
    "TopicRecord",
    "UndrainBroker",
    "UnregisterBroker",
    "apply",
    "plan_reassignment",
    "violations",
]
