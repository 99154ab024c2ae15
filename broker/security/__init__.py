"""Who is on the other end of a connection: SASL (PLAIN, SCRAM-SHA-256/512) and SCRAM credentials.

Pure logic: `sasl.SaslSession` is a per-connection state machine fed the
client's SaslHandshake and SaslAuthenticate bytes; `scram_users` keeps salted
credentials (never passwords) as Kafka does. TLS is the server's (ssl module).
"""
