"""Topics on this broker: create, grow, reconfigure, delete; their configs and value schemas.

    manager.py       TopicManager: a standalone broker's topic admin, and auto-creation (checks as Kafka's controller)
    config.py        topic configs by their Kafka names: validation, broker defaults, the log's LogConfig
    value_schema.py  `tinystream.value.schema`: JSON Schema validation of record values at produce

Under a controller, topic admin is forwarded (`control/forwarding.py`) and
the image decides which topics exist (`control/image.py`).
"""
