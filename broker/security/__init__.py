"""Who is on the other end of a connection, and what they may do.

Pure logic: `sasl.SaslSession` is a per-connection state machine fed the
client's SaslHandshake and SaslAuthenticate bytes, checked against salted
credentials (never passwords; tinystream.scram_users, common: the operator
writes them too) from sasl.users.file and from the controller's image; `authorizer.Authorizer` decides with Kafka's ACL rules
(the model is `tinystream.acls`, shared with the controller);
`access_records` applies the image's ACLs and credentials to both. TLS is the
server's (ssl module); `listener` reads the listener settings.
"""
