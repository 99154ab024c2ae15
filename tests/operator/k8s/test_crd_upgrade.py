"""The operator upgrades older installed CRDs, never downgrades, never creates."""

from __future__ import annotations

from k8s_requirements import require

require('yaml')

import logging

from k8s_helpers import CRD_DIR

from tinystream.operator.k8s.crds import bundled_crds, needs_upgrade, revision, upgrade_crds


def crd(rev):
    return {"metadata": {"name": "x", "annotations": {"tinystream.io/crd-revision": str(rev)}}}


def test_bundled_are_ours_only():
    names = sorted(c["metadata"]["name"] for c in bundled_crds(CRD_DIR))
    assert names == ["tinystreamclusters.tinystream.io", "tinystreamnodepools.tinystream.io",
                     "tinystreamrebalances.tinystream.io",
                     "tinystreamschemas.tinystream.io", "tinystreamusers.tinystream.io",
                     "topics.tinystream.io"]  # kopf's peering CRDs excluded
    assert all(revision(c) >= 1 for c in bundled_crds(CRD_DIR))


def test_upgrade_rules():
    assert needs_upgrade(crd(2), crd(1))
    assert not needs_upgrade(crd(1), crd(2))  # an older operator leaves a newer CRD alone
    assert not needs_upgrade(crd(1), crd(1))
    assert not needs_upgrade(crd(1), None)  # not installed: not created by the operator
    assert needs_upgrade(crd(1), {"metadata": {"name": "x"}})  # no revision: older than any


class FakeClient:
    def __init__(self, installed):
        self.installed, self.applied = installed, []

    async def get(self, api_version, kind, name, namespace=None):
        return self.installed.get(name)

    async def apply(self, obj):
        self.applied.append(obj["metadata"]["name"])


async def test_upgrade_patches_only_older_installed_crds():
    bundled = bundled_crds(CRD_DIR)
    client = FakeClient({"topics.tinystream.io": crd(0)})
    upgraded = await upgrade_crds(client, bundled, logging.getLogger("test"))
    assert upgraded == client.applied == ["topics.tinystream.io"]
