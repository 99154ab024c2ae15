"""kafka-python (3.0.12) can lose a rebalance it started itself; `remember_rejoins` keeps it until it is done.

Its coordinator rejoins while `need_rejoin()` says so, for one of three reasons: a rejoin was requested
(`rejoin_needed`: a heartbeat answered REBALANCE_IN_PROGRESS, a SyncGroup failed, ...), the subscription
changed, or, on the leader, the topic metadata it assigned from has changed. Only the first is kept in a
flag that stays set until a join completes; the other two are gone while the join is still running (the
JoinGroup request records the subscription, the leader assigns from the fresh metadata as soon as the
JoinGroup answer is in). If `poll(timeout_ms)` gives up before the SyncGroup answer, it leaves the join
running and returns; the next `poll` asks `need_rejoin()`, is told no, and never takes the finished join's
result. The member then stays REBALANCING with no new assignment and no heartbeats until the broker
expires its session.

A lone member meets this on its first rejoin: it joins before the topic's metadata is in (assigned
nothing, generation 1) and rejoins when the metadata arrives (generation 2). A 100 ms poll times out
between the two answers when the machine is loaded, and then the member never owns a partition. The
broker does what Kafka's does there: it answers both requests at once.

The Java consumer counts a join in flight as pending, and since KAFKA-9815 (2.6) a rejoin for changed
metadata also sets its flag. `remember_rejoins` does the latter for one consumer: any reason to rejoin sets
the flag, so the following polls finish a join (kafka-python sends a new JoinGroup if the one left running
has finished meanwhile).
"""

from __future__ import annotations

from typing import Any


def remember_rejoins(consumer: Any) -> None:
    """Make `consumer` (a kafka.KafkaConsumer) treat every rejoin it decides on as requested until it joins."""
    coordinator = consumer._coordinator
    need_rejoin = coordinator.need_rejoin

    def need_rejoin_until_joined() -> bool:
        if need_rejoin():
            coordinator.request_rejoin()  # cleared by the coordinator when a join completes
            return True
        return False

    coordinator.need_rejoin = need_rejoin_until_joined
