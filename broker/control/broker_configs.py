"""Dynamic broker configs: where IncrementalAlterConfigs on a BROKER resource takes effect.

The layers (broker_configs/dynamic.py) are kept in `<metadata dir>/broker-configs.json`
({"default": {"log.retention.ms": "60000"}, "broker": {...}}), written atomically
before they are applied and read at start, so they survive a restart. Like client
quotas (control/quotas.py), the file is the broker's own, also under a controller:
the controller's image holds no broker configs yet, so a cluster default set through
one broker applies on that broker (docs/operations.md says so).

Applying means handing the effective settings to every subscriber: the topic
manager's `use_settings` (every open log gets its new LogConfig at once) and the
network's (each listener's connection limits).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from tinystream.atomic_file import write_atomically
from tinystream.broker.broker_configs.dynamic import Change, DynamicLayers, Level
from tinystream.config.settings import BrokerSettings

log = logging.getLogger(__name__)


class BrokerConfigs:
    FILE = "broker-configs.json"

    def __init__(self, metadata_dir: str | Path | None, static: BrokerSettings) -> None:
        self.path = Path(metadata_dir) / self.FILE if metadata_dir is not None else None
        self.static = static
        self._subscribers: list[Callable[[BrokerSettings], None]] = []
        layers = DynamicLayers()
        if self.path is not None and self.path.exists():
            try:
                layers = DynamicLayers.from_json(json.loads(self.path.read_text()))
                layers.effective(static)  # a value this broker's static settings refuse stops the start, named
            except ValueError as exc:
                raise ValueError(f"{self.path}: not a dynamic broker config file ({exc}); fix or remove it") from exc
        self.layers = layers
        self.settings = layers.effective(static)
        if layers.default or layers.broker:
            log.info("dynamic broker configs: default %s, this broker %s", dict(layers.default), dict(layers.broker))

    def subscribe(self, apply: Callable[[BrokerSettings], None]) -> None:
        """Call `apply` with the effective settings on every change, and now if any dynamic config is stored."""
        self._subscribers.append(apply)
        if self.layers.default or self.layers.broker:
            apply(self.settings)

    def alter(self, level: Level, changes: Iterable[Change], *, validate_only: bool = False) -> None:
        """Apply `changes` to one level (raises dynamic.Refused, changing nothing, when one is refused)."""
        layers = self.layers.alter(level, changes)
        settings = layers.effective(self.static)
        if validate_only:
            return
        if self.path is not None:
            write_atomically(self.path, json.dumps(layers.to_json(), indent=1).encode(), durable=True)
        self.layers, self.settings = layers, settings
        log.info("dynamic broker configs now: default %s, this broker %s", dict(layers.default), dict(layers.broker))
        for apply in self._subscribers:
            apply(settings)
