"""Log output for every TinyStream process: human text, or one JSON object per line.

`--log-format json` (or TINYSTREAM_LOG_FORMAT=json) on the `tinystream` root
command selects JSON: each record becomes
`{"ts", "level", "logger", "message", ...extras}` on one line, where the
extras are whatever a call passed in `extra=` (the broker adds `client_id`,
`correlation_id`, `api` and `peer` to request logs) and `exception` holds a
formatted traceback. Field names follow the common ECS/Loki shape loosely:
flat keys, an RFC 3339 UTC timestamp with milliseconds.
"""

from __future__ import annotations

import datetime
import enum
import logging

import orjson

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class LogFormat(str, enum.Enum):
    TEXT = "text"
    JSON = "json"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, extras included; values orjson cannot encode become str()."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry, default=str).decode()


def configure(level: int | str, fmt: LogFormat | str = LogFormat.TEXT, *, force: bool = False) -> None:
    """Set up the root logger on stderr in the chosen format."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if LogFormat(fmt) is LogFormat.JSON else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=force)


def current_format() -> LogFormat:
    """The format the root logger was configured with (TEXT when none)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, JsonFormatter):
            return LogFormat.JSON
    return LogFormat.TEXT
