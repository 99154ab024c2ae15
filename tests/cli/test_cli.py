"""The command line: only working commands listed; config show; clear errors."""

from __future__ import annotations

import click
import orjson
from click.testing import CliRunner

from tinystream.cli import cli


def _commands(group, prefix=()):  # every (path, command) under a group, as --help lists them
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"{name} is listed but cannot be loaded"
        yield prefix + (name,), command
        if isinstance(command, click.Group):
            yield from _commands(command, prefix + (name,))


def test_every_listed_command_has_working_help() -> None:
    runner = CliRunner()
    paths = [path for path, _ in _commands(cli)]
    assert ("config", "show") in paths
    for path in paths:
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)


def test_listed_groups_are_not_empty() -> None:
    for _, command in _commands(cli):
        if isinstance(command, click.Group):
            assert command.list_commands(click.Context(command)), f"{command.name} lists no subcommand"


def test_config_show_prints_sources(monkeypatch) -> None:
    monkeypatch.setenv("TINYSTREAM_NUM_PARTITIONS", "6")
    result = CliRunner().invoke(cli, ["config", "show", "--component", "broker", "--set", "port=9999", "--json"])
    assert result.exit_code == 0, result.output
    shown = orjson.loads(result.output)
    assert shown["port"] == {"value": 9999, "source": "flag --port"}
    assert shown["num.partitions"] == {"value": 6, "source": "env TINYSTREAM_NUM_PARTITIONS"}
    assert shown["log.retention.ms"]["source"] == "default"


def test_config_show_refuses_bad_value_with_one_message(monkeypatch) -> None:
    monkeypatch.setenv("TINYSTREAM_MIN_INSYNC_REPLICAS", "zero")
    result = CliRunner().invoke(cli, ["config", "show", "--component", "broker"])
    assert result.exit_code == 1
    assert "'zero'" in result.output and "min.insync.replicas" in result.output
    assert "env TINYSTREAM_MIN_INSYNC_REPLICAS" in result.output


def test_topics_create_with_schema(tmp_path) -> None:
    from tinystream.testing.broker import BrokerThread, test_settings

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"type": "object", "required": ["id"]}')
    bad.write_text('{"type": 7}')
    with BrokerThread(test_settings(tmp_path / "data")) as broker:
        runner = CliRunner()
        ok = runner.invoke(cli, ["topics", "create", "events", "-b", broker.bootstrap, "--schema", str(good)])
        assert ok.exit_code == 0, ok.output
        spec = broker.broker.topics.get("events")
        assert spec.configs["tinystream.value.schema"] == good.read_text()
        refused = runner.invoke(cli, ["topics", "create", "events2", "-b", broker.bootstrap, "--schema", str(bad)])
        assert refused.exit_code != 0 and "tinystream.value.schema" in refused.output


def test_token_makes_a_brokers_or_the_admins_controller_token(tmp_path):
    from tinystream.controller_auth import ensure_secret_file, principal_of  # noqa: PLC0415

    secret_file = tmp_path / "controller.secret"
    secret = ensure_secret_file(secret_file)
    assert oct(secret_file.stat().st_mode & 0o777) == "0o600"
    made = CliRunner().invoke(cli, ["token", "--secret-file", str(secret_file), "--broker", "3"])
    assert made.exit_code == 0, made.output
    assert principal_of(secret, made.output.strip()) == "broker-3"
    out = tmp_path / "admin.token"
    made = CliRunner().invoke(cli, ["token", "--secret-file", str(secret_file), "--admin", "--out", str(out)])
    assert made.exit_code == 0 and principal_of(secret, out.read_text().strip()) == "admin"
    both = CliRunner().invoke(cli, ["token", "--secret-file", str(secret_file), "--admin", "--broker", "1"])
    assert both.exit_code == 2 and "exactly one of --broker ID and --admin" in both.output


def test_users_add_list_delete_keep_only_salted_credentials(tmp_path):
    from tinystream.scram_users import UserStore  # noqa: PLC0415

    users, pw = tmp_path / "users.json", tmp_path / "pw"
    pw.write_text("correct horse\n")
    added = CliRunner().invoke(cli, ["users", "add", "alice", "--file", str(users), "--password-file", str(pw)])
    assert added.exit_code == 0, added.output
    assert "correct horse" not in users.read_text() and oct(users.stat().st_mode & 0o777) == "0o600"
    assert UserStore.load(users).check_plain("alice", "correct horse")
    assert not UserStore.load(users).check_plain("alice", "wrong")
    listed = CliRunner().invoke(cli, ["users", "list", "--file", str(users)])
    assert "alice" in listed.output and "SCRAM-SHA-512" in listed.output
    gone = CliRunner().invoke(cli, ["users", "delete", "bob", "--file", str(users)])
    assert gone.exit_code == 1 and "no user 'bob'" in gone.output
