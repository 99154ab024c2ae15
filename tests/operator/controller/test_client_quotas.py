"""Client quotas in the controller's image: AlterClientQuotas sets, removes, checks; the image keeps them."""

from __future__ import annotations

import json

import pytest
from controller_helpers import Cluster

from tinystream.operator.controller import (
    AlterClientQuotas,
    ClientQuotaRecord,
    ClientQuotasChanged,
    ControllerError,
    ControllerState,
    MetadataImage,
    QuotaAlteration,
    QuotaOp,
    StateFormatError,
)


def alter(*alterations: tuple[dict, list[tuple[str, float, bool]]]) -> AlterClientQuotas:
    return AlterClientQuotas(alterations=tuple(
        QuotaAlteration(entity=entity, ops=tuple(QuotaOp(key=k, value=v, remove=r) for k, v, r in ops))
        for entity, ops in alterations))


def quotas(c: Cluster) -> dict[tuple, dict[str, float]]:
    return {tuple(sorted(r.entity.items(), key=lambda kv: kv[0])): dict(r.values) for r in c.image.client_quotas}


def test_set_then_change_then_remove_a_user_quota():
    c = Cluster()
    before = c.image.version
    d = c.apply(alter(({"user": "alice"}, [("producer_byte_rate", 1024.0, False), ("request_percentage", 50, False)])))
    assert d.image.version == before + 1
    assert d.actions == (ClientQuotasChanged(entities=("user=alice",)),)
    assert quotas(c) == {(("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 50.0}}
    c.apply(alter(({"user": "alice"}, [("producer_byte_rate", 2048.0, False), ("request_percentage", 0, True)])))
    assert quotas(c) == {(("user", "alice"),): {"producer_byte_rate": 2048.0}}
    c.apply(alter(({"user": "alice"}, [("producer_byte_rate", 0, True)])))
    assert quotas(c) == {}  # an entity with no key left goes


def test_defaults_and_combined_entities_are_distinct():
    c = Cluster()
    c.apply(alter(({"user": None}, [("consumer_byte_rate", 100.0, False)]),
                  ({"user": "alice", "client-id": None}, [("consumer_byte_rate", 200.0, False)]),
                  ({"client-id": "app"}, [("controller_mutation_rate", 2.5, False)])))
    assert quotas(c) == {
        (("user", None),): {"consumer_byte_rate": 100.0},
        (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 200.0},
        (("client-id", "app"),): {"controller_mutation_rate": 2.5},
    }
    # Removing the default user's quota leaves (user=alice, client-id=<default>) alone.
    c.apply(alter(({"user": None}, [("consumer_byte_rate", 0, True)])))
    assert (("user", None),) not in quotas(c) and len(quotas(c)) == 2


def test_removing_what_is_not_there_changes_nothing():
    c = Cluster()
    before = c.image.version
    d = c.apply(alter(({"user": "nobody"}, [("producer_byte_rate", 0, True)])))
    assert d.image.version == before and not d.image_changed


@pytest.mark.parametrize(("alteration", "reason"), [
    (({"user": "a"}, [("producer_byte_rate", -1.0, False)]), "must be greater than 0"),
    (({"user": "a"}, [("producer_byte_rate", 0.0, False)]), "must be greater than 0"),
    (({"user": "a"}, [("producer_byte_rate", 1.5, False)]), "not an integer"),
    (({"user": "a"}, [("bogus_rate", 1.0, False)]), "Invalid configuration key bogus_rate"),
    (({"ip": "1.2.3.4"}, [("producer_byte_rate", 1.0, False)]), "ip quotas"),
    (({}, [("producer_byte_rate", 1.0, False)]), "the entity is empty"),
    (({"user": ""}, [("producer_byte_rate", 1.0, False)]), "name is empty"),
    (({"user": "a"}, [("request_percentage", 1.0, False), ("request_percentage", 2.0, False)]), "more than once"),
])
def test_a_bad_alteration_is_refused_and_nothing_changes(alteration, reason):
    c = Cluster()
    c.apply(alter(({"user": "kept"}, [("producer_byte_rate", 10.0, False)])))
    before = c.image
    d = c.apply(alter(({"user": "b"}, [("producer_byte_rate", 5.0, False)]), alteration), ok=False)
    assert d.error is ControllerError.INVALID_REQUEST
    assert reason in d.message and "alterations[1]" in d.message
    assert c.image == before  # all or nothing: the valid first alteration was not applied either


def test_an_entity_twice_in_one_request_is_refused():
    c = Cluster()
    d = c.apply(alter(({"user": "a"}, [("producer_byte_rate", 5.0, False)]),
                      ({"user": "a"}, [("consumer_byte_rate", 5.0, False)])), ok=False)
    assert d.error is ControllerError.INVALID_REQUEST and "more than once" in d.message


def test_quotas_survive_the_state_file_and_are_left_out_while_empty():
    c = Cluster()
    assert "client_quotas" not in c.image.to_dict()  # an older reader refuses unknown fields
    c.apply(alter(({"user": "alice", "client-id": None}, [("producer_byte_rate", 1024.0, False)])))
    plain = json.loads(json.dumps(c.state.to_dict()))
    assert plain["image"]["client_quotas"] == [
        {"entity": {"user": "alice", "client-id": None}, "values": {"producer_byte_rate": 1024.0}}]
    assert ControllerState.from_dict(plain).image == c.image


def test_an_image_with_an_entity_twice_is_refused():
    record = {"entity": {"user": "a"}, "values": {"producer_byte_rate": 1.0}}
    image = {**MetadataImage.empty(cluster_id="c").to_dict(), "client_quotas": [record, record]}
    with pytest.raises(StateFormatError, match="appears twice"):
        MetadataImage.from_dict(image)


def test_records_sort_defaults_first():
    image = MetadataImage(version=1, cluster_id="c", client_quotas=(
        ClientQuotaRecord(entity={"user": "b"}, values={"producer_byte_rate": 1.0}),
        ClientQuotaRecord(entity={"user": None}, values={"producer_byte_rate": 1.0}),
        ClientQuotaRecord(entity={"client-id": "x"}, values={"producer_byte_rate": 1.0})))
    assert [dict(r.entity) for r in image.client_quotas] == [{"client-id": "x"}, {"user": None}, {"user": "b"}]
