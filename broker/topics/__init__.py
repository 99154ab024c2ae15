"""Topics on this broker: create, grow, reconfigure, delete; their configs and value schemas.

    manager.py       TopicManager: a standalone broker's topic admin, and auto-creation (checks as Kafka's controller)
    config.py        topic configs by their Kafka names: validation, broker defaults, the log's LogConfig
    value_schema.py  `tinystream.value.schema`: JSON Schema validation of record values at produce
    registry_validation.py  `confluent.value/key.schema.validation`: schema id prefixes and subjects (pure)
    schema_ids.py    which subjects a schema id is registered under: the registry's answer, cached

Under a controller, topic admin is forwarded (`control/forwarding.py`) and
the image decides which topics exist (`control/image.py`).
"""
