"""The rules every image obeys, as a checker.

`apply` keeps these by construction; the checker exists so tests can prove
it over random event sequences and so a driver can refuse a state file or CR
status that was edited into nonsense (`ControllerState.from_dict` runs it).

Per partition: replicas non-empty and distinct; ISR non-empty, distinct, a
subset of replicas; adding/removing replicas disjoint subsets of replicas;
the leader is -1 or an ISR member that is registered and unfenced; a broker
that is fenced or unregistered is in an ISR only as its single member while
the partition is offline; a drained broker is in an ISR only as its single
member; a RECOVERING partition (KIP-704) has a single-member ISR.
"""

from __future__ import annotations

from tinystream.operator.controller.image import NO_LEADER, LeaderRecoveryState, MetadataImage


def violations(image: MetadataImage) -> list[str]:
    """Every broken rule, as readable sentences; empty when the image is sound."""
    found: list[str] = []
    if image.version < 0:
        found.append(f"image version {image.version} is negative")
    for broker_id, record in image.brokers.items():
        if broker_id != record.broker_id:
            found.append(f"broker key {broker_id} holds broker {record.broker_id}")
    live = {b for b, r in image.brokers.items() if not r.fenced}
    drained = {b for b, r in image.brokers.items() if r.drained}
    for name, topic in image.topics.items():
        if name != topic.name:
            found.append(f"topic key {name!r} holds topic {topic.name!r}")
        for index, p in enumerate(topic.partitions):
            where = f"{name}-{index}"
            if p.partition != index:
                found.append(f"{where}: record says partition {p.partition}")
            if not p.replicas or len(set(p.replicas)) != len(p.replicas):
                found.append(f"{where}: replicas {list(p.replicas)} are empty or repeat a broker")
            if not p.isr or len(set(p.isr)) != len(p.isr):
                found.append(f"{where}: ISR {list(p.isr)} is empty or repeats a broker")
            if not set(p.isr) <= set(p.replicas):
                found.append(f"{where}: ISR {list(p.isr)} is not a subset of replicas {list(p.replicas)}")
            if not set(p.adding_replicas) <= set(p.replicas) or not set(p.removing_replicas) <= set(p.replicas):
                found.append(f"{where}: adding/removing replicas are not replicas")
            if set(p.adding_replicas) & set(p.removing_replicas):
                found.append(f"{where}: a replica is both adding and removing")
            if p.leader != NO_LEADER:
                if p.leader not in p.isr:
                    found.append(f"{where}: leader {p.leader} is not in ISR {list(p.isr)}")
                if p.leader not in live:
                    found.append(f"{where}: leader {p.leader} is fenced or unregistered")
            for b in p.isr:
                if b not in live and (len(p.isr) != 1 or p.leader != NO_LEADER):
                    found.append(f"{where}: fenced or unregistered broker {b} is in ISR {list(p.isr)}")
                if b in drained and len(p.isr) != 1:
                    found.append(f"{where}: drained broker {b} is in ISR {list(p.isr)} with others")
            if p.leader_recovery_state is LeaderRecoveryState.RECOVERING and len(p.isr) != 1:
                found.append(f"{where}: RECOVERING with ISR {list(p.isr)}")
            if p.leader_epoch < 0 or p.partition_epoch < 0:
                found.append(f"{where}: negative epoch")
    return found
