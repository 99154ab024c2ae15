"""Keep the installed TinyStream CRDs current: the operator upgrades its own CRDs.

Helm installs a chart's crds/ folder on the first install and never again
(no upgrade, no delete), so a new chart version with a new CRD schema would
leave the old schema in place: new fields pruned, new validations missing.
That is the trap Strimzi's users fall into. Templating the CRDs instead
breaks the first install of a chart that also creates a custom resource
(Helm maps every object before it creates any, and the kind does not exist
yet), and `helm uninstall` would delete every cluster and topic with them.

So: Helm's crds/ creates them, and at start-up the operator patches each
installed TinyStream CRD whose `tinystream.io/crd-revision` is lower than its
own copy's. It never downgrades (an old operator in a rolling update leaves
a newer CRD alone), never creates or deletes one, and needs only get/patch
on exactly these two CRDs (the chart's RBAC). `operator.manageCRDs=false`
turns it off for clusters where CRDs are managed elsewhere (GitOps).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tinystream.operator.k8s.api import KubeClient

REVISION_ANNOTATION = "tinystream.io/crd-revision"
CRD_API = "apiextensions.k8s.io/v1"
OWN_GROUP = "tinystream.io"


def bundled_crds(directory: Path) -> list[dict[str, Any]]:
    """The operator's own CRDs (group tinystream.io) from `directory`."""
    crds = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition" and doc["spec"]["group"] == OWN_GROUP:
                crds.append(doc)
    return crds


def revision(crd: Mapping[str, Any] | None) -> int:
    annotations = ((crd or {}).get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get(REVISION_ANNOTATION, 0))
    except ValueError:
        return 0


def needs_upgrade(bundled: Mapping[str, Any], installed: Mapping[str, Any] | None) -> bool:
    return installed is not None and revision(installed) < revision(bundled)


async def upgrade_crds(client: KubeClient, crds: Sequence[Mapping[str, Any]], logger: logging.Logger) -> list[str]:
    """Patch the installed CRDs that are older than `crds`; the names patched."""
    upgraded = []
    for crd in crds:
        name = crd["metadata"]["name"]
        installed = await client.get(CRD_API, "CustomResourceDefinition", name)
        if installed is None:
            logger.warning("CRD %s is not installed; apply crds/ (kubectl apply --server-side -f crds/)", name)
        elif needs_upgrade(crd, installed):
            await client.apply(crd)
            logger.info("CRD %s upgraded from revision %d to %d", name, revision(installed), revision(crd))
            upgraded.append(name)
    return upgraded
