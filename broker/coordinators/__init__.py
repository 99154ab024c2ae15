"""Coordinators that live on this broker, over internal topics it hosts.

    group_service.py  runs the group coordinator (groups/) and loads the __consumer_offsets partitions it leads
    offsets_topic.py  the coordinators' internal topics over this broker's logs (__consumer_offsets, __transaction_state)
    producer_ids.py   producer-id blocks for InitProducerId (KIP-730), from a file or the controller
    txn_service.py    runs the transaction coordinator (transactions/) and loads the __transaction_state partitions it leads
    txn_markers.py    WriteTxnMarkers: markers written as leader here, or sent to the partition leader
"""
