"""Errors of the wire protocol layer: the bytes on a connection cannot be served.

    ProtocolError          log once, close the connection
    ├── FrameTooLarge      size prefix over socket.request.max.bytes (CVE-2022-34917)
    ├── InvalidFrame       size prefix below the smallest possible request
    ├── UnsupportedRequest unknown API key, or a version we do not serve
    └── MalformedRequest   header or body does not parse for its declared version

Answers a client can read (error codes inside a response) are
`tinystream.broker.errors.KafkaApiError`, raised by the layers above.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """The connection's byte stream cannot be served any further; close it."""


class FrameTooLarge(ProtocolError):
    def __init__(self, size: int, limit: int, setting: str = "socket.request.max.bytes") -> None:
        super().__init__(f"request size {size} exceeds {setting}={limit}")
        self.size = size
        self.limit = limit


class InvalidFrame(ProtocolError):
    pass


class UnsupportedRequest(ProtocolError):
    def __init__(self, api_key: int, api_version: int, reason: str = "not supported") -> None:
        super().__init__(f"api_key={api_key} api_version={api_version}: {reason}")
        self.api_key = api_key
        self.api_version = api_version


class MalformedRequest(ProtocolError):
    pass
