"""Every topic config TinyStream accepts, once: Kafka name, type, range, default, and who applies it.

The controller (operator/controller/topic_config.py), the broker
(broker/topics/config.py: validation, DescribeConfigs, the log's LogConfig)
and the Topic custom resource all read this table, so a name is accepted or
refused the same way whichever path a request takes (a standalone broker's
CreateTopics, one forwarded to a controller, a Topic resource).

`applied_by` says which part acts on a key:

    LOG         the partition log (storage.base.LogConfig): segments, retention, flush, ...
    PRODUCE     the leader's produce path (`tinystream.value.schema`, `confluent.*.schema.validation`)
    CONTROLLER  the controller's decisions (unclean leader election)
    REPLICATION the leader's and followers' replication throttles (broker/replication/throttle.py)
    NOT_APPLIED accepted and kept, so Kafka tools and Topic resources that set it work,
                but TinyStream does not act on it (DescribeConfigs marks it read-only
                and says so in its documentation)

Kafka's TopicConfig is the precedent for names, types and ranges; a key's
default is the broker setting that backs it (the synonym DescribeConfigs
shows: `retention.ms` <- `log.retention.ms`), else Kafka's own default.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import jsonschema
from jsonschema.exceptions import SchemaError

from tinystream.config.settings import BrokerSettings

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

VALUE_SCHEMA = "tinystream.value.schema"
# Registry-backed validation (Confluent Server's broker-side schema validation names).
VALUE_SCHEMA_VALIDATION = "confluent.value.schema.validation"
KEY_SCHEMA_VALIDATION = "confluent.key.schema.validation"
VALUE_SUBJECT_STRATEGY = "confluent.value.subject.name.strategy"
KEY_SUBJECT_STRATEGY = "confluent.key.subject.name.strategy"
TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ config_type (Kafka's ConfigEntry.ConfigType)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


class AppliedBy(enum.Enum):
    LOG = "log"
    PRODUCE = "produce"
    CONTROLLER = "controller"
    REPLICATION = "replication"
    NOT_APPLIED = "not applied"


class InvalidConfig(ValueError):
    """A config name or value Kafka would refuse (INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    name: str  # Kafka topic config name
    type: ConfigType
    parse: Callable[[str], object]  # Kafka's string form -> the value; raises InvalidConfig
    applied_by: AppliedBy
    doc: str
    broker_setting: str = ""  # BrokerSettings attribute holding the default ("" when none backs it)
    broker_key: str = ""  # its Kafka name (the synonym)
    default: object = None  # the default when no broker setting backs it


def _integer(low: int, high: int, *, none_at: int | None = None) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            value = int(text.strip())
        except (ValueError, AttributeError):
            raise InvalidConfig(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise InvalidConfig(f"{value} is outside [{low}, {high}]")
        return None if none_at is not None and value == none_at else value

    return parse


def _double(low: float, high: float) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            value = float(text.strip())
        except (ValueError, AttributeError):
            raise InvalidConfig(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise InvalidConfig(f"{value} is outside [{low}, {high}]")
        return value

    return parse


def _choice(*choices: str) -> Callable[[str], object]:
    def parse(text: str) -> object:
        if text not in choices:
            raise InvalidConfig(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _text(text: str) -> object:
    return text


ALL_REPLICAS = "*"
_REPLICA = re.compile(r"\s*(\d+)\s*:\s*(\d+)\s*")


def throttled_replicas(text: str) -> tuple[tuple[int, int], ...] | None:
    """leader/follower.replication.throttled.replicas: None for "*" (every replica), else the
    (partition, broker id) pairs; "" is none. Kafka's ThrottledReplicaListValidator, same message."""
    if text.strip() == ALL_REPLICAS:
        return None
    if not text.strip():
        return ()
    pairs = []
    for item in text.split(","):
        match = _REPLICA.fullmatch(item)
        if match is None:
            raise InvalidConfig(f"{text!r} must be the literal '*' or a list of replicas in the following "
                                f"format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
        pairs.append((int(match[1]), int(match[2])))
    return tuple(pairs)


def _throttled_replicas(text: str) -> object:
    throttled_replicas(text)
    return text


def _cleanup_policy(text: str) -> object:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise InvalidConfig(f"{text!r}: cleanup.policy is a list of delete and/or compact")
    return ",".join(dict.fromkeys(parts))


def _boolean(text: str) -> object:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidConfig(f"{text!r} is not a boolean")
    return lowered == "true"


def _subject_strategy(text: str) -> object:
    """TopicNameStrategy only (its full class name or short name); the record-name strategies are refused.

    RecordNameStrategy and TopicRecordNameStrategy name the subject after the record's schema (Avro's
    full name, ...): the broker would have to fetch and parse every schema, for every format, to know
    the subject. Refused rather than accepted and ignored.
    """
    name = text.strip()
    if name in (TOPIC_NAME_STRATEGY, "TopicNameStrategy"):
        return TOPIC_NAME_STRATEGY
    short = name.rsplit(".", 1)[-1]
    if short in ("RecordNameStrategy", "TopicRecordNameStrategy"):
        raise InvalidConfig(f"{name!r} is not supported: the broker validates with TopicNameStrategy only "
                            "(subject <topic>-key / <topic>-value)")
    raise InvalidConfig(f"{name!r} is not a subject name strategy ({TOPIC_NAME_STRATEGY})")


def _schema_problem(text: object) -> tuple[str, str] | None:
    """(what is wrong, detail) when `text` is not a JSON Schema document (Draft 2020-12 unless it says `$schema`)."""
    if not isinstance(text, str):
        return "not a string", type(text).__name__
    try:
        schema = json.loads(text)
    except ValueError as exc:
        return "not a JSON document", str(exc)
    if not isinstance(schema, (dict, bool)):
        return "not an object or a boolean", type(schema).__name__
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        return f"not a valid JSON Schema at {where}", exc.message
    bad_pattern = pattern_problem(schema)
    if bad_pattern is not None:
        return "a schema with a pattern the broker cannot run in linear time", bad_pattern
    remote = remote_reference(schema)
    if remote is not None:
        return ("a schema with a remote reference", f"{remote!r}: only references inside the document (#...) are "
                "allowed; a broker must not fetch URLs (a topic config would make it call any address)")
    return None


_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


def patterns(schema: object) -> list[str]:
    """Every regular expression in `schema`: `pattern` values and `patternProperties` keys, at any depth."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                found.append(value)
            elif key == "patternProperties" and isinstance(value, dict):
                found += [k for k in value if isinstance(k, str)]
            found += patterns(value)
    elif isinstance(schema, list):
        for item in schema:
            found += patterns(item)
    return found


def pattern_problem(schema: object) -> str | None:
    """Why a pattern of `schema` cannot run under RE2 (linear time: no catastrophic backtracking), if one cannot.

    Python's `re` on every produced record let one topic schema such as `(a+)+$` stall the
    broker; RE2 refuses what it cannot run in linear time (lookarounds, backreferences).
    """
    import re2  # google-re2

    for text in patterns(schema):
        try:
            re2.compile(text)
        except Exception as exc:  # noqa: BLE001 - re2.error / re2.Error by version
            return f"{text!r}: {exc}"
    return None


def remote_reference(schema: object) -> str | None:
    """The first reference in `schema` that points outside the document (not starting with '#'), if any."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in _REFERENCE_KEYWORDS and isinstance(value, str) and not value.startswith("#"):
                return value
            found = remote_reference(value)
            if found is not None:
                return found
    elif isinstance(schema, list):
        for item in schema:
            found = remote_reference(item)
            if found is not None:
                return found
    return None


def schema_error(text: object) -> str | None:
    """Why `text` is not a JSON Schema document, as a phrase ("is not a JSON document: ..."), or None."""
    problem = _schema_problem(text)
    return None if problem is None else f"is {problem[0]}: {problem[1]}"


def _json_schema(text: str) -> object:
    problem = _schema_problem(text)
    if problem is not None:
        what, detail = problem
        if what.startswith("not a valid JSON Schema"):
            what = what.replace("not a valid", "invalid", 1)
        elif what == "not an object or a boolean":
            what = f"a JSON Schema is an object or a boolean, got {detail}"
            raise InvalidConfig(what)
        raise InvalidConfig(f"{what}: {detail}")
    return text


_LOG, _PRODUCE, _CONTROLLER, _NOT_APPLIED = AppliedBy.LOG, AppliedBy.PRODUCE, AppliedBy.CONTROLLER, AppliedBy.NOT_APPLIED
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
_LONG = _integer(0, _INT64_MAX)
_NOT_APPLIED_DOC = "accepted for compatibility with Kafka tools; TinyStream does not apply it"

TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    k.name: k
    for k in (
        TopicConfigKey("cleanup.policy", ConfigType.LIST, _cleanup_policy, _LOG,
                       "delete old segments, compact to the last value per key, or both",
                       "log_cleanup_policy", "log.cleanup.policy"),
        TopicConfigKey("delete.retention.ms", ConfigType.LONG, _LONG, _LOG,
                       "how long tombstones are kept in compacted topics",
                       "log_cleaner_delete_retention_ms", "log.cleaner.delete.retention.ms"),
        TopicConfigKey("flush.messages", ConfigType.LONG, _integer(1, _INT64_MAX, none_at=_INT64_MAX), _LOG,
                       "fsync after this many messages (unset: leave it to the OS)",
                       "log_flush_interval_messages", "log.flush.interval.messages"),
        TopicConfigKey("flush.ms", ConfigType.LONG, _integer(0, _INT64_MAX, none_at=_INT64_MAX), _LOG,
                       "fsync at least this often (unset: leave it to the OS)",
                       "log_flush_interval_ms", "log.flush.interval.ms"),
        TopicConfigKey("index.interval.bytes", ConfigType.INT, _integer(0, _INT32_MAX), _LOG,
                       "bytes between offset index entries", "log_index_interval_bytes", "log.index.interval.bytes"),
        TopicConfigKey("max.message.bytes", ConfigType.INT, _integer(0, _INT32_MAX), _LOG,
                       "largest record batch the topic accepts", "message_max_bytes", "message.max.bytes"),
        TopicConfigKey("message.timestamp.type", ConfigType.STRING, _choice("CreateTime", "LogAppendTime"), _LOG,
                       "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append",
                       "log_message_timestamp_type", "log.message.timestamp.type"),
        TopicConfigKey("min.insync.replicas", ConfigType.INT, _integer(1, _INT32_MAX), _LOG,
                       "in-sync replicas an acks=all produce needs", "min_insync_replicas", "min.insync.replicas"),
        TopicConfigKey("retention.bytes", ConfigType.LONG, _integer(-1, _INT64_MAX), _LOG,
                       "size a partition may grow to before old segments go (-1: no limit)",
                       "log_retention_bytes", "log.retention.bytes"),
        TopicConfigKey("retention.ms", ConfigType.LONG, _integer(-1, _INT64_MAX), _LOG,
                       "age after which old segments go (-1: keep forever)", "log_retention_ms", "log.retention.ms"),
        TopicConfigKey("segment.bytes", ConfigType.INT, _integer(14, _INT32_MAX), _LOG,
                       "segment file size before a new segment is rolled", "log_segment_bytes", "log.segment.bytes"),
        TopicConfigKey("segment.ms", ConfigType.LONG, _integer(1, _INT64_MAX), _LOG,
                       "age after which the active segment is rolled", "log_roll_ms", "log.roll.ms"),
        TopicConfigKey(UNCLEAN_LEADER_ELECTION_ENABLE, ConfigType.BOOLEAN, _boolean, _CONTROLLER,
                       "allow a replica outside the ISR to become leader (may lose data)",
                       broker_key=UNCLEAN_LEADER_ELECTION_ENABLE, default=False),
        TopicConfigKey(VALUE_SCHEMA, ConfigType.STRING, _json_schema, _PRODUCE,
                       "JSON Schema every record value must match (the leader rejects the batch otherwise)"),
        TopicConfigKey(VALUE_SCHEMA_VALIDATION, ConfigType.BOOLEAN, _boolean, _PRODUCE,
                       "every record value must carry a schema id (Confluent's wire format) registered under the "
                       "value subject in confluent.schema.registry.url", default=False),
        TopicConfigKey(KEY_SCHEMA_VALIDATION, ConfigType.BOOLEAN, _boolean, _PRODUCE,
                       "every record key must carry a schema id (Confluent's wire format) registered under the "
                       "key subject in confluent.schema.registry.url", default=False),
        TopicConfigKey(VALUE_SUBJECT_STRATEGY, ConfigType.STRING, _subject_strategy, _PRODUCE,
                       "how the value subject is named: TopicNameStrategy (<topic>-value) only",
                       default=TOPIC_NAME_STRATEGY),
        TopicConfigKey(KEY_SUBJECT_STRATEGY, ConfigType.STRING, _subject_strategy, _PRODUCE,
                       "how the key subject is named: TopicNameStrategy (<topic>-key) only",
                       default=TOPIC_NAME_STRATEGY),
        # Kafka's other topic configs (Kafka 3.x/4.x TopicConfig): accepted, kept, not applied.
        TopicConfigKey("compression.type", ConfigType.STRING,
                       _choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), _NOT_APPLIED,
                       f"{_NOT_APPLIED_DOC} (batches are stored as the producer compressed them)", default="producer"),
        TopicConfigKey("file.delete.delay.ms", ConfigType.LONG, _LONG, _NOT_APPLIED, _NOT_APPLIED_DOC, default=60000),
        TopicConfigKey(FOLLOWER_THROTTLED_REPLICAS, ConfigType.LIST, _throttled_replicas, AppliedBy.REPLICATION,
                       "replicas (partition:broker,... or *) whose follower fetches are throttled to the follower's "
                       "follower.replication.throttled.rate while out of the ISR", default=""),
        TopicConfigKey(LEADER_THROTTLED_REPLICAS, ConfigType.LIST, _throttled_replicas, AppliedBy.REPLICATION,
                       "replicas (partition:broker,... or *) whose leader serves out-of-ISR followers within the "
                       "leader's leader.replication.throttled.rate", default=""),
        TopicConfigKey("local.retention.bytes", ConfigType.LONG, _integer(-2, _INT64_MAX), _NOT_APPLIED,
                       _NOT_APPLIED_DOC, default=-2),
        TopicConfigKey("local.retention.ms", ConfigType.LONG, _integer(-2, _INT64_MAX), _NOT_APPLIED,
                       _NOT_APPLIED_DOC, default=-2),
        TopicConfigKey("max.compaction.lag.ms", ConfigType.LONG, _integer(1, _INT64_MAX), _NOT_APPLIED,
                       _NOT_APPLIED_DOC, default=_INT64_MAX),
        TopicConfigKey("message.downconversion.enable", ConfigType.BOOLEAN, _boolean, _NOT_APPLIED,
                       _NOT_APPLIED_DOC, default=True),
        TopicConfigKey("message.format.version", ConfigType.STRING, _text, _NOT_APPLIED, _NOT_APPLIED_DOC,
                       default="3.0-IV1"),
        TopicConfigKey("message.timestamp.after.max.ms", ConfigType.LONG, _LONG, _NOT_APPLIED, _NOT_APPLIED_DOC,
                       default=_INT64_MAX),
        TopicConfigKey("message.timestamp.before.max.ms", ConfigType.LONG, _LONG, _NOT_APPLIED, _NOT_APPLIED_DOC,
                       default=_INT64_MAX),
        TopicConfigKey("message.timestamp.difference.max.ms", ConfigType.LONG, _LONG, _NOT_APPLIED,
                       _NOT_APPLIED_DOC, default=_INT64_MAX),
        TopicConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, _double(0.0, 1.0), _NOT_APPLIED,
                       _NOT_APPLIED_DOC, default=0.5),
        TopicConfigKey("min.compaction.lag.ms", ConfigType.LONG, _LONG, _NOT_APPLIED, _NOT_APPLIED_DOC, default=0),
        TopicConfigKey("preallocate", ConfigType.BOOLEAN, _boolean, _NOT_APPLIED, _NOT_APPLIED_DOC, default=False),
        TopicConfigKey("remote.storage.enable", ConfigType.BOOLEAN, _boolean, _NOT_APPLIED,
                       f"{_NOT_APPLIED_DOC} (no tiered storage)", default=False),
        TopicConfigKey("segment.index.bytes", ConfigType.INT, _integer(4, _INT32_MAX), _NOT_APPLIED,
                       _NOT_APPLIED_DOC, default=10485760),
        TopicConfigKey("segment.jitter.ms", ConfigType.LONG, _LONG, _NOT_APPLIED, _NOT_APPLIED_DOC, default=0),
    )
}


def as_text(value: object) -> str | None:
    """Kafka's string form of a config value (JSON scalars from a Topic resource or the image)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse(name: str, value: object) -> object:
    """The typed value of one config; InvalidConfig names the key and the rule."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise InvalidConfig(f"unknown topic config {name!r}")
    text = as_text(value)
    if text is None:
        raise InvalidConfig(f"{name}: null value")
    try:
        return key.parse(text)
    except InvalidConfig as exc:
        raise InvalidConfig(f"{name}: {exc}") from None


def validate(overrides: Mapping[str, object]) -> dict[str, str]:
    """Check every name and value; returns the overrides in Kafka's string form. Raises InvalidConfig."""
    clean: dict[str, str] = {}
    for name, value in overrides.items():
        parse(name, value)
        text = as_text(value)
        assert text is not None  # parse refused None
        clean[name] = text
    return clean


def broker_default(settings: BrokerSettings, key: TopicConfigKey) -> object:
    """A key's default on this broker: the backing broker setting, else the table's default."""
    if not key.broker_setting:
        return key.default
    return getattr(settings, key.broker_setting)


def defaults(settings: BrokerSettings | None = None) -> dict[str, object]:
    """Every key's default under `settings` (a default broker when None): what a topic without overrides gets."""
    settings = settings if settings is not None else BrokerSettings()
    return {name: broker_default(settings, key) for name, key in TOPIC_CONFIGS.items()}
