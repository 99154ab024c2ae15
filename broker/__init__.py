"""The broker (tinystream.broker): one process that speaks Kafka and keeps partition logs.

Layers, top down; a folder may import the folders below it, never above
(import-linter checks it: pyproject.toml, `make lint`):

    app.py, maintenance.py  assembly: wire the parts, start/stop them, background timers
    server/                 TCP connections, the request dispatcher, admin HTTP, readiness
    handlers/               one module per Kafka API family, and the context they share
    control/                under a controller: the session, the image applied, forwarded admin
    coordinators/           services over internal topics: groups (__consumer_offsets), producer ids
    topics/                 topic lifecycle, topic configs, value schemas
    metrics/                the broker's Prometheus registry
    replication/            partitions (leader/follower, ISR, HW), replica manager, fetchers, purgatory
    metadata/               the cluster as this broker sees it: brokers, topics
    storage/ | protocol/ | groups/
                            the partition log on disk; the wire codec; the group state machine
    errors.py               Kafka error codes as data, and the errors answered with one
"""
