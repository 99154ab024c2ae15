"""A working copy of one image, for the duration of one event.

Handlers change brokers, topics and partitions here, freely and more than
once; `finish` then freezes the result into the next image, or returns None
when nothing really changed (so a no-op event never bumps the version).

Epochs are bumped here and only here, once per event and partition,
comparing the final record with the one the event started from:

* leader epoch +1 when the leader changed (including to or from -1);
* partition epoch +1 when anything in the record changed (KRaft bumps it
  with every PartitionChangeRecord; it fences stale AlterPartition).

The partition-level actions come from the same comparison, so they always
carry the final leader, ISR and epochs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from tinystream.operator.controller.actions import (
    Action,
    IsrChanged,
    LeaderChanged,
    PartitionsOffline,
    ReassignmentCompleted,
)
from tinystream.operator.controller.election import ElectionReason
from tinystream.operator.controller.image import (
    AclRecord,
    BrokerConfigsRecord,
    BrokerRecord,
    ClientQuotaRecord,
    MetadataImage,
    PartitionRecord,
    ScramCredentialRecord,
    TopicPartition,
    TopicRecord,
)
from tinystream.operator.controller.liveness import ClusterView
from tinystream.operator.controller.topic_config import ConfigValue

_Key = tuple[str, int]


def _shape(p: PartitionRecord) -> tuple[object, ...]:
    return (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas, p.leader_recovery_state)


class ImageBuilder:
    def __init__(self, image: MetadataImage) -> None:
        self.base = image
        self.brokers: dict[int, BrokerRecord] = dict(image.brokers)
        self._topics: dict[str, TopicRecord] = dict(image.topics)
        self._parts: dict[str, list[PartitionRecord]] = {}
        self._originals: dict[_Key, PartitionRecord] = {}
        self._reasons: dict[_Key, ElectionReason] = {}
        self._targets: dict[_Key, tuple[int, ...]] = {}
        self._changed = False
        self._view: ClusterView | None = None
        self.actions: list[Action] = []
        self.acls: tuple[AclRecord, ...] = image.acls
        self.scram_credentials: tuple[ScramCredentialRecord, ...] = image.scram_credentials
        self.client_quotas: tuple[ClientQuotaRecord, ...] = image.client_quotas
        self.broker_configs: BrokerConfigsRecord = image.broker_configs

    @property
    def next_version(self) -> int:
        return self.base.version + 1

    def view(self) -> ClusterView:
        if self._view is None:
            self._view = ClusterView.of(self.brokers)
        return self._view

    # -- brokers -----------------------------------------------------------

    def set_broker(self, record: BrokerRecord) -> None:
        if self.brokers.get(record.broker_id) != record:
            self.brokers[record.broker_id] = record
            self._changed = True
            self._view = None

    def remove_broker(self, broker_id: int) -> None:
        if self.brokers.pop(broker_id, None) is not None:
            self._changed = True
            self._view = None

    # -- topics ------------------------------------------------------------

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def topic(self, name: str) -> TopicRecord | None:
        """The topic's id and config (use `partitions` for its partitions)."""
        return self._topics.get(name)

    def partitions(self, name: str) -> Sequence[PartitionRecord]:
        if name in self._parts:
            return self._parts[name]
        return self._topics[name].partitions

    def partition(self, name: str, index: int) -> PartitionRecord | None:
        if name not in self._topics:
            return None
        parts = self.partitions(name)
        return parts[index] if 0 <= index < len(parts) else None

    def add_topic(self, record: TopicRecord) -> None:
        self._topics[record.name] = record
        self._parts.pop(record.name, None)
        self._changed = True

    def remove_topic(self, name: str) -> None:
        del self._topics[name]
        self._parts.pop(name, None)
        for key in [k for k in self._originals if k[0] == name]:
            del self._originals[key]
        self._changed = True

    def set_topic_config(self, name: str, config: Mapping[str, ConfigValue]) -> None:
        self._topics[name] = dataclasses.replace(self._topics[name], config=config)
        self._changed = True

    def append_partitions(self, name: str, records: Sequence[PartitionRecord]) -> None:
        parts = self._parts.setdefault(name, list(self._topics[name].partitions))
        parts.extend(records)
        self._changed = True

    def update_partition(
        self, name: str, record: PartitionRecord, *, reason: ElectionReason | None = None
    ) -> None:
        """Replace partition `record.partition` of `name` (epochs are bumped in `finish`)."""
        parts = self._parts.setdefault(name, list(self._topics[name].partitions))
        key = (name, record.partition)
        self._originals.setdefault(key, parts[record.partition])
        parts[record.partition] = record
        if reason is not None:
            self._reasons[key] = reason

    def note_reassignment(self, name: str, index: int, target: Sequence[int]) -> None:
        """Remember a started reassignment, to report it if it completes in this event."""
        self._targets[(name, index)] = tuple(target)

    # -- access: ACLs, SCRAM credentials, client quotas -----------------------------------

    def set_acls(self, acls: Sequence[AclRecord]) -> None:
        ordered = tuple(sorted(set(acls)))
        if ordered != self.acls:
            self.acls = ordered
            self._changed = True

    def set_scram_credentials(self, credentials: Sequence[ScramCredentialRecord]) -> None:
        ordered = tuple(sorted(credentials))
        if ordered != self.scram_credentials:
            self.scram_credentials = ordered
            self._changed = True

    def set_client_quotas(self, quotas: Sequence[ClientQuotaRecord]) -> None:
        ordered = tuple(sorted(quotas, key=ClientQuotaRecord.key))
        if ordered != self.client_quotas:
            self.client_quotas = ordered
            self._changed = True

    def set_broker_configs(self, default: Mapping[str, str],
                           brokers: Mapping[int, Mapping[str, str]] | Mapping[str, Mapping[str, str]]) -> None:
        """Replace the dynamic broker configs: the cluster default and each broker's layer (by id; an empty or
        absent layer is none). Values are Kafka's text; the caller checked them (tinystream.config.broker_configs)."""
        record = BrokerConfigsRecord(default=default, brokers={str(b): v for b, v in brokers.items()})
        if record != self.broker_configs:
            self.broker_configs = record
            self._changed = True

    # -- result ------------------------------------------------------------

    def finish(self) -> MetadataImage | None:
        """The next image (version + 1), or None if nothing changed."""
        changed = self._changed
        offline: list[TopicPartition] = []
        partition_actions: list[Action] = []
        for key in sorted(self._originals):
            name, index = key
            original = self._originals[key]
            current = self._parts[name][index]
            if _shape(current) == _shape(original):
                self._parts[name][index] = original
                continue
            changed = True
            leader_moved = current.leader != original.leader
            current = dataclasses.replace(
                current,
                leader_epoch=original.leader_epoch + (1 if leader_moved else 0),
                partition_epoch=original.partition_epoch + 1,
            )
            self._parts[name][index] = current
            if leader_moved:
                partition_actions.append(
                    LeaderChanged(
                        topic=name,
                        partition=index,
                        leader=current.leader,
                        leader_epoch=current.leader_epoch,
                        reason=self._reasons.get(key, ElectionReason.REASSIGNMENT),
                    )
                )
            if current.isr != original.isr:
                partition_actions.append(
                    IsrChanged(topic=name, partition=index, isr=current.isr, partition_epoch=current.partition_epoch)
                )
            if current.offline and not original.offline:
                offline.append(TopicPartition(name, index))
            target = self._targets.get(key, original.target_replicas if original.reassigning else None)
            if target is not None and not current.reassigning and current.replicas == target:
                partition_actions.append(ReassignmentCompleted(topic=name, partition=index, replicas=current.replicas))
        self.actions.extend(partition_actions)
        if offline:
            self.actions.append(PartitionsOffline(partitions=tuple(offline)))
        if not changed:
            return None
        topics = {
            name: (dataclasses.replace(record, partitions=tuple(self._parts[name])) if name in self._parts else record)
            for name, record in self._topics.items()
        }
        return MetadataImage(
            version=self.base.version + 1, cluster_id=self.base.cluster_id, brokers=self.brokers, topics=topics,
            acls=self.acls, scram_credentials=self.scram_credentials, client_quotas=self.client_quotas,
            broker_configs=self.broker_configs,
        )
