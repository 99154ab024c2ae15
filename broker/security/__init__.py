"""Who is on the other end of a connection, and what they may do: listeners, TLS, SASL, ACLs.

    listener_config.py  the listeners from Kafka's settings (listeners, advertised.listeners, the protocol map,
                        inter.broker.listener.name, listener.name.<name>.*): pure, checked at start-up
    listener.py         what a listener needs at run time: TLS contexts, SASL users, inter-broker credentials,
                        which principals are brokers
    principal.py        the mTLS principal: subject DN (RFC 2253) through ssl.principal.mapping.rules (pure)
    tls_reload.py       certificates replaced on disk reach new connections without a restart
    sasl.py             per-connection SASL state machine (SaslHandshake, SaslAuthenticate), checked against
                        salted credentials (tinystream.scram_users, common: the operator writes them too)
                        from sasl.users.file and from the controller's image
    authorizer.py       Kafka's ACL decisions (the model is tinystream.acls, shared with the controller): pure
    access_records.py   applies the image's ACLs and credentials to the authorizer and the user store

The sockets are the server's (broker/server/connection.py: one KafkaServer per listener).
"""
