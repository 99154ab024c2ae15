"""A broker under a controller: its session, the metadata image it applies, the admin it forwards.

    session.py     ControllerSession: register, heartbeat, metadata long-poll, AlterPartition (KIP-631, KIP-497)
    image.py       ImageApplier: make this broker what the image says (topics, roles, fetchers, group loads)
    forwarding.py  ForwardedTopicAdmin: topic admin requests forwarded to the controller (KIP-590's idea)
    access.py      ACLs and SCRAM credentials: forwarded to the controller (or kept in access.json without one)
    quotas.py      client quotas: from the image (AlterClientQuotas forwarded), or quotas.json without one; enforced

Without `controller.url` none of this runs: the broker owns its topics
(`topics/manager.py`).
"""
