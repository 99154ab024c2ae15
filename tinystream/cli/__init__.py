"""The `tinystream` command line.

Each command group lives in its own module, imported only when its command
runs (LazyGroup); `tinystream --help` lists only commands whose parts are
installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging

import click

from tinystream import __version__
from tinystream.log_format import LogFormat, configure

# name -> (module, attribute, modules it needs beyond the base install).
_COMMANDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "config": ("tinystream.cli.config_cmd", "config", ()),
    "broker": ("tinystream.cli.server_cmds", "broker", ()),
    "controller": ("tinystream.cli.server_cmds", "controller", ()),
    "token": ("tinystream.cli.server_cmds", "token", ()),
    "users": ("tinystream.cli.users_cmd", "users", ()),
    "acls": ("tinystream.cli.acls_cmd", "acls", ()),
    "dev": ("tinystream.cli.server_cmds", "dev", ()),
    "topics": ("tinystream.cli.client_cmds", "topics", ()),
    "produce": ("tinystream.cli.client_cmds", "produce", ()),
    "consume": ("tinystream.cli.client_cmds", "consume", ()),
    "groups": ("tinystream.cli.client_cmds", "groups", ()),
    "transactions": ("tinystream.cli.transactions_cmd", "transactions", ()),
    "bench": ("tinystream.cli.bench_cmds", "bench", ()),
    "status": ("tinystream.cli.status_cmd", "status", ()),
    "rebalance": ("tinystream.cli.rebalance_cmd", "rebalance", ()),
    "operator": ("tinystream.operator.k8s.cli", "operator", ("kopf", "kubernetes")),  # extra [operator]
    "demo": ("tinystream.cli.demo_cmd", "demo", ()),
    "schema-registry": ("tinystream.cli.registry_cmd", "schema_registry", ("aiokafka", "fastavro")),  # extra [registry]
}


def _installed(modules: tuple[str, ...]) -> bool:
    return all(importlib.util.find_spec(name) is not None for name in modules)


class LazyGroup(click.Group):
    """Imports a command's module only when that command runs (or `--help` describes it).

    The broker, the operator (kopf) and Spark are heavy imports; `tinystream produce`
    should not pay for them. A command whose optional extra is not installed is not
    listed, so `--help` shows only commands that work.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = [name for name, (_, _, needs) in _COMMANDS.items() if _installed(needs)]
        return lazy + [name for name in super().list_commands(ctx) if name not in _COMMANDS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)  # one added with add_command
        if not _installed(entry[2]):
            return None
        module, attribute, _ = entry
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="tinystream")
@click.option("--log-level", default="INFO", show_default=True, help="Python logging level.")
@click.option("--log-format", type=click.Choice([f.value for f in LogFormat]), default=LogFormat.TEXT.value,
              envvar="TINYSTREAM_LOG_FORMAT", show_default=True,
              help="text, or json: one JSON object per line (env TINYSTREAM_LOG_FORMAT).")
def cli(log_level: str, log_format: str) -> None:
    """TinyStream: a Kafka-compatible streaming platform in Python."""
    level = logging.getLevelName(log_level.upper())
    configure(level, log_format)
    if level != logging.DEBUG:
        # The client library logs every reconnect attempt; the CLI reports failures itself.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)


def main() -> None:
    cli(prog_name="tinystream")
