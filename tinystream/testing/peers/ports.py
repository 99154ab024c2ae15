"""Free loopback ports for brokers started by tests and benchmarks.

The ports come from below the kernel's ephemeral range. A port the OS hands
out for `bind(0)` is one it also uses as the local port of outgoing
connections: a test that keeps such a port for a broker's restart (a pod
keeps its ports) could find it taken by some client's connection for as long
as that connection lives, and the broker then fails at every start. A port
below the range is taken only by an explicit bind, which the check here sees,
and never handed out twice by one process (a test asks for several ports
before any is bound).
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 20000  # above the ports services usually take
_TRIES = 200
_handed_out: set[int] = set()  # this process's: a port checked free is not bound until its broker starts


def _ephemeral_start() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no obstacle
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago, outside the range outgoing connections take theirs from."""
    top = _ephemeral_start() - 1
    if top - _LOWEST >= 1000:
        for _ in range(_TRIES):
            port = random.randint(_LOWEST, top)
            if port not in _handed_out and _bindable(host, port):
                _handed_out.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # an odd range: let the OS choose
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        return sock.getsockname()[1]
