"""ACLs and SCRAM credentials in the controller's image: CreateAcls, DeleteAcls, AlterScramCredentials."""

from __future__ import annotations

import dataclasses
import json

from controller_helpers import Cluster

from tinystream.operator.controller import (
    AclFilter,
    AclRecord,
    AclsCreated,
    AclsDeleted,
    AlterScramCredentials,
    ControllerError,
    ControllerState,
    CreateAcls,
    DeleteAcls,
    MetadataImage,
    ScramCredentialRecord,
    ScramDeletion,
)


def acl(name: str = "orders", *, pattern: str = "LITERAL", principal: str = "User:alice", op: str = "READ",
        permission: str = "ALLOW") -> AclRecord:
    return AclRecord(resource_type="TOPIC", resource_name=name, pattern_type=pattern, principal=principal,
                     host="*", operation=op, permission=permission)


def cred(user: str = "alice", mechanism: str = "SCRAM-SHA-512", iterations: int = 4096) -> ScramCredentialRecord:
    return ScramCredentialRecord(user=user, mechanism=mechanism, salt="c2FsdA==", stored_key="a2V5",
                                 server_key="a2V5", iterations=iterations)


def test_create_acls_adds_them_once_and_bumps_the_version():
    c = Cluster()
    before = c.image.version
    d = c.apply(CreateAcls(acls=(acl(), acl("eu-", pattern="PREFIXED"))))
    assert d.image_changed and c.image.version == before + 1
    assert set(c.image.acls) == {acl(), acl("eu-", pattern="PREFIXED")}
    assert d.actions == (AclsCreated(acls=tuple(sorted({acl(), acl("eu-", pattern="PREFIXED")}))),)
    again = c.apply(CreateAcls(acls=(acl(),)))
    assert not again.image_changed and again.actions == ()


def test_an_invalid_acl_refuses_the_whole_event():
    c = Cluster()
    d = c.apply(CreateAcls(acls=(acl(), acl(op="CLUSTER_ACTION"))), ok=False)
    assert d.error == ControllerError.INVALID_REQUEST and "acls[1]" in d.message
    assert c.image.acls == ()
    d = c.apply(CreateAcls(acls=(acl(principal="alice"),)), ok=False)
    assert "principal" in d.message


def test_delete_acls_reports_what_each_filter_matched():
    c = Cluster()
    c.apply(CreateAcls(acls=(acl(), acl("o", pattern="PREFIXED"), acl(principal="User:bob"))))
    d = c.apply(DeleteAcls(filters=(AclFilter(resource_type="TOPIC", resource_name="orders", pattern_type="MATCH",
                                              principal="User:alice"),
                                    AclFilter(resource_type="GROUP"))))
    (deleted,) = d.actions
    assert isinstance(deleted, AclsDeleted)
    assert set(deleted.matched[0]) == {acl(), acl("o", pattern="PREFIXED")} and deleted.matched[1] == ()
    assert c.image.acls == (acl(principal="User:bob"),)
    bad = c.apply(DeleteAcls(filters=(AclFilter(operation="BOGUS"),)), ok=False)
    assert bad.error == ControllerError.INVALID_REQUEST


def test_scram_credentials_upsert_delete_and_refusals():
    c = Cluster()
    c.apply(AlterScramCredentials(upsertions=(cred(), cred(mechanism="SCRAM-SHA-256"))))
    assert len(c.image.scram_credentials) == 2
    c.apply(AlterScramCredentials(upsertions=(cred(iterations=8192),),
                                  deletions=(ScramDeletion(user="alice", mechanism="SCRAM-SHA-256"),)))
    assert c.image.scram_credentials == (cred(iterations=8192),)
    missing = c.apply(AlterScramCredentials(deletions=(ScramDeletion(user="bob", mechanism="SCRAM-SHA-256"),)),
                      ok=False)
    assert missing.error == ControllerError.RESOURCE_NOT_FOUND
    assert c.apply(AlterScramCredentials(upsertions=(cred(iterations=100),)), ok=False).error == \
        ControllerError.INVALID_REQUEST
    assert c.apply(AlterScramCredentials(upsertions=(cred(mechanism="MD5"),)), ok=False).error == \
        ControllerError.INVALID_REQUEST
    assert c.apply(AlterScramCredentials(upsertions=(dataclasses.replace(cred(), salt="!!"),)), ok=False).error == \
        ControllerError.INVALID_REQUEST
    dup = c.apply(AlterScramCredentials(upsertions=(cred(),),
                                        deletions=(ScramDeletion(user="alice", mechanism="SCRAM-SHA-512"),)), ok=False)
    assert dup.error == ControllerError.INVALID_REQUEST


def test_acls_and_credentials_survive_the_state_file():
    c = Cluster()
    c.apply(CreateAcls(acls=(acl(),)))
    c.apply(AlterScramCredentials(upsertions=(cred(),)))
    state = ControllerState.from_dict(json.loads(json.dumps(c.state.to_dict())))
    assert state.image.acls == (acl(),) and state.image.scram_credentials == (cred(),)


def test_an_image_without_acls_keeps_the_old_shape():
    image = MetadataImage.empty(cluster_id="x").to_dict()
    assert "acls" not in image and "scram_credentials" not in image
    assert MetadataImage.from_dict(image).acls == ()


def test_acls_are_stored_by_kafkas_upper_case_names():
    c = Cluster()
    c.apply(CreateAcls(acls=(dataclasses.replace(acl(), operation="read", permission="allow"),)))
    assert c.image.acls == (acl(),)
    assert not c.apply(CreateAcls(acls=(acl(),))).image_changed
