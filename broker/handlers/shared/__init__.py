"""What several handlers share, apart from the one-module-per-API-family handlers beside this folder:
the context every handler is given (`context`), what each API needs the caller to be allowed
(`authz`), where a topic change goes, this broker or the controller (`topic_routing`), and the
controller_mutation_rate gate of topic changes (`mutation_quota`)."""
