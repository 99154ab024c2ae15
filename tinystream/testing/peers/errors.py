"""Errors of the peer launchers.

    PeerError
    ├── PeerUnavailable   a tool, jar or binary is missing here: skip, with the reason
    └── PeerStartError    it was there but did not come up (the log tail is in the message)
"""

from __future__ import annotations


class PeerError(RuntimeError):
    """Base of the peer launchers' errors."""


class PeerUnavailable(PeerError):
    """A peer cannot run on this machine; the message says how to install it."""


class PeerStartError(PeerError):
    """A peer was started but did not become ready."""
