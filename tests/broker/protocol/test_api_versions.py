"""The advertised table matches kio's schemas and the handler registry."""

from __future__ import annotations

from kio.index import load_request_schema

from tinystream.broker.handlers import HANDLERS
from tinystream.broker.protocol.api_versions import API_TABLE, GROUP_APIS, SASL_APIS, advertised, lookup


def test_every_served_version_has_a_kio_schema():
    for api in API_TABLE:
        for version in range(api.first_served, api.max_version + 1):
            assert load_request_schema(api.key, version).__api_key__ == api.key


def test_every_advertised_api_has_a_handler_and_nothing_else_does():
    assert set(HANDLERS) == {a.key for a in API_TABLE}


def test_produce_is_advertised_from_v0_but_served_from_v3():
    produce = lookup(0)
    assert (produce.min_version, produce.first_served, produce.max_version) == (0, 3, 11)
    assert produce.advertises(0) and not produce.serves(2) and produce.serves(3)


def test_librdkafka_windows():
    """librdkafka turns features on only when the ranges reach these versions."""
    assert lookup(0).advertises(7) and lookup(1).advertises(10)  # zstd
    assert lookup(22).advertises(0)  # idempotence
    for key in (10, 11, 12, 13, 14):  # groups
        assert lookup(key).advertises(0)


def test_without_groups_the_group_apis_are_not_advertised():
    keys = {a.key for a in advertised(with_groups=False)}
    assert not keys & GROUP_APIS and 10 in keys  # FindCoordinator stays
    assert [a.key for a in advertised(with_sasl=True)] == sorted(a.key for a in API_TABLE)
    assert not {a.key for a in advertised()} & SASL_APIS  # only a SASL listener serves them
