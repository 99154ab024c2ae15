"""Broker-level dynamic configs as pure logic: no I/O, no logging state.

    log_levels.py   Kafka's log level names (TRACE ... FATAL) <-> Python's logging levels (BROKER_LOGGER)
    dynamic.py      which broker keys change live, the per-broker / cluster-default layers, validation
"""
