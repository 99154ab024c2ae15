"""Dynamic broker configs: where IncrementalAlterConfigs on a BROKER resource takes effect.

Under a controller (`controller.url`) they are cluster metadata, as in KRaft
(ConfigRecord on BROKER resources): IncrementalAlterConfigs is forwarded to the
controller (`control/forwarding.py`), and every broker takes the image's
`broker_configs`, the default and its own id's layer (`use_image`, called by
`image.ImageApplier` first in its synchronous step, before partitions get their
LogConfig), so a default set through any broker applies on all, and a broker's
own layer through any broker on that one. Such a broker has no file
(`metadata_dir` None); a broker-configs.json left from standalone days is
ignored, with a warning.

A broker without a controller keeps the layers (broker_configs/dynamic.py) in
`<metadata dir>/broker-configs.json` ({"default": {"log.retention.ms": "60000"},
"broker": {...}}), written atomically before they are applied and read at
start, so they survive a restart.

Applying means handing the effective settings to every subscriber: the topic
manager's `use_settings` (every open log gets its new LogConfig at once) and the
network's (each listener's connection limits).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tinystream.atomic_file import write_atomically
from tinystream.broker.broker_configs.dynamic import Change, DynamicLayers, Level, Refused
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

    @classmethod
    def for_mode(cls, metadata_dir: str | Path | None, static: BrokerSettings) -> BrokerConfigs:
        """The file's layers for a standalone broker; none (the image's come later) under a controller."""
        if not static.controller_url:
            return cls(metadata_dir, static)
        if metadata_dir is not None and (Path(metadata_dir) / cls.FILE).exists():
            log.warning("%s is ignored: under a controller dynamic broker configs come from the controller's "
                        "metadata (set them again with kafka-configs.sh --alter; then remove the file)",
                        Path(metadata_dir) / cls.FILE)
        return cls(None, static)

    def use_image(self, plain: Mapping[str, Any]) -> None:
        """The controller image's `broker_configs` ({"default": {...}, "brokers": {"<id>": {...}}}): its
        default and this broker's layer become the configs in force (nothing is written). A value this
        broker's static settings refuse is logged and skipped: the controller checked it over the defaults,
        a broker must not stop."""
        me = str(self.static.broker_id)
        default = _usable(plain.get("default") or {}, "the cluster default", {}, self.static)
        own = _usable((plain.get("brokers") or {}).get(me) or {}, f"broker {me}", default, self.static)
        layers = DynamicLayers.from_json({"default": default, "broker": own})
        if layers == self.layers:
            return
        try:
            settings = layers.effective(self.static)
        except Refused as exc:
            log.error("dynamic broker configs of the metadata image not applied: %s", exc)
            return
        self._use(layers, settings)

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
        self._use(layers, settings)

    def _use(self, layers: DynamicLayers, settings: BrokerSettings) -> None:
        self.layers, self.settings = layers, settings
        log.info("dynamic broker configs now: default %s, this broker %s", dict(layers.default), dict(layers.broker))
        for apply in self._subscribers:
            apply(settings)


def _usable(values: object, where: str, under: Mapping[str, str], static: BrokerSettings) -> dict[str, str]:
    """The keys of one image layer this broker can apply: dynamic, text, and accepted (one at a time, over
    `under` and the static settings); the others logged."""
    if not isinstance(values, Mapping):
        log.error("ignoring the dynamic broker configs of %s in the metadata image: not a mapping", where)
        return {}
    good: dict[str, str] = {}
    for key, value in values.items():
        try:
            DynamicLayers.from_json({"default": {**under, key: value}}).effective(static)
        except (ValueError, TypeError) as exc:  # Refused is a ValueError
            log.error("ignoring %s=%r of %s in the metadata image: %s", key, value, where, exc)
            continue
        good[key] = value
    return good
