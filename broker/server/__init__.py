"""The broker's servers: the Kafka listener and the admin HTTP endpoint.

    connection.py       KafkaServer / KafkaConnection: asyncio sockets around connection_core, ordered answers
    connection_core.py  one connection's decisions, no I/O: framing, limits, budget bytes, login, idle (pure)
    request_logs.py     what is logged about a request: rate-limited bad input, extras naming the request
    dispatcher.py       RequestDispatcher: decoded request -> handler (handlers.HANDLERS) -> framed answer
    request_quota.py    the request_percentage gate around a handler: measure, throttle, mark the answer
    loop_time.py        how long a coroutine's steps keep the event loop busy (not its waits)
    admin_http.py       /healthz /readyz /metrics and the JSON admin API (aiohttp)
    readiness.py        when a broker is ready for traffic (pure)

Nothing here knows an API's meaning; that is `handlers/`.
"""
