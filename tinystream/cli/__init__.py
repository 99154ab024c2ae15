"""The `tinystream` command line.

Each command group lives in its own module and is attached here; a command is
attached only when the code behind it exists, so `tinystream --help` lists
only commands that work.
"""

from __future__ import annotations

import importlib
import logging

import click

from tinystream import __version__
from tinystream.log_format import LogFormat, configure

# (module, attribute, name) of commands attached when importable.
_OPTIONAL_COMMANDS = [
    ("tinystream.cli.config_cmd", "config", "config"),
    ("tinystream.cli.server_cmds", "broker", "broker"),
    ("tinystream.cli.server_cmds", "controller", "controller"),
    ("tinystream.cli.server_cmds", "dev", "dev"),
    ("tinystream.cli.client_cmds", "topics", "topics"),
    ("tinystream.cli.client_cmds", "produce", "produce"),
    ("tinystream.cli.client_cmds", "consume", "consume"),
    ("tinystream.cli.client_cmds", "groups", "groups"),
    ("tinystream.cli.bench_cmds", "bench", "bench"),
    ("tinystream.cli.status_cmd", "status", "status"),
    ("tinystream.operator.k8s.cli", "operator", "operator"),
    ("tinystream.cli.demo_cmd", "demo", "demo"),
]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


def _attach_commands() -> None:
    for module_name, attribute, name in _OPTIONAL_COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith(("tinystream", "pyspark", "kopf")):
                raise  # a missing third-party dependency is an install bug: say so
            continue  # the part behind this command is not built or not installed
        command = getattr(module, attribute, None)
        if command is None or (isinstance(command, click.Group) and not command.commands):
            continue  # a group with no working subcommand stays hidden
        cli.add_command(command, name)


_attach_commands()


def main() -> None:
    cli(prog_name="tinystream")
