"""The broker (tinystream.broker): storage, Kafka protocol, groups, replication, admin HTTP."""
