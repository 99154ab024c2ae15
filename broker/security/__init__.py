"""Who is on the other end of a connection: listeners, TLS, mTLS principals, SASL and SCRAM credentials.

    listener_config.py  the listeners from Kafka's settings (listeners, advertised.listeners, the protocol map,
                        inter.broker.listener.name, listener.name.<name>.*): pure, checked at start-up
    listener.py         what a listener needs at run time: TLS contexts, SASL users, inter-broker credentials,
                        which principals are brokers
    principal.py        the mTLS principal: subject DN (RFC 2253) through ssl.principal.mapping.rules (pure)
    tls_reload.py       certificates replaced on disk reach new connections without a restart
    sasl.py             per-connection SASL state machine (SaslHandshake, SaslAuthenticate)
    scram_users.py      salted SCRAM credentials (never passwords), as Kafka keeps them

The sockets are the server's (broker/server/connection.py: one KafkaServer per listener).
"""
