"""Who is on the other end of a connection: SASL (PLAIN, SCRAM-SHA-256/512) and SCRAM credentials.

Pure logic: `sasl.SaslSession` is a per-connection state machine fed the
client's SaslHandshake and SaslAuthenticate bytes, checked against salted
credentials (tinystream.scram_users, common: the operator writes them too).
TLS is the server's (ssl module).
"""
