"""A TinyStreamUser's spec.quotas: the operator brings the quota entity user=<name> to exactly them. Pure."""

from __future__ import annotations

from tinystream.operator.controller.events import QuotaOp
from tinystream.operator.controller.image import ClientQuotaRecord
from tinystream.operator.controller.quotas import altered
from tinystream.operator.k8s.model import UserSpec
from tinystream.operator.k8s.users import plan_user_access, plan_user_quotas, plan_user_removal


def user(quotas: dict | None, *, authentication: str = "scram-sha-512") -> UserSpec:
    spec = {"cluster": "c", "authentication": {"type": authentication}}
    if quotas is not None:
        spec["quotas"] = quotas
    return UserSpec.from_resource({"metadata": {"name": "app", "namespace": "ns", "uid": "u1"}, "spec": spec})


def record(entity: dict, **values: float) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=entity, values=values)


def test_spec_quotas_become_kafkas_keys():
    u = user({"producerByteRate": 1048576, "consumerByteRate": 2097152, "requestPercentage": 55,
              "controllerMutationRate": 10})
    assert dict(u.quotas) == {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0,
                              "request_percentage": 55.0, "controller_mutation_rate": 10.0}


def test_a_new_quota_is_set_and_one_in_force_needs_nothing():
    u = user({"producerByteRate": 1024, "requestPercentage": 50})
    plan = plan_user_access(u, [], [], password=None)
    assert plan.quotas is not None and dict(plan.quotas.entity) == {"user": "app"}
    assert plan.quotas.ops == (QuotaOp(key="producer_byte_rate", value=1024.0),
                               QuotaOp(key="request_percentage", value=50.0))
    now = altered((), [plan.quotas])
    assert plan_user_quotas(u, now) is None
    assert plan_user_access(u, [], [], password=None, quotas=now).empty


def test_a_key_left_out_of_the_spec_is_removed_and_a_changed_one_set():
    held = (record({"user": "app"}, producer_byte_rate=1024.0, consumer_byte_rate=10.0),)
    alteration = plan_user_quotas(user({"producerByteRate": 2048}), held)
    assert alteration is not None
    assert alteration.ops == (QuotaOp(key="producer_byte_rate", value=2048.0),
                              QuotaOp(key="consumer_byte_rate", remove=True))


def test_no_spec_quotas_removes_the_users_entity_and_leaves_others():
    held = (record({"user": "app"}, producer_byte_rate=1024.0),
            record({"user": "app", "client-id": "batch"}, producer_byte_rate=1.0),  # set with kafka-configs.sh
            record({"user": None}, producer_byte_rate=5.0))
    alteration = plan_user_quotas(user(None), held)
    assert alteration is not None
    assert sorted(r.key() for r in altered(held, [alteration])) == sorted(r.key() for r in held[1:])


def test_removal_takes_the_users_quotas():
    held = (record({"user": "app"}, request_percentage=20.0), record({"user": "other"}, request_percentage=20.0))
    plan = plan_user_removal(user({"requestPercentage": 20}), [], [], held)
    assert plan.quotas is not None and plan.quotas.ops == (QuotaOp(key="request_percentage", remove=True),)
    assert [dict(r.entity) for r in altered(held, [plan.quotas])] == [{"user": "other"}]


def test_a_tls_users_quota_entity_is_its_certificates_name():
    plan = plan_user_quotas(user({"producerByteRate": 1}, authentication="tls"), ())
    assert plan is not None and dict(plan.entity) == {"user": "CN=app"}
