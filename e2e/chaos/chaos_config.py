"""The chaos suite's knobs, in one place: cluster size, short timeouts, the seed.

Short timeouts keep the suite to a few minutes: the controller fences a
silent broker after 3 s (broker.session.timeout.ms; Kafka's KRaft default
is 9 s), a follower leaves the ISR after 2 s behind (replica.lag.time.max.ms;
Kafka: 30 s), brokers heartbeat every 0.5 s (Kafka: 2 s).
"""

from __future__ import annotations

import os

BROKERS = 3
SESSION_TIMEOUT_MS = 3_000
REPLICA_LAG_MS = 2_000
SEED = int(os.environ.get("TINYSTREAM_CHAOS_SEED", "20240604"))
REGISTER_TIMEOUT_S = 20.0

CLUSTER_SETTINGS = [
    f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}",  # the controller's
    f"replica.lag.time.max.ms={REPLICA_LAG_MS}",
    "broker.heartbeat.interval.ms=500",
    "offsets.topic.num.partitions=6",  # fewer partitions to re-replicate after a wipe
    "transaction.state.log.num.partitions=6",  # the same for the transaction coordinators' state
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",  # abandoned transactions end sooner
    "auto.create.topics.enable=false",
]
