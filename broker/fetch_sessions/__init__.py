"""Incremental fetch sessions (KIP-227), as pure logic: no sockets, no clock of their own.

    cache.py     FetchSessionCache: the sessions a broker keeps, and which one goes when it is full
    context.py   FetchSessionManager: a Fetch request's session fields -> what to read, and which
                 partitions the answer must carry (the broker side, Kafka's FetchManager)
    client.py    FetchSessionHandler: the fetcher's side (Kafka's Java FetchSessionHandler), used by
                 the follower's replica fetcher

A client with many partitions sends one full request (epoch 0); the broker
remembers its partitions and fetch parameters under a session id, and from
then on the client sends only what changed (epoch 1, 2, ...) and the broker
answers only partitions with news. With a thousand quiet partitions that is
the difference between tens of kilobytes and a few dozen bytes per fetch.
"""
