"""Kafka's replication model on this broker: leaders, followers, the ISR and the high watermark.

    partition.py        Partition: one replica's role, epochs, ISR, HW and log (Kafka's Partition.scala)
    replica_manager.py  ReplicaManager: the partitions hosted here; the produce and fetch paths over them
    replica_fetcher.py  one fetcher task per leader broker: followers copy their leaders (truncation first),
                        in an incremental fetch session (KIP-227, `fetch_sessions.client`)
    throttle.py         replication throttles (KIP-73): which replicas, the rate, the hold-back rule, pure
    replica_selector.py which replica a consumer reads from (KIP-392, replica.selector.class), pure
    purgatory.py        where long-poll fetches and acks=all produces wait for a partition to move
    hw_checkpoint.py    the high-watermark checkpoint file (replication-offset-checkpoint)
    idempotence.py      producer sequence state per partition (KIP-98), pure
"""
