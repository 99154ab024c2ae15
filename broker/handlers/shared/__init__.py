"""What several handlers share, apart from the one-module-per-API-family handlers beside this folder:
the context every handler is given (`context`), what each API needs the caller to be allowed
(`authz`), and where a topic change goes, this broker or the controller (`topic_routing`)."""
