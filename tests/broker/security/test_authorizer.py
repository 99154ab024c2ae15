"""The ACL model (tinystream/acls.py) and the authorizer's decisions, without sockets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinystream.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_binding,
)
from tinystream.broker.security.authorizer import (
    Authorizer,
    AuthorizerConfigError,
    authorizer_enabled,
    parse_super_users,
)

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE = "User:alice"


def acl(rt: ResourceType, name: str, op: AclOperation, perm: AclPermissionType = ALLOW, *,
        pattern: PatternType = LIT, principal: str = ALICE, host: str = "*") -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def test_no_acls_denies_by_default_and_allows_when_configured():
    assert not Authorizer().authorize(ALICE, "1.2.3.4", Op.READ, T, "orders")
    assert Authorizer(allow_if_no_acl=True).authorize(ALICE, "1.2.3.4", Op.READ, T, "orders")


def test_allow_if_no_acl_does_not_apply_once_any_acl_names_the_resource():
    auth = Authorizer(allow_if_no_acl=True, acls=[acl(T, "orders", Op.READ, principal="User:bob")])
    assert not auth.authorize(ALICE, "h", Op.READ, T, "orders")
    assert auth.authorize(ALICE, "h", Op.READ, T, "other")


def test_super_user_is_allowed_even_against_a_deny():
    auth = Authorizer(super_users={"User:admin"}, acls=[acl(T, "*", Op.ALL, DENY, principal="User:*")])
    assert auth.authorize("User:admin", "h", Op.WRITE, T, "orders")
    assert not auth.authorize(ALICE, "h", Op.WRITE, T, "orders")


def test_literal_prefixed_and_wildcard_patterns():
    auth = Authorizer(acls=[acl(T, "orders", Op.READ), acl(T, "eu-", Op.WRITE, pattern=PRE),
                            acl(G, "*", Op.READ)])
    assert auth.authorize(ALICE, "h", Op.READ, T, "orders")
    assert not auth.authorize(ALICE, "h", Op.READ, T, "orders2")
    assert auth.authorize(ALICE, "h", Op.WRITE, T, "eu-sales")
    assert not auth.authorize(ALICE, "h", Op.WRITE, T, "us-sales")
    assert auth.authorize(ALICE, "h", Op.READ, G, "any-group")
    assert not auth.authorize(ALICE, "h", Op.READ, T, "eu-sales")  # WRITE does not imply READ


def test_principal_wildcard_and_host_matching():
    auth = Authorizer(acls=[acl(T, "t", Op.READ, principal="User:*", host="10.0.0.1")])
    assert auth.authorize("User:bob", "10.0.0.1", Op.READ, T, "t")
    assert not auth.authorize("User:bob", "10.0.0.2", Op.READ, T, "t")


def test_deny_overrides_allow_but_only_for_its_operation():
    auth = Authorizer(acls=[acl(T, "t", Op.ALL), acl(T, "t", Op.WRITE, DENY)])
    assert auth.authorize(ALICE, "h", Op.READ, T, "t")
    assert not auth.authorize(ALICE, "h", Op.WRITE, T, "t")


def test_prefixed_deny_overrides_literal_allow():
    auth = Authorizer(acls=[acl(T, "secret-data", Op.READ), acl(T, "secret", Op.ALL, DENY, pattern=PRE)])
    assert not auth.authorize(ALICE, "h", Op.READ, T, "secret-data")


@pytest.mark.parametrize("granting", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL, Op.DESCRIBE])
def test_describe_is_implied(granting):
    assert Authorizer(acls=[acl(T, "t", granting)]).authorize(ALICE, "h", Op.DESCRIBE, T, "t")


@pytest.mark.parametrize("granting", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS])
def test_describe_is_not_implied_by_others(granting):
    assert not Authorizer(acls=[acl(T, "t", granting)]).authorize(ALICE, "h", Op.DESCRIBE, T, "t")


def test_alter_configs_implies_describe_configs_and_deny_implies_nothing():
    auth = Authorizer(acls=[acl(T, "t", Op.ALTER_CONFIGS)])
    assert auth.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, T, "t")
    auth = Authorizer(acls=[acl(T, "t", Op.DESCRIBE), acl(T, "t", Op.READ, DENY)])
    assert auth.authorize(ALICE, "h", Op.DESCRIBE, T, "t")


def test_authorize_any_is_kafkas_authorize_by_resource_type():
    assert not Authorizer().authorize_any(ALICE, "h", Op.WRITE, T)
    assert Authorizer(acls=[acl(T, "t", Op.WRITE)]).authorize_any(ALICE, "h", Op.WRITE, T)
    assert Authorizer(acls=[acl(T, "p-", Op.ALL, pattern=PRE)]).authorize_any(ALICE, "h", Op.WRITE, T)
    assert not Authorizer(acls=[acl(T, "t", Op.READ)]).authorize_any(ALICE, "h", Op.WRITE, T)
    # a deny that covers every allowed name
    assert not Authorizer(acls=[acl(T, "t", Op.WRITE), acl(T, "*", Op.WRITE, DENY)]).authorize_any(
        ALICE, "h", Op.WRITE, T)
    assert not Authorizer(acls=[acl(T, "ab", Op.WRITE, pattern=PRE), acl(T, "a", Op.WRITE, DENY, pattern=PRE)]
                          ).authorize_any(ALICE, "h", Op.WRITE, T)
    assert Authorizer(acls=[acl(T, "a", Op.WRITE, pattern=PRE), acl(T, "ab", Op.WRITE, DENY, pattern=PRE)]
                      ).authorize_any(ALICE, "h", Op.WRITE, T)
    assert Authorizer(super_users={ALICE}).authorize_any(ALICE, "h", Op.WRITE, T)


def test_replace_swaps_the_whole_set():
    auth = Authorizer(acls=[acl(T, "t", Op.READ)])
    auth.replace([acl(T, "u", Op.READ)])
    assert not auth.authorize(ALICE, "h", Op.READ, T, "t")
    assert auth.authorize(ALICE, "h", Op.READ, T, "u")
    assert auth.acls == (acl(T, "u", Op.READ),)


def test_authorizer_setting():
    assert not authorizer_enabled("")
    assert not authorizer_enabled(None)
    assert authorizer_enabled("org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert authorizer_enabled("acl")
    with pytest.raises(AuthorizerConfigError, match="not known"):
        authorizer_enabled("com.example.Custom")
    assert parse_super_users(" User:a ; User:CN=b;") == {"User:a", "User:CN=b"}


# -- validation and filters -----------------------------------------------------------------


@pytest.mark.parametrize(("binding", "reason"), [
    (AclBinding(ResourceType.USER, "x", LIT, ALICE, "*", Op.ALTER, ALLOW), "not supported"),
    (AclBinding(ResourceType.DELEGATION_TOKEN, "x", LIT, ALICE, "*", Op.DESCRIBE, ALLOW), "not supported"),
    (AclBinding(ResourceType.ANY, "x", LIT, ALICE, "*", Op.READ, ALLOW), "not supported"),
    (AclBinding(T, "x", PatternType.MATCH, ALICE, "*", Op.READ, ALLOW), "LITERAL or PREFIXED"),
    (AclBinding(T, "x", LIT, ALICE, "*", Op.ANY, ALLOW), "needs an operation"),
    (AclBinding(T, "x", LIT, ALICE, "*", Op.CLUSTER_ACTION, ALLOW), "does not apply"),
    (AclBinding(T, "x", LIT, ALICE, "*", Op.READ, AclPermissionType.ANY), "ALLOW or DENY"),
    (AclBinding(T, "", LIT, ALICE, "*", Op.READ, ALLOW), "resource name"),
    (AclBinding(C, "other", LIT, ALICE, "*", Op.ALTER, ALLOW), "kafka-cluster"),
    (AclBinding(T, "*", PRE, ALICE, "*", Op.READ, ALLOW), "wildcard"),
    (AclBinding(T, "x", LIT, "alice", "*", Op.READ, ALLOW), "principal"),
    (AclBinding(T, "x", LIT, ALICE, "", Op.READ, ALLOW), "host"),
])
def test_invalid_bindings_are_refused_with_a_reason(binding, reason):
    assert reason in (validate_binding(binding) or "")


def test_binding_dict_round_trip_and_bad_input():
    b = acl(X, "tx-", Op.WRITE, DENY, pattern=PRE)
    assert AclBinding.from_dict(b.to_dict()) == b
    with pytest.raises(ValueError, match="unknown ACL field"):
        AclBinding.from_dict({**b.to_dict(), "extra": 1})
    with pytest.raises(ValueError, match="LITERAL or PREFIXED"):
        AclBinding.from_dict({**b.to_dict(), "pattern_type": "BOGUS"})
    with pytest.raises(ValueError, match="string fields"):
        AclBinding.from_dict({**b.to_dict(), "host": 3})


def test_filters_follow_kafkas_matching_rules():
    lit, wild, pre = acl(T, "orders", Op.READ), acl(T, "*", Op.READ), acl(T, "ord", Op.READ, pattern=PRE)
    match = AclBindingFilter(T, "orders", PatternType.MATCH)
    assert [match.matches(b) for b in (lit, wild, pre)] == [True, True, True]
    exact = AclBindingFilter(T, "orders", PatternType.ANY)
    assert [exact.matches(b) for b in (lit, wild, pre)] == [True, False, False]
    prefixed_only = AclBindingFilter(T, None, PRE)
    assert [prefixed_only.matches(b) for b in (lit, wild, pre)] == [False, False, True]
    assert not AclBindingFilter(G).matches(lit)
    assert not AclBindingFilter(principal="User:bob").matches(lit)
    assert not AclBindingFilter(permission=DENY).matches(lit)
    assert AclBindingFilter(operation=Op.READ, host="*").matches(lit)


# -- properties --------------------------------------------------------------------------------

names = st.sampled_from(["a", "ab", "abc", "b", "*"])
ops = st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.DELETE, Op.ALTER])
principals = st.sampled_from([ALICE, "User:bob", "User:*"])
bindings = st.builds(
    lambda name, pattern, principal, host, op, perm: AclBinding(
        T, "a" if (name == "*" and pattern == PRE) else name, pattern, principal, host, op, perm),
    names, st.sampled_from([LIT, PRE]), principals, st.sampled_from(["*", "h1", "h2"]), ops,
    st.sampled_from([ALLOW, DENY]))


def reference(acls: list[AclBinding], principal: str, host: str, op: AclOperation, name: str) -> bool:
    """The rules written out the slow way, from Kafka's documentation."""
    applying = [b for b in acls if b.pattern_matches_resource(T, name)]
    if not applying:
        return False
    mine = [b for b in applying if b.principal in (principal, "User:*") and b.host in (host, "*")]
    if any(b.permission == DENY and b.operation in (op, Op.ALL) for b in mine):
        return False
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}}.get(op, set())
    return any(b.permission == ALLOW and (b.operation in (op, Op.ALL) or b.operation in implied) for b in mine)


@given(st.lists(bindings, max_size=8), principals.filter(lambda p: p != "User:*"), st.sampled_from(["h1", "h2"]),
       ops.filter(lambda o: o != Op.ALL), st.sampled_from(["a", "ab", "abc", "b", "zz"]))
def test_authorize_agrees_with_the_reference(acls, principal, host, op, name):
    assert Authorizer(acls=acls).authorize(principal, host, op, T, name) == reference(acls, principal, host, op, name)


@given(st.lists(bindings, max_size=8), st.sampled_from(["a", "ab", "abc"]), ops.filter(lambda o: o != Op.ALL))
def test_a_matching_deny_always_wins(acls, name, op):
    auth = Authorizer(acls=[*acls, acl(T, name, op, DENY)])
    assert not auth.authorize(ALICE, "h1", op, T, name)


@given(st.lists(bindings, max_size=8), st.sampled_from(["a", "ab", "abc"]), ops.filter(lambda o: o != Op.ALL))
def test_authorize_any_holds_when_some_resource_is_allowed(acls, name, op):
    auth = Authorizer(acls=acls)
    if auth.authorize(ALICE, "h1", op, T, name):
        assert auth.authorize_any(ALICE, "h1", op, T)


@given(st.lists(bindings, max_size=8))
def test_match_filter_selects_exactly_the_applying_acls(acls):
    found = {b for b in acls if AclBindingFilter(T, "abc", PatternType.MATCH).matches(b)}
    assert found == {b for b in acls if b.pattern_matches_resource(T, "abc")}
