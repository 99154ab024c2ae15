"""Keys and values of the __consumer_offsets topic, in Kafka's own byte layouts.

Every key and value starts with an int16 version. The key version says what
the record is (Kafka's "coordinator-key" apiKey): 0 and 1 are an offset
commit, 2 is group metadata, 3 is a KIP-848 consumer group's epoch
(ConsumerGroupMetadata), 5-8 its members: 5 a member's subscription
(ConsumerGroupMemberMetadata), 6 the target assignment's epoch, 7 a member's
target assignment, 8 a member's current assignment and epochs, so a new
coordinator takes over without a rebalance. 4 (the deprecated partition
metadata) and higher ones (share and streams groups) decode to `UnknownKey`.
A record whose value is None is a tombstone: that group or offset is gone.

Layouts (Kafka's group-coordinator message JSONs; strings are int16 length +
UTF-8, nullable ones use length -1; bytes are int32 length; arrays int32 count;
version 4 values are "flexible": compact lengths as unsigned varint N+1 and a
tagged-field section closing every struct)::

    OffsetCommitKey    v0-1  group str, topic str, partition i32
    GroupMetadataKey   v2    group str
    ConsumerGroupMetadataKey   v3    group str
    ConsumerGroupMetadataValue v0    flexible: epoch i32 (+ tagged MetadataHash in Kafka 4.1, skipped)
    ConsumerGroupMemberMetadataKey           v5  group str, member str
    ConsumerGroupMemberMetadataValue         v0  flexible: instanceId str?, rackId str?, clientId str,
                                                 clientHost str, subscribedTopicNames [str], regex str?,
                                                 rebalanceTimeoutMs i32, serverAssignor str?
    ConsumerGroupTargetAssignmentMetadataKey v6  group str;  value v0 flexible: assignmentEpoch i32
    ConsumerGroupTargetAssignmentMemberKey   v7  group str, member str;
                                                 value v0 flexible: [topicId uuid, partitions [i32]]
    ConsumerGroupCurrentMemberAssignmentKey  v8  group str, member str;
                                                 value v0 flexible: memberEpoch i32, previousMemberEpoch i32,
                                                 state i8, assigned [topicId uuid, partitions [i32]],
                                                 pendingRevocation (same)
    OffsetCommitValue  v0    offset i64, metadata str, commitTimestamp i64
                       v1    ... + expireTimestamp i64
                       v2    as v0
                       v3    offset i64, leaderEpoch i32, metadata str, commitTimestamp i64
                       v4    as v3, flexible
    GroupMetadataValue v0    protocolType str, generation i32, protocol str?, leader str?,
                             members [memberId, clientId, clientHost, sessionTimeout i32,
                                      subscription bytes, assignment bytes]
                       v1    members + rebalanceTimeout i32 (before sessionTimeout)
                       v2    + currentStateTimestamp i64 (after leader)
                       v3    members + groupInstanceId str? (after memberId)
                       v4    as v3, flexible

We write what Kafka 3.x writes: OffsetCommitKey v1, OffsetCommitValue v3,
GroupMetadataKey v2, GroupMetadataValue v3, ConsumerGroupMetadataKey v3 / Value v0. We read every version above.
The KIP-848 values have one version each, so their layouts above are data (`_LAYOUTS`: attribute and
field type in byte order), written and read by one pair of functions; the keys that name only a group
are one table too (`_GROUP_KEYS`).
Decoding checks every declared length against the bytes actually present
before using it (CVE-2022-34917) and raises RecordDecodeError.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from tinystream.broker.groups.errors import RecordDecodeError

__all__ = [
    "CONSUMER_GROUP_METADATA_KEY_VERSION",
    "CURRENT_MEMBER_ASSIGNMENT",
    "MEMBER_METADATA",
    "TARGET_ASSIGNMENT_MEMBER",
    "TARGET_ASSIGNMENT_METADATA",
    "ConsumerCurrentAssignmentValue",
    "ConsumerMemberKey",
    "ConsumerMemberMetadataValue",
    "ConsumerTargetMemberValue",
    "ConsumerTargetMetadataKey",
    "ConsumerTargetMetadataValue",
    "TopicIdPartitions",
    "decode_consumer_member_value",
    "encode_consumer_member_value",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "UnknownKey",
    "decode_consumer_group_metadata_value",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_value",
    "encode_consumer_group_metadata_value",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_commit_value",
    "encode_value",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
CONSUMER_GROUP_METADATA_KEY_VERSION = 3
_MAX_VALUE_VERSION = 4
_FLEXIBLE_FROM = 4


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    """A KIP-848 consumer group (Kafka's ConsumerGroupMetadataKey)."""

    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


#: KIP-848 member record key versions (Kafka's coordinator-key apiKeys).
MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 5, 6, 7, 8

#: Partitions by topic id, as the KIP-848 records keep them.
TopicIdPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerMemberKey:
    """One KIP-848 member's record: `kind` is MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER or CURRENT_MEMBER_ASSIGNMENT."""

    kind: int
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerTargetMetadataKey:
    group: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerMemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerTargetMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerTargetMemberValue:
    partitions: TopicIdPartitions


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerCurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS
    assigned: TopicIdPartitions = ()
    pending_revocation: TopicIdPartitions = ()


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key version this coordinator does not keep (skipped when loading)."""

    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1  # v3+; -1 = unknown
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # v1 only


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None = None  # v3+
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout: int = -1  # v1+ (v0: Kafka takes the session timeout)
    session_timeout: int = 0
    subscription: bytes = b""
    assignment: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1  # v2+
    members: tuple[MemberMetadata, ...] = ()


Key = OffsetCommitKey | GroupMetadataKey | ConsumerGroupMetadataKey | ConsumerMemberKey | ConsumerTargetMetadataKey | UnknownKey
Value = (OffsetCommitValue | GroupMetadataValue | ConsumerGroupMetadataValue | ConsumerMemberMetadataValue
         | ConsumerTargetMetadataValue | ConsumerTargetMemberValue | ConsumerCurrentAssignmentValue)
KeyToWrite = OffsetCommitKey | GroupMetadataKey | ConsumerGroupMetadataKey | ConsumerMemberKey | ConsumerTargetMetadataKey


# --------------------------------------------------------------------------- writer


class _Writer:
    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.parts: list[bytes] = []

    def int8(self, v: int) -> None:
        self.parts.append(struct.pack(">b", v))

    def int16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def uuid(self, v: uuid.UUID) -> None:
        self.parts.append(v.bytes)

    def int32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def int64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def _length(self, n: int | None, *, short: bool) -> None:
        if self.flexible:
            self.uvarint(0 if n is None else n + 1)
        elif short:
            self.int16(-1 if n is None else n)
        else:
            self.int32(-1 if n is None else n)

    def string(self, v: str | None, *, nullable: bool = False) -> None:
        if v is None and not nullable:
            raise ValueError("non-nullable string is None")
        raw = None if v is None else v.encode("utf-8")
        if raw is not None and len(raw) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self._length(None if raw is None else len(raw), short=True)
        if raw:
            self.parts.append(raw)

    def bytes_(self, v: bytes) -> None:
        self._length(len(v), short=False)
        self.parts.append(bytes(v))

    def array_length(self, n: int) -> None:
        self._length(n, short=False)

    def tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


# --------------------------------------------------------------------------- reader


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what
        self.flexible = False

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordDecodeError(f"{self.what}: truncated at byte {self.pos} (need {n} more)")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        value: int = struct.unpack(">b", self._take(1))[0]
        return value

    def int16(self) -> int:
        value: int = struct.unpack(">h", self._take(2))[0]
        return value

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def int32(self) -> int:
        value: int = struct.unpack(">i", self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = struct.unpack(">q", self._take(8))[0]
        return value

    def uvarint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
        raise RecordDecodeError(f"{self.what}: unsigned varint longer than 5 bytes")

    def _length(self, *, short: bool, nullable: bool) -> int | None:
        if self.flexible:
            n = self.uvarint() - 1
        else:
            n = self.int16() if short else self.int32()
        if n == -1 and nullable:
            return None
        if n < 0:
            raise RecordDecodeError(f"{self.what}: invalid length {n} at byte {self.pos}")
        if n > len(self.data) - self.pos:  # check before allocating anything
            raise RecordDecodeError(f"{self.what}: length {n} exceeds the {len(self.data) - self.pos} bytes left")
        return n

    def string(self, *, nullable: bool = False) -> str | None:
        n = self._length(short=True, nullable=nullable)
        if n is None:
            return None
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordDecodeError(f"{self.what}: string is not UTF-8") from exc

    def bytes_(self) -> bytes:
        n = self._length(short=False, nullable=False)
        assert n is not None
        return bytes(self._take(n))

    def array_length(self) -> int:
        n = self._length(short=False, nullable=False)
        assert n is not None
        return n

    def tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())  # size, then skip the field: we know no tags

    def version(self, max_version: int) -> int:
        version = self.int16()
        if not 0 <= version <= max_version:
            raise RecordDecodeError(f"{self.what}: unsupported version {version}")
        self.flexible = version >= _FLEXIBLE_FROM
        return version


# --------------------------------------------------------------------------- keys


#: The keys that name only a group, by class and key version.
_GROUP_KEYS: dict[type[GroupMetadataKey | ConsumerGroupMetadataKey | ConsumerTargetMetadataKey], int] = {
    GroupMetadataKey: GROUP_METADATA_KEY_VERSION,
    ConsumerGroupMetadataKey: CONSUMER_GROUP_METADATA_KEY_VERSION,
    ConsumerTargetMetadataKey: TARGET_ASSIGNMENT_METADATA,
}
_GROUP_KEY_OF_VERSION = {version: cls for cls, version in _GROUP_KEYS.items()}


def encode_key(key: KeyToWrite) -> bytes:
    """The record key: OffsetCommitKey v1, GroupMetadataKey v2, a KIP-848 key v3, v5-8."""
    w = _Writer(flexible=False)
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    elif isinstance(key, (GroupMetadataKey, ConsumerGroupMetadataKey, ConsumerTargetMetadataKey)):
        w.int16(_GROUP_KEYS[type(key)])
        w.string(key.group)
    elif isinstance(key, ConsumerMemberKey):
        if key.kind not in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
            raise ValueError(f"not a member record kind: {key.kind}")
        w.int16(key.kind)
        w.string(key.group)
        w.string(key.member_id)
    else:  # pragma: no cover - typing guards this
        raise TypeError(f"cannot encode key {key!r}")
    return w.getvalue()


def decode_key(data: bytes) -> Key:
    r = _Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in (0, 1):
        group = r.string()
        topic = r.string()
        partition = r.int32()
        assert group is not None and topic is not None
        return OffsetCommitKey(group, topic, partition)
    if version in _GROUP_KEY_OF_VERSION:
        group = r.string()
        assert group is not None
        return _GROUP_KEY_OF_VERSION[version](group)
    if version in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        group = r.string()
        member_id = r.string()
        assert group is not None and member_id is not None
        return ConsumerMemberKey(version, group, member_id)
    if version < 0:
        raise RecordDecodeError(f"__consumer_offsets key: negative version {version}")
    return UnknownKey(version)


# --------------------------------------------------------------------------- values


def encode_offset_commit_value(value: OffsetCommitValue, version: int = OFFSET_COMMIT_VALUE_VERSION) -> bytes:
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"OffsetCommitValue version {version} is not supported")
    w = _Writer(flexible=version >= _FLEXIBLE_FROM)
    w.int16(version)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    w.tagged_fields()
    return w.getvalue()


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data, "OffsetCommitValue")
    version = r.version(_MAX_VALUE_VERSION)
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.tagged_fields()
    assert metadata is not None
    return OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=expire_timestamp,
    )


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"GroupMetadataValue version {version} is not supported")
    w = _Writer(flexible=version >= _FLEXIBLE_FROM)
    w.int16(version)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol, nullable=True)
    w.string(value.leader, nullable=True)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_length(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id, nullable=True)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tagged_fields()
    w.tagged_fields()
    return w.getvalue()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data, "GroupMetadataValue")
    version = r.version(_MAX_VALUE_VERSION)
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):  # each member is >= 4 bytes, so the count is bounded by the data
        member_id = r.string()
        group_instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        assert member_id is not None and client_id is not None and client_host is not None
        members.append(
            MemberMetadata(
                member_id=member_id,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                # v0 had no rebalance timeout; Kafka uses the session timeout.
                rebalance_timeout=session_timeout if rebalance_timeout is None else rebalance_timeout,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
            )
        )
    r.tagged_fields()
    assert protocol_type is not None
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=current_state_timestamp,
        members=tuple(members),
    )


# KIP-848 values: version 0, flexible; their fields in order, then the struct's tagged fields. One layout a
# record type, read and written by the same two functions (Kafka's group-coordinator message JSONs).


def _write_strings(w: _Writer, names: tuple[str, ...]) -> None:
    w.array_length(len(names))
    for name in names:
        w.string(name)


def _read_strings(r: _Reader) -> tuple[str, ...]:
    return tuple(r.string() or "" for _ in range(r.array_length()))


def _write_partitions(w: _Writer, partitions: TopicIdPartitions) -> None:
    w.array_length(len(partitions))
    for topic_id, parts in partitions:
        w.uuid(topic_id)
        w.array_length(len(parts))
        for p in parts:
            w.int32(p)
        w.tagged_fields()


def _read_partitions(r: _Reader) -> TopicIdPartitions:
    out = []
    for _ in range(r.array_length()):  # each entry is >= 18 bytes: the count is bounded by the data
        topic_id = r.uuid()
        parts = tuple(r.int32() for _ in range(r.array_length()))
        r.tagged_fields()  # Kafka 4.3's AssignmentEpochs (tag 0) is skipped
        out.append((topic_id, parts))
    return tuple(out)


class _Type(NamedTuple):
    """A field type of the KIP-848 layouts: how to write it and read it."""

    write: Callable[[_Writer, Any], None]
    read: Callable[[_Reader], Any]


_INT8 = _Type(_Writer.int8, _Reader.int8)
_INT32 = _Type(_Writer.int32, _Reader.int32)
_STRING = _Type(lambda w, v: w.string(v), lambda r: r.string())
_NULLABLE_STRING = _Type(lambda w, v: w.string(v, nullable=True), lambda r: r.string(nullable=True))
_STRINGS = _Type(_write_strings, _read_strings)
_PARTITIONS = _Type(_write_partitions, _read_partitions)  # [topicId uuid, partitions [i32]]

_MemberValue = (ConsumerMemberMetadataValue | ConsumerTargetMetadataValue | ConsumerTargetMemberValue
                | ConsumerCurrentAssignmentValue)
_KIP848Value = ConsumerGroupMetadataValue | _MemberValue
_V = TypeVar("_V", bound=_KIP848Value)


class _Layout(NamedTuple):
    name: str  # Kafka's name of the value, for errors
    fields: tuple[tuple[str, _Type], ...]  # attribute and type, in the order of the bytes


_LAYOUTS: dict[type, _Layout] = {  # every _KIP848Value type
    ConsumerGroupMetadataValue: _Layout("ConsumerGroupMetadataValue", (("epoch", _INT32),)),
    ConsumerMemberMetadataValue: _Layout("ConsumerGroupMemberMetadataValue", (
        ("instance_id", _NULLABLE_STRING), ("rack_id", _NULLABLE_STRING), ("client_id", _STRING),
        ("client_host", _STRING), ("subscribed_topic_names", _STRINGS), ("subscribed_topic_regex", _NULLABLE_STRING),
        ("rebalance_timeout_ms", _INT32), ("server_assignor", _NULLABLE_STRING))),
    ConsumerTargetMetadataValue: _Layout("ConsumerGroupTargetAssignmentMetadataValue", (("assignment_epoch", _INT32),)),
    ConsumerTargetMemberValue: _Layout("ConsumerGroupTargetAssignmentMemberValue", (("partitions", _PARTITIONS),)),
    ConsumerCurrentAssignmentValue: _Layout("ConsumerGroupCurrentMemberAssignmentValue", (
        ("member_epoch", _INT32), ("previous_member_epoch", _INT32), ("state", _INT8),
        ("assigned", _PARTITIONS), ("pending_revocation", _PARTITIONS))),
}

#: The value type of each KIP-848 member or target record, by key version.
_MEMBER_VALUES: dict[int, type[_MemberValue]] = {
    MEMBER_METADATA: ConsumerMemberMetadataValue,
    TARGET_ASSIGNMENT_METADATA: ConsumerTargetMetadataValue,
    TARGET_ASSIGNMENT_MEMBER: ConsumerTargetMemberValue,
    CURRENT_MEMBER_ASSIGNMENT: ConsumerCurrentAssignmentValue,
}


def _encode_v0(value: _KIP848Value) -> bytes:
    w = _Writer(flexible=True)
    w.int16(0)
    for attribute, type_ in _LAYOUTS[type(value)].fields:
        type_.write(w, getattr(value, attribute))
    w.tagged_fields()
    return w.getvalue()


def _decode_v0(cls: type[_V], data: bytes) -> _V:
    layout = _LAYOUTS[cls]
    r = _Reader(data, layout.name)
    version = r.int16()
    if version != 0:
        raise RecordDecodeError(f"{layout.name}: unsupported version {version}")
    r.flexible = True
    fields = {attribute: type_.read(r) for attribute, type_ in layout.fields}
    r.tagged_fields()
    return cls(**fields)


def encode_consumer_group_metadata_value(value: ConsumerGroupMetadataValue) -> bytes:
    return _encode_v0(value)


def decode_consumer_group_metadata_value(data: bytes) -> ConsumerGroupMetadataValue:
    return _decode_v0(ConsumerGroupMetadataValue, data)


def encode_consumer_member_value(value: _MemberValue) -> bytes:
    """A KIP-848 member or target record value, version 0 (flexible)."""
    return _encode_v0(value)


def decode_consumer_member_value(kind: int, data: bytes) -> _MemberValue:
    """The value of a KIP-848 record of key version `kind` (5-8)."""
    cls = _MEMBER_VALUES.get(kind)
    if cls is None:
        raise RecordDecodeError(f"not a KIP-848 member record: key version {kind}")
    return _decode_v0(cls, data)


def encode_value(value: Value | None) -> bytes | None:
    """Encode a value at the version we write; None stays None (a tombstone)."""
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        return encode_offset_commit_value(value)
    if isinstance(value, GroupMetadataValue):
        return encode_group_metadata_value(value)
    if isinstance(value, _KIP848Value):
        return _encode_v0(value)
    raise TypeError(f"cannot encode value {value!r}")  # pragma: no cover


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """Decode the value that belongs to `key`; None for a tombstone or an unknown key."""
    if data is None or isinstance(key, UnknownKey):
        return None
    if isinstance(key, OffsetCommitKey):
        return decode_offset_commit_value(data)
    if isinstance(key, ConsumerGroupMetadataKey):
        return decode_consumer_group_metadata_value(data)
    if isinstance(key, ConsumerMemberKey):
        return decode_consumer_member_value(key.kind, data)
    if isinstance(key, ConsumerTargetMetadataKey):
        return decode_consumer_member_value(TARGET_ASSIGNMENT_METADATA, data)
    return decode_group_metadata_value(data)
