"""Data source options: parse and validate, with no I/O.

The options mirror Spark's built-in Kafka source and sink (Structured
Streaming + Kafka Integration Guide), so a job moves between
`format("kafka")` and `format("tinystream")` by changing the format name:

    bootstrap.servers | kafka.bootstrap.servers     required
    subscribe | subscribePattern | assign           exactly one (read)
    startingTimestamp > startingOffsetsByTimestamp > startingOffsets
    endingTimestamp > endingOffsetsByTimestamp > endingOffsets   (batch only)
    maxOffsetsPerTrigger, minPartitions, failOnDataLoss, includeHeaders,
    startingOffsetsByTimestampStrategy, kafkaConsumer.pollTimeoutMs,
    fetchOffset.numRetries, fetchOffset.retryIntervalMs
    topic                                           (write: overrides the column)
    kafka.*                                         passed to the client (librdkafka names)

Values through a schema registry (Confluent's serializer names, see RegistryOptions):
    schema.registry.url, schema.registry.basic.auth.user.info, value.subject,
    value.format (avro | json | protobuf), value.record.name, value.subject.name.strategy,
    mode (FAILFAST | PERMISSIVE, read), auto.register.schemas and value.schema (write);
    key.format, key.subject, key.subject.name.strategy, key.record.name, key.schema (keys too)

Spark lower-cases option names before a Python data source sees them; every
lookup here goes through a lower-cased copy, so plain dicts in tests behave
the same. Errors name the option and say what would be valid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from tinystream.spark.errors import InvalidOptionError
from tinystream.spark.offsets import (
    EARLIEST,
    LATEST,
    TopicPartition,
    assignment_from_json,
    offsets_from_json,
)

# Kafka client settings the connector owns; Spark's Kafka source refuses the same
# ones (KafkaSourceProvider.validateGeneralOptions / validateSinkOptions).
FORBIDDEN_SOURCE_CONF = {
    "auto.offset.reset": 'set the source option "startingOffsets" to "earliest" or "latest" instead',
    "enable.auto.commit": "offsets are kept in the Spark checkpoint and never committed to the broker",
    "key.deserializer": "keys are always read as bytes; cast or decode them in a DataFrame operation",
    "value.deserializer": "values are always read as bytes; cast or decode them in a DataFrame operation",
    "interceptor.classes": "interceptors are not supported",
}
FORBIDDEN_SINK_CONF = {
    "key.serializer": "keys are written as bytes (binary or UTF-8 string column)",
    "value.serializer": "values are written as bytes (binary or UTF-8 string column)",
}
UNSUPPORTED_OPTIONS = {
    "minoffsetspertrigger": "minOffsetsPerTrigger is not supported yet (use maxOffsetsPerTrigger)",
    "maxtriggerdelay": "maxTriggerDelay is not supported yet (it goes with minOffsetsPerTrigger)",
    "kafka.consumer.commitgroupid": "offsets are never committed to the broker",
}

DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs defaults to spark.network.timeout (120 s)
DEFAULT_FETCH_RETRIES = 3  # fetchOffset.numRetries, Spark's default
DEFAULT_FETCH_RETRY_INTERVAL_MS = 1000  # fetchOffset.retryIntervalMs, Spark's default


class Mode(Enum):
    BATCH = "batch"
    STREAMING = "streaming"


class TimestampStrategy(Enum):
    """What to do when no offset has a timestamp >= the requested starting timestamp."""

    ERROR = "error"
    LATEST = "latest"


# --- what to read ---------------------------------------------------------


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        # Java's Pattern.matcher(topic).matches() is a full match.
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


# --- where to start / end -------------------------------------------------


@dataclass(frozen=True)
class EarliestOffsets:
    pass


@dataclass(frozen=True)
class LatestOffsets:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    """Per-partition offsets; -2 = earliest, -1 = latest."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class GlobalTimestamp:
    """One timestamp (ms) for every partition."""

    timestamp_ms: int


@dataclass(frozen=True)
class PartitionTimestamps:
    """Per-partition timestamps (ms); -2 / -1 still mean earliest / latest."""

    timestamps: Mapping[TopicPartition, int]


OffsetSpec = EarliestOffsets | LatestOffsets | SpecificOffsets | GlobalTimestamp | PartitionTimestamps


class DecodeMode(Enum):
    """What a read does with a value it cannot decode (spark-avro's from_avro modes)."""

    FAILFAST = "FAILFAST"
    PERMISSIVE = "PERMISSIVE"


REGISTRY_FORMATS = ("avro", "json", "protobuf")  # the registry's schemaType AVRO, JSON, PROTOBUF


@dataclass(frozen=True)
class RegistryOptions:
    """Values framed by a Confluent-compatible schema registry (magic 0, schema id, Avro payload)."""

    url: str
    subject: str
    user_info: str | None = None
    value_format: str | None = None  # None: the subject's schemaType decides
    mode: DecodeMode = DecodeMode.FAILFAST
    auto_register: bool = False
    value_schema: str | None = None  # write: the schema to register (auto.register.schemas=true)
    reader_schema: str | None = None  # read: the subject's latest schema, fixed on the driver when planning
    reader_schema_type: str = "AVRO"  # ... and its schemaType
    record_name: str | None = None  # the record's full name: Record*NameStrategy subjects, the Protobuf message
    part: str = "value"  # the column these options are for: "value", or "key" (key.format, key.subject, ...)


@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    timestamp_strategy: TimestampStrategy = TimestampStrategy.ERROR
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_retries: int = DEFAULT_FETCH_RETRIES
    fetch_retry_interval_ms: int = DEFAULT_FETCH_RETRY_INTERVAL_MS
    client_conf: Mapping[str, str] = field(default_factory=dict)
    registry: RegistryOptions | None = None
    key_registry: RegistryOptions | None = None


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None
    client_conf: Mapping[str, str] = field(default_factory=dict)
    registry: RegistryOptions | None = None
    key_registry: RegistryOptions | None = None


# --- parsing ----------------------------------------------------------------


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): v for k, v in options.items() if v is not None}


def _bootstrap(opts: Mapping[str, str]) -> str:
    value = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
    if not value or not str(value).strip():
        raise InvalidOptionError(
            'option "bootstrap.servers" (or "kafka.bootstrap.servers") is required, e.g. "127.0.0.1:9092"'
        )
    return str(value).strip()


def _client_conf(opts: Mapping[str, str], forbidden: Mapping[str, str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for key, value in sorted(opts.items()):
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in forbidden:
            raise InvalidOptionError(f'Kafka option "{name}" is not supported: {forbidden[name]}')
        if name == "bootstrap.servers":
            continue
        conf[name] = str(value)
    return conf


def parse_bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidOptionError(f'option "{name}" must be "true" or "false", got {raw!r}')


def parse_int(opts: Mapping[str, str], name: str, *, minimum: int, default: int | None = None) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidOptionError(f'option "{name}" must be an integer, got {raw!r}') from None
    if value < minimum:
        raise InvalidOptionError(f'option "{name}" must be >= {minimum}, got {value}')
    return value


def parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if opts.get(name, "").strip()]
    if len(given) != 1:
        found = ", ".join(given) or "none"
        raise InvalidOptionError(
            f'exactly one of the options "subscribe", "subscribePattern", "assign" is required (found: {found})'
        )
    kind = given[0]
    value = opts[kind].strip()
    if kind == "subscribe":
        topics = tuple(sorted({t.strip() for t in value.split(",") if t.strip()}))
        if not topics:
            raise InvalidOptionError('option "subscribe" must list at least one topic: "topicA,topicB"')
        return Subscribe(topics)
    if kind == "subscribepattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise InvalidOptionError(f'option "subscribePattern" is not a valid regular expression: {exc}') from exc
        return SubscribePattern(value)
    return Assign(assignment_from_json(value))


def _offsets_json(name: str, raw: str) -> dict[TopicPartition, int]:
    try:
        return offsets_from_json(json.loads(raw))
    except json.JSONDecodeError as exc:
        raise InvalidOptionError(f'option "{name}" is not valid JSON: {exc}') from exc
    except InvalidOptionError as exc:
        raise InvalidOptionError(f'option "{name}": {exc}') from exc


def _timestamp(name: str, raw: str) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidOptionError(f'option "{name}" must be a timestamp in milliseconds, got {raw!r}') from None
    if value < 0:
        raise InvalidOptionError(f'option "{name}" must be >= 0, got {value}')
    return value


def parse_starting(opts: Mapping[str, str], mode: Mode) -> OffsetSpec:
    """startingTimestamp > startingOffsetsByTimestamp > startingOffsets (Spark's precedence)."""
    if opts.get("startingtimestamp") is not None:
        return GlobalTimestamp(_timestamp("startingTimestamp", opts["startingtimestamp"]))
    if opts.get("startingoffsetsbytimestamp") is not None:
        return PartitionTimestamps(_offsets_json("startingOffsetsByTimestamp", opts["startingoffsetsbytimestamp"]))
    raw = opts.get("startingoffsets")
    if raw is None:
        return LatestOffsets() if mode is Mode.STREAMING else EarliestOffsets()
    text = raw.strip()
    if text.lower() == "earliest":
        return EarliestOffsets()
    if text.lower() == "latest":
        if mode is Mode.BATCH:
            raise InvalidOptionError('option "startingOffsets" cannot be "latest" for batch queries')
        return LatestOffsets()
    offsets = _offsets_json("startingOffsets", text)
    for tp, offset in offsets.items():
        if mode is Mode.BATCH and offset == LATEST:
            raise InvalidOptionError(f'option "startingOffsets": latest (-1) is not allowed for batch queries ({tp})')
        if offset < EARLIEST:
            raise InvalidOptionError(f'option "startingOffsets": offset {offset} of {tp} is not valid')
    return SpecificOffsets(offsets)


def parse_ending(opts: Mapping[str, str], mode: Mode) -> OffsetSpec | None:
    """endingTimestamp > endingOffsetsByTimestamp > endingOffsets; only batch queries have an end."""
    names = ("endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets")
    if mode is Mode.STREAMING:
        given = [n for n in names if opts.get(n) is not None]
        if given:
            raise InvalidOptionError(f'option "{given[0]}" is only valid for batch queries (read, not readStream)')
        return None
    if opts.get("endingtimestamp") is not None:
        return GlobalTimestamp(_timestamp("endingTimestamp", opts["endingtimestamp"]))
    if opts.get("endingoffsetsbytimestamp") is not None:
        return PartitionTimestamps(_offsets_json("endingOffsetsByTimestamp", opts["endingoffsetsbytimestamp"]))
    raw = opts.get("endingoffsets")
    if raw is None or raw.strip().lower() == "latest":
        return LatestOffsets()
    text = raw.strip()
    if text.lower() == "earliest":
        raise InvalidOptionError('option "endingOffsets" cannot be "earliest"')
    offsets = _offsets_json("endingOffsets", text)
    for tp, offset in offsets.items():
        if offset == EARLIEST:
            raise InvalidOptionError(f'option "endingOffsets": earliest (-2) is not allowed ({tp})')
        if offset < LATEST:
            raise InvalidOptionError(f'option "endingOffsets": offset {offset} of {tp} is not valid')
    return SpecificOffsets(offsets)


def parse_read_options(options: Mapping[str, str], mode: Mode) -> ReadOptions:
    """Validate every read option at once; raise InvalidOptionError naming the first bad one."""
    opts = _lower(options)
    for name, why in UNSUPPORTED_OPTIONS.items():
        if name in opts:
            raise InvalidOptionError(why)
    strategy_raw = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    try:
        strategy = TimestampStrategy(strategy_raw)
    except ValueError:
        raise InvalidOptionError(
            f'option "startingOffsetsByTimestampStrategy" must be "error" or "latest", got {strategy_raw!r}'
        ) from None
    max_offsets = parse_int(opts, "maxOffsetsPerTrigger", minimum=1)
    if max_offsets is not None and mode is Mode.BATCH:
        max_offsets = None  # Spark ignores it for batch queries too
    return ReadOptions(
        bootstrap_servers=_bootstrap(opts),
        subscription=parse_subscription(opts),
        starting=parse_starting(opts, mode),
        ending=parse_ending(opts, mode),
        max_offsets_per_trigger=max_offsets,
        min_partitions=parse_int(opts, "minPartitions", minimum=1),
        fail_on_data_loss=parse_bool(opts, "failOnDataLoss", True),
        include_headers=parse_bool(opts, "includeHeaders", False),
        timestamp_strategy=strategy,
        poll_timeout_ms=parse_int(opts, "kafkaConsumer.pollTimeoutMs", minimum=1, default=DEFAULT_POLL_TIMEOUT_MS),
        fetch_retries=parse_int(opts, "fetchOffset.numRetries", minimum=0, default=DEFAULT_FETCH_RETRIES),
        fetch_retry_interval_ms=parse_int(
            opts, "fetchOffset.retryIntervalMs", minimum=0, default=DEFAULT_FETCH_RETRY_INTERVAL_MS
        ),
        client_conf=_client_conf(opts, FORBIDDEN_SOURCE_CONF),
        registry=parse_registry_options(opts, _single_topic(opts)),
        key_registry=parse_registry_options(opts, _single_topic(opts), part="key"),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = _lower(options)
    topic = opts.get("topic")
    topic = topic.strip() if topic and topic.strip() else None
    registry = parse_registry_options(opts, topic, writing=True)
    if registry is not None and topic is None:
        raise InvalidOptionError('writing through a schema registry needs the "topic" option (the column may not vary)')
    return WriteOptions(
        bootstrap_servers=_bootstrap(opts),
        topic=topic,
        client_conf=_client_conf(opts, FORBIDDEN_SINK_CONF),
        registry=registry,
        key_registry=parse_registry_options(opts, topic, writing=True, part="key"),
    )


def _single_topic(opts: Mapping[str, str]) -> str | None:
    topics = [t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()]
    return topics[0] if len(set(topics)) == 1 else None


KEY_OPTIONS = ("key.subject", "key.format", "key.schema", "key.record.name", "key.subject.name.strategy")


def parse_registry_options(options: Mapping[str, str], topic: str | None, *, writing: bool = False,
                           part: str = "value") -> RegistryOptions | None:
    """None without "schema.registry.url" (for keys: without a key.* option); else the validated registry options."""
    opts = _lower(options)
    url = (opts.get("schema.registry.url") or "").strip()
    if not url:
        given = [n for n in ("value.subject", "value.format", "auto.register.schemas", "value.schema", "value.record.name",
                             "value.subject.name.strategy", *KEY_OPTIONS) if n in opts]
        if given:
            raise InvalidOptionError(f'option "{given[0]}" needs "schema.registry.url"')
        return None
    if part == "key" and not any(n in opts for n in KEY_OPTIONS):
        return None  # keys stay binary unless a key.* option asks for the registry
    if not url.startswith(("http://", "https://")):
        raise InvalidOptionError(f'option "schema.registry.url" must be an http:// or https:// URL, got {url!r}')
    record_name = (opts.get(f"{part}.record.name") or "").strip() or None
    subject = _subject(opts, topic, record_name, part)
    value_format = (opts.get(f"{part}.format") or "").strip().lower() or None
    if value_format is not None and value_format not in REGISTRY_FORMATS:
        raise InvalidOptionError(f'option "{part}.format" must be one of {", ".join(REGISTRY_FORMATS)}, got {value_format!r}')
    mode_raw = (opts.get("mode") or "FAILFAST").strip().upper()
    try:
        mode = DecodeMode(mode_raw)
    except ValueError:
        raise InvalidOptionError(f'option "mode" must be "FAILFAST" or "PERMISSIVE", got {mode_raw!r}') from None
    auto_register = parse_bool(opts, "auto.register.schemas", False)
    value_schema = opts.get(f"{part}.schema")
    if auto_register and not value_schema and part == "value":
        raise InvalidOptionError('option "auto.register.schemas" needs "value.schema" (the schema to register)')
    if not writing and (auto_register or value_schema):
        raise InvalidOptionError(f'options "auto.register.schemas" and "{part}.schema" are for writes only')
    user_info = opts.get("schema.registry.basic.auth.user.info")
    if user_info is not None and ":" not in user_info:
        raise InvalidOptionError('option "schema.registry.basic.auth.user.info" must be "user:password"')
    return RegistryOptions(url=url, subject=subject, user_info=user_info, value_format=value_format, mode=mode,
                           auto_register=auto_register, value_schema=value_schema, record_name=record_name, part=part)


class SubjectNameStrategy(Enum):
    """Confluent's subject name strategies (io.confluent.kafka.serializers.subject.*)."""

    TOPIC = "TopicNameStrategy"  # <topic>-value, the default
    RECORD = "RecordNameStrategy"  # <record full name>: one subject per record type, whatever the topic
    TOPIC_RECORD = "TopicRecordNameStrategy"  # <topic>-<record full name>


def subject_name(strategy: SubjectNameStrategy, topic: str | None, record_name: str | None, part: str = "value") -> str:
    """The subject a strategy names; "" when the topic or record name it needs is missing."""
    if strategy is SubjectNameStrategy.TOPIC:
        return f"{topic}-{part}" if topic else ""
    if strategy is SubjectNameStrategy.RECORD:
        return record_name or ""
    return f"{topic}-{record_name}" if topic and record_name else ""


def _subject(opts: Mapping[str, str], topic: str | None, record_name: str | None, part: str) -> str:
    """<part>.subject as given, else the one <part>.subject.name.strategy names (part: value or key)."""
    raw = (opts.get(f"{part}.subject.name.strategy") or "").strip()
    short = raw.rsplit(".", 1)[-1] or SubjectNameStrategy.TOPIC.value
    try:
        strategy = SubjectNameStrategy(short)
    except ValueError:
        names = ", ".join(s.value for s in SubjectNameStrategy)
        raise InvalidOptionError(f'option "{part}.subject.name.strategy" must be one of {names}, got {raw!r}') from None
    given = (opts.get(f"{part}.subject") or "").strip()
    if given and raw:
        raise InvalidOptionError(f'options "{part}.subject" and "{part}.subject.name.strategy" conflict: give one')
    subject = given or subject_name(strategy, topic, record_name, part)
    if not subject and strategy is not SubjectNameStrategy.TOPIC and not record_name:
        raise InvalidOptionError(f'{strategy.value} needs "{part}.record.name" (the record\'s or message\'s full name)')
    if not subject:
        raise InvalidOptionError(
            f'option "{part}.subject" is required unless exactly one topic is read ("subscribe") or written ("topic"); '
            f"the default is {subject_name(strategy, '<topic>', record_name or '<record>', part)}"
        )
    return subject


def include_headers(options: Mapping[str, str]) -> bool:
    """Only what the schema needs (DataSource.schema() runs before full validation)."""
    return parse_bool(_lower(options), "includeHeaders", False)


def registry_options(options: Mapping[str, str], part: str = "value") -> RegistryOptions | None:
    """Only the registry options of a read (DataSource.schema() runs before the mode is known)."""
    opts = _lower(options)
    return parse_registry_options(opts, _single_topic(opts), part=part)
