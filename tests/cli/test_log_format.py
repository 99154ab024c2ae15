"""`--log-format json` / TINYSTREAM_LOG_FORMAT=json: one JSON object per line."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from tinystream.log_format import JsonFormatter


def test_json_formatter_keeps_extras_and_exceptions():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord("x", logging.ERROR, __file__, 1, "failed %s", ("y",),
                                                   sys.exc_info(), extra={"client_id": "c", "obj": object()})
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "failed y" and line["level"] == "ERROR" and line["logger"] == "x"
    assert line["client_id"] == "c" and line["obj"].startswith("<object")
    assert "ValueError: boom" in line["exception"]


def _log_lines(args, env_extra=None):
    import os

    code = ("import logging, sys; from tinystream.cli import cli; "
            "cli.add_command(__import__('click').command('emit')(lambda: logging.getLogger('t').warning("
            "'hello', extra={'correlation_id': 5})), 'emit'); cli(sys.argv[1:])")
    env = {**os.environ, **(env_extra or {})}
    out = subprocess.run([sys.executable, "-c", code, *args, "emit"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stderr.strip().splitlines()


def test_cli_log_format_json_option_and_env():
    (line,) = _log_lines(["--log-format", "json"])
    entry = json.loads(line)
    assert entry["message"] == "hello" and entry["correlation_id"] == 5 and entry["logger"] == "t"
    (line,) = _log_lines([], {"TINYSTREAM_LOG_FORMAT": "json"})
    assert json.loads(line)["level"] == "WARNING"
    (line,) = _log_lines([], {"TINYSTREAM_LOG_FORMAT": "text"})
    assert line.endswith("WARNING t: hello")
