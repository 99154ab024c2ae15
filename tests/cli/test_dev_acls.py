"""ACLs in `tinystream dev`: created through one broker, seen by every broker, kept across a controller restart.

The local cluster is the README's demo bed: a controller and three broker
processes. Its listeners are PLAINTEXT, so every client is User:ANONYMOUS;
the cluster runs with the authorizer on and ANONYMOUS a super user, which is
how one manages ACLs for the SASL users of another listener (the ACLs
themselves are checked in tests/broker/security).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tinystream.dev.cluster import LocalCluster


def describe_all(bootstrap: str) -> set[tuple[str, str, str]]:
    from confluent_kafka.admin import (  # noqa: PLC0415
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    found = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(30)
    return {(b.name, b.principal, b.operation.name) for b in found}


def test_acls_are_cluster_metadata_in_the_dev_cluster(tmp_path: Path) -> None:
    from confluent_kafka.admin import (  # noqa: PLC0415
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    cluster = LocalCluster(brokers=3, data_dir=tmp_path / "data", first_port=0, echo=lambda _: None,
                           overrides=["authorizer.class.name=acl", "super.users=User:ANONYMOUS"])
    cluster.open()
    try:
        first = cluster.brokers[0].bootstrap
        admin = AdminClient({"bootstrap.servers": first, "log_level": 0})
        for future in admin.create_acls([AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.PREFIXED,
                                                    "User:alice", "*", AclOperation.READ,
                                                    AclPermissionType.ALLOW)]).values():
            future.result(30)
        wanted = {("orders", "User:alice", "READ")}
        for b in cluster.brokers:
            deadline = time.monotonic() + 10
            while describe_all(b.bootstrap) != wanted:
                if time.monotonic() > deadline:
                    pytest.fail(f"{b.name} never showed the ACL: {describe_all(b.bootstrap)}")
                time.sleep(0.2)
        cluster.controller.restart()
        time.sleep(1)
        for b in cluster.brokers:
            assert describe_all(b.bootstrap) == wanted
        state = (tmp_path / "data" / "controller" / "state.json").read_text()
        assert '"User:alice"' in state
    finally:
        cluster.close()
