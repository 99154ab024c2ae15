"""Configuration in four layers: flags > TINYSTREAM_* env > --config file > packaged defaults."""

from tinystream.config.layers import ConfigError, EffectiveConfig, load_settings
from tinystream.config.settings import (
    COMPONENTS,
    BrokerSettings,
    ControllerSettings,
    OperatorSettings,
)

__all__ = [
    "COMPONENTS",
    "BrokerSettings",
    "ConfigError",
    "ControllerSettings",
    "EffectiveConfig",
    "OperatorSettings",
    "load_settings",
]
