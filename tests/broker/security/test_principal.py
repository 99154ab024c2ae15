"""mTLS principals as Kafka names them: User:<RFC 2253 subject DN>, through ssl.principal.mapping.rules.
Pure: certificates from a throwaway CA (trustme), no sockets."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tinystream.tls_principal import (
    NoMatchingRule,
    PrincipalMapper,
    PrincipalMappingError,
    certificate_principal,
    subject_dn,
)


def der_of(common_name: str, unit: str | None = None, organization: str = "acme") -> bytes:
    trustme = pytest.importorskip("trustme")
    leaf = trustme.CA().issue_cert("client.example", common_name=common_name, organization_unit_name=unit,
                                   organization_name=organization)
    return x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).public_bytes(Encoding.DER)


def test_the_subject_is_written_most_specific_first_with_short_keywords():
    assert subject_dn(der_of("alice", "eng")) == "CN=alice,OU=eng,O=acme"
    assert subject_dn(der_of("o'neil, jr", "eng")) == "CN=o'neil\\, jr,OU=eng,O=acme"  # RFC 2253 escaping


def test_default_keeps_the_whole_dn():
    assert certificate_principal(der_of("alice", "eng"), PrincipalMapper.parse("DEFAULT")) == "User:CN=alice,OU=eng,O=acme"
    assert certificate_principal(None, PrincipalMapper.parse("DEFAULT")) is None


@pytest.mark.parametrize(("rules", "dn", "name"), [
    ("RULE:^CN=(.*?),.*$/$1/", "CN=alice,OU=eng,O=acme", "alice"),
    ("RULE:^CN=(.*?),.*$/$1/L", "CN=Alice,OU=eng", "alice"),
    ("RULE:^CN=(.*?),.*$/$1/U", "CN=Alice,OU=eng", "ALICE"),
    # Kafka's documented example: several rules, the first that matches wins, DEFAULT last.
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
     "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT", "CN=kafka-svc,OU=ServiceUsers,O=Unknown", "kafka-svc"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
     "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT", "CN=Duke,OU=JavaSoft,O=Sun,L=Cupertino,ST=CA,C=US", "duke@javasoft"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT", "O=no-common-name", "O=no-common-name"),
    ("RULE:^CN=([^,]*).*$/users\\/$1/", "CN=bob,O=x", "users/bob"),  # an escaped slash in the replacement
])
def test_rules_map_a_dn_as_kafkas_ssl_principal_mapper_does(rules, dn, name):
    assert PrincipalMapper.parse(rules).name(dn) == name


def test_a_dn_no_rule_maps_is_refused():
    with pytest.raises(NoMatchingRule):
        PrincipalMapper.parse("RULE:^CN=(.*?),OU=eng.*$/$1/").name("CN=mallory,OU=sales")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*?)/$1", "DEFAULTS", "RULE:([/$1/"])
def test_rules_that_do_not_parse_are_refused(rules):
    with pytest.raises(PrincipalMappingError):
        PrincipalMapper.parse(rules)
