"""The four configuration layers: precedence, provenance and error messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinystream.config import ConfigError, load_settings


def test_defaults_come_from_the_packaged_model() -> None:
    effective = load_settings("broker", environ={})
    assert effective.settings.port == 9092
    assert effective.settings.log_retention_ms == 7 * 24 * 3600 * 1000
    assert effective.sources == {}
    assert ("port", 9092, "default") in effective.rows()


def test_flags_beat_env_beat_file_beat_defaults(tmp_path: Path) -> None:
    config_file = tmp_path / "ts.toml"
    config_file.write_text('[broker]\nport = 1111\n"log.segment.bytes" = 2048\nnum.partitions = 3\n')
    effective = load_settings(
        "broker",
        flags={"port": "3333"},
        environ={"TINYSTREAM_PORT": "2222", "TINYSTREAM_LOG_SEGMENT_BYTES": "4096"},
        config_file=config_file,
    )
    settings = effective.settings
    assert (settings.port, settings.log_segment_bytes, settings.num_partitions) == (3333, 4096, 3)
    assert effective.sources["port"] == "flag --port"
    assert effective.sources["log.segment.bytes"] == "env TINYSTREAM_LOG_SEGMENT_BYTES"
    assert effective.sources["num.partitions"] == f"file {config_file} [broker]"


def test_ini_file_with_component_sections(tmp_path: Path) -> None:
    config_file = tmp_path / "ts.ini"
    config_file.write_text("[broker]\nmin.insync.replicas = 2\n[controller]\nport = 9999\n")
    assert load_settings("broker", config_file=config_file, environ={}).settings.min_insync_replicas == 2
    assert load_settings("controller", config_file=config_file, environ={}).settings.port == 9999


def test_sectionless_properties_file_applies_to_the_component(tmp_path: Path) -> None:
    config_file = tmp_path / "server.properties"
    config_file.write_text("auto.create.topics.enable=false\nlog.retention.bytes=1000\n")
    settings = load_settings("broker", config_file=config_file, environ={}).settings
    assert settings.auto_create_topics_enable is False
    assert settings.log_retention_bytes == 1000


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"flags": {"port": "eighty"}}, ["'eighty'", "'port'", "flag --port"]),
        ({"environ": {"TINYSTREAM_LOG_SEGMENT_BYTES": "-1"}},
         ["'-1'", "'log.segment.bytes'", "env TINYSTREAM_LOG_SEGMENT_BYTES", "greater than or equal to 14"]),
        ({"flags": {"log.cleanup.policy": "shred"}}, ["'shred'", "'log.cleanup.policy'", "flag"]),
        ({"flags": {"no.such.key": "1"}}, ["unknown key", "'no.such.key'", "flag --no-such-key"]),
    ],
)
def test_bad_values_name_key_value_and_layer(kwargs: dict, expected: list[str]) -> None:
    kwargs.setdefault("environ", {})
    with pytest.raises(ConfigError) as caught:
        load_settings("broker", **kwargs)
    for fragment in expected:
        assert fragment in str(caught.value)


def test_unknown_key_in_file_names_the_file(tmp_path: Path) -> None:
    config_file = tmp_path / "ts.toml"
    config_file.write_text("[broker]\nlog.segmnt.bytes = 10\n")
    with pytest.raises(ConfigError, match=r"unknown key 'log.segmnt.bytes' = 10 from file .*ts.toml \[broker\]"):
        load_settings("broker", config_file=config_file, environ={})


def test_bad_value_in_file_names_the_file(tmp_path: Path) -> None:
    config_file = tmp_path / "ts.toml"
    config_file.write_text("[broker]\nport = 70000\n")
    with pytest.raises(ConfigError, match=r"70000 for 'port' from file .*ts.toml"):
        load_settings("broker", config_file=config_file, environ={})


def test_unparsable_and_missing_files_are_clear(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[broker\nport=")
    with pytest.raises(ConfigError, match="cannot be parsed"):
        load_settings("broker", config_file=broken, environ={})
    with pytest.raises(ConfigError, match="not found"):
        load_settings("broker", config_file=tmp_path / "absent.toml", environ={})


def test_env_of_other_components_and_tools_is_ignored() -> None:
    effective = load_settings("controller", environ={"TINYSTREAM_ADMIN_PORT": "5", "TINYSTREAM_BOOTSTRAP": "x"})
    assert effective.sources == {}


def test_keys_outside_component_tables_are_refused(tmp_path: Path) -> None:
    config_file = tmp_path / "ts.toml"
    config_file.write_text("port = 1\n[broker]\nport = 2\n")
    with pytest.raises(ConfigError, match="outside any component table"):
        load_settings("broker", config_file=config_file, environ={})


def test_settings_are_frozen() -> None:
    settings = load_settings("broker", environ={}).settings
    with pytest.raises((TypeError, ValueError, AttributeError)):  # pydantic's frozen-instance error is a ValueError
        settings.port = 1  # type: ignore[misc]
