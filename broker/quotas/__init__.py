"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-546, KIP-599) as pure logic: no I/O, time passed in.

    entities.py   the entity model (user, client-id, defaults), quota keys, validation, describe filters
    book.py       the stored quotas and Kafka's resolution order (most specific wins)
    rate.py       a sampled rate (quota.window.num samples of quota.window.size.seconds) and throttle time
    manager.py    per-entity rates for one quota type, bounded and expired: record -> throttle ms
    request_time.py  request_percentage (KIP-124): request time as a percentage of one thread
    token_bucket.py  Kafka's TokenBucket, what controller_mutation_rate is measured with
    mutation.py   controller_mutation_rate (KIP-599): strict / permissive, partitions per second
"""
