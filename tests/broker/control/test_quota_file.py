"""ClientQuotas: quotas.json survives a new instance (a restart), a broken file names itself, users by name."""

from __future__ import annotations

import pytest

from tinystream.broker.control.quotas import ClientQuotas, user_of
from tinystream.broker.quotas.entities import Entity


def test_quotas_are_kept_in_the_file_and_enforced_from_it(tmp_path):
    now = [0]
    quotas = ClientQuotas(tmp_path, clock=lambda: now[0])
    quotas.alter([(Entity.of([("user", "alice")]), [("producer_byte_rate", 1000.0, False)])])
    again = ClientQuotas(tmp_path, clock=lambda: now[0])
    assert again.book == quotas.book
    assert again.record_produce("User:alice", "any", 5_000) == 0  # 500 B/s over the 10 s minimum window
    assert again.record_produce("User:alice", "other", 20_000) > 0  # one user quota for all its client ids
    assert again.record_produce("User:bob", "any", 10**9) == 0
    assert again.record_fetch("User:alice", "any", 10**9) == 0  # no consumer_byte_rate set


def test_a_broken_quota_file_stops_the_broker_with_its_path(tmp_path):
    (tmp_path / ClientQuotas.FILE).write_text('{"quotas": [{"entity": {"topic": "t"}, "values": {}}]}')
    with pytest.raises(ValueError, match="quotas.json"):
        ClientQuotas(tmp_path)


def test_users_are_named_by_their_principals_name():
    assert user_of("User:alice") == "alice"
    assert user_of("User:CN=app,O=org") == "CN=app,O=org"
    assert user_of("User:ANONYMOUS") == "ANONYMOUS"
