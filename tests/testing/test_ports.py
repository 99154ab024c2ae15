"""Test ports are chosen where outgoing connections never take theirs."""

from __future__ import annotations

import itertools
import socket

import pytest

from tinystream.testing.peers import ports


def test_free_ports_lie_below_the_ephemeral_range_and_can_be_bound() -> None:
    start = ports._ephemeral_start()
    for _ in range(20):
        port = ports.free_port()
        assert ports._LOWEST <= port < start
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports.free_port()))
        taken.listen()
        used = taken.getsockname()[1]
        picks = itertools.chain([used, used], itertools.count(ports._LOWEST))
        monkeypatch.setattr(ports.random, "randint", lambda a, b: next(picks))
        assert ports.free_port() != used


def test_one_process_never_gets_the_same_port_twice() -> None:
    handed = [ports.free_port() for _ in range(300)]
    assert len(set(handed)) == len(handed)
