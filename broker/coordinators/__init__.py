"""Coordinators that live on this broker, over internal topics it hosts.

    group_service.py  runs the group coordinator (groups/) and loads the __consumer_offsets partitions it leads
    offsets_topic.py  the coordinator's OffsetsTopic over this broker's __consumer_offsets logs
    producer_ids.py   producer-id blocks for InitProducerId (KIP-730), from a file or the controller

The transaction coordinator (__transaction_state) belongs here too.
"""
