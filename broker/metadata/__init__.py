"""The cluster as this broker sees it (Kafka's MetadataCache), read by every layer above.

    cluster.py  ClusterView: the live brokers, the controller, the cluster id, this broker's endpoint
    topics.py   TopicStore: topic names, ids, partition counts and config overrides (topics.json)
"""
