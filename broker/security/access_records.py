"""ACL and SCRAM credential records of the metadata image (or access.json), applied to this broker.

The records are the controller image's JSON (operator/controller/image.py:
AclRecord, ScramCredentialRecord); applying them replaces the authorizer's
ACLs and the user store's replicated credentials, whole.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tinystream.acls import AclBinding
from tinystream.broker.security.authorizer import Authorizer
from tinystream.scram_users import SCRAM_MECHANISMS, ScramCredential, UserStore

log = logging.getLogger(__name__)


def apply_access(image: Mapping[str, Any], *, authorizer: Authorizer | None, users: UserStore | None) -> None:
    """The image's ACLs to the authorizer, its SCRAM credentials to the user store; a bad record is logged
    and skipped (the controller checked it; a broker must not stop over one)."""
    if authorizer is not None:
        acls = []
        for item in image.get("acls", ()):
            try:
                acls.append(AclBinding.from_dict(item))
            except ValueError as exc:
                log.error("ignoring an ACL of the metadata image: %s (%r)", exc, item)
        authorizer.replace(acls)
    if users is not None:
        found: dict[str, dict[str, ScramCredential]] = {}
        for item in image.get("scram_credentials", ()):
            try:
                if item["mechanism"] not in SCRAM_MECHANISMS:
                    raise ValueError(f"unknown mechanism {item['mechanism']!r}")
                found.setdefault(item["user"], {})[item["mechanism"]] = ScramCredential.from_json(item)
            except (KeyError, TypeError, ValueError) as exc:
                log.error("ignoring a SCRAM credential of the metadata image: %s", exc)
        users.replace_replicated(found)
