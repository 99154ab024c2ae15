"""broker.rack.file: the broker's rack, read from a file at start-up (Kubernetes: the `rack` init container's).

A broker pod learns its rack only once it is scheduled: its node's topology label, which an init container
writes to a file (operator/k8s/rack.py), as Strimzi's kafka init container writes rack.id for its start
script. The file holds the rack on its first line; an empty file means the node has no such label, and the
broker runs without a rack (Kafka's default). broker.rack, when set too, wins: an explicit setting is never
overridden by a file.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tinystream.config.settings import BrokerSettings

log = logging.getLogger(__name__)


def rack_from_text(text: str) -> str | None:
    """The rack in a rack file's text: its first line, stripped; None for an empty file."""
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    return first or None


def with_rack_file(settings: BrokerSettings) -> BrokerSettings:
    """`settings` with broker.rack from broker.rack.file; raises ValueError for a file that cannot be read
    (a missing file is a broken pod, not a rack-less node: the init container always writes one)."""
    path = settings.broker_rack_file
    if path is None or settings.broker_rack is not None:
        return settings
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"broker.rack.file {path}: cannot be read ({exc})") from exc
    rack = rack_from_text(text)
    if rack is None:
        log.warning("broker.rack.file %s is empty (the node has no rack label): broker %d runs without broker.rack",
                    path, settings.broker_id)
        return settings
    log.info("broker %d: broker.rack %s (from %s)", settings.broker_id, rack, path)
    return settings.model_copy(update={"broker_rack": rack})
