"""Kafka wire protocol: framing, request/response codec, the advertised API table."""
