"""The __consumer_offsets codec: byte layouts, round trips, hostile input."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.broker.groups.errors import RecordDecodeError
from tinystream.broker.groups.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    ConsumerCurrentAssignmentValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerMemberKey,
    ConsumerMemberMetadataValue,
    ConsumerTargetMemberValue,
    ConsumerTargetMetadataKey,
    ConsumerTargetMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    decode_consumer_group_metadata_value,
    decode_consumer_member_value,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_value,
    encode_consumer_group_metadata_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    encode_value,
)


def _str(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def test_offset_commit_key_is_version_1_group_topic_partition() -> None:
    assert encode_key(OffsetCommitKey("g", "t", 7)) == struct.pack(">h", 1) + _str("g") + _str("t") + struct.pack(">i", 7)


def test_group_metadata_key_is_version_2_group() -> None:
    assert encode_key(GroupMetadataKey("grp")) == struct.pack(">h", 2) + _str("grp")


def test_offset_commit_value_v3_layout() -> None:
    value = OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    expected = struct.pack(">hqi", 3, 42, 5) + _str("m") + struct.pack(">q", 1000)
    assert encode_offset_commit_value(value) == expected


def test_group_metadata_value_v3_layout() -> None:
    member = MemberMetadata(
        member_id="m1",
        group_instance_id=None,
        client_id="c",
        client_host="/h",
        rebalance_timeout=300,
        session_timeout=100,
        subscription=b"S",
        assignment=b"AA",
    )
    value = GroupMetadataValue(
        protocol_type="consumer", generation=4, protocol="range", leader="m1", current_state_timestamp=9, members=(member,)
    )
    expected = (
        struct.pack(">h", 3)
        + _str("consumer")
        + struct.pack(">i", 4)
        + _str("range")
        + _str("m1")
        + struct.pack(">q", 9)
        + struct.pack(">i", 1)
        + _str("m1")
        + struct.pack(">h", -1)  # null group instance id
        + _str("c")
        + _str("/h")
        + struct.pack(">ii", 300, 100)
        + struct.pack(">i", 1)
        + b"S"
        + struct.pack(">i", 2)
        + b"AA"
    )
    assert encode_group_metadata_value(value) == expected


def test_decode_key_recognises_all_key_versions() -> None:
    v0 = struct.pack(">h", 0) + _str("g") + _str("t") + struct.pack(">i", 1)
    assert decode_key(v0) == OffsetCommitKey("g", "t", 1)
    assert decode_key(encode_key(OffsetCommitKey("g", "t", 1))) == OffsetCommitKey("g", "t", 1)
    assert decode_key(encode_key(GroupMetadataKey("g"))) == GroupMetadataKey("g")
    # Version 3 is a KIP-848 consumer group's epoch; 4+ (its members, target assignment, share groups)
    # are skipped, not an error.
    assert decode_key(struct.pack(">h", 3) + _str("g")) == ConsumerGroupMetadataKey("g")
    assert decode_key(struct.pack(">h", 5) + _str("g") + _str("m")) == ConsumerMemberKey(5, "g", "m")
    assert decode_key(struct.pack(">h", 4) + _str("g")) == UnknownKey(4)  # partition metadata: not kept
    assert decode_key(struct.pack(">h", 11) + _str("g")) == UnknownKey(11)  # share groups


def test_consumer_member_records_round_trip_in_kafkas_layout() -> None:
    tid = uuid.UUID(int=7)
    values = [
        (ConsumerMemberKey(MEMBER_METADATA, "g", "m"), ConsumerMemberMetadataValue(
            instance_id=None, rack_id="r1", client_id="c", client_host="/h", subscribed_topic_names=("a", "b"),
            subscribed_topic_regex=None, rebalance_timeout_ms=300_000, server_assignor="range")),
        (ConsumerTargetMetadataKey("g"), ConsumerTargetMetadataValue(4)),
        (ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, "g", "m"), ConsumerTargetMemberValue(((tid, (0, 2)),))),
        (ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, "g", "m"), ConsumerCurrentAssignmentValue(
            member_epoch=4, previous_member_epoch=3, state=1, assigned=((tid, (0,)),),
            pending_revocation=((tid, (2,)),))),
    ]
    for key, value in values:
        raw_key, raw_value = encode_key(key), encode_value(value)
        assert decode_key(raw_key) == key
        assert decode_value(decode_key(raw_key), raw_value) == value
    # ConsumerGroupTargetAssignmentMemberValue v0: version, compact array (N+1), uuid, compact int32 array, tags.
    raw = encode_value(ConsumerTargetMemberValue(((tid, (0, 2)),)))
    assert raw == struct.pack(">h", 0) + b"\x02" + tid.bytes + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00\x00"
    with pytest.raises(RecordDecodeError):
        decode_consumer_member_value(TARGET_ASSIGNMENT_MEMBER, raw[:-5])


def test_consumer_group_metadata_in_kafkas_layout() -> None:
    key = encode_key(ConsumerGroupMetadataKey("g"))
    assert key == struct.pack(">h", 3) + _str("g")
    # Value v0, flexible: epoch, then an empty tagged-field section.
    value = encode_consumer_group_metadata_value(ConsumerGroupMetadataValue(7))
    assert value == struct.pack(">hi", 0, 7) + b"\x00"
    assert decode_value(decode_key(key), value) == ConsumerGroupMetadataValue(7)
    # Kafka 4.1 adds a tagged MetadataHash (tag 0, 8 bytes): skipped.
    tagged = struct.pack(">hi", 0, 7) + b"\x01\x00\x08" + b"\x00" * 8
    assert decode_consumer_group_metadata_value(tagged) == ConsumerGroupMetadataValue(7)
    with pytest.raises(RecordDecodeError):
        decode_consumer_group_metadata_value(struct.pack(">hi", 1, 7))


_text = st.text(max_size=20)


def _cstr(s: str | None) -> bytes:
    """A compact (flexible) string: unsigned varint length + 1 (0: null), then UTF-8."""
    return b"\x00" if s is None else bytes([len(s.encode()) + 1]) + s.encode()


_TID = uuid.UUID(int=7)

# One record of each KIP-848 type: key, value, and the value's bytes as Kafka's message JSONs lay them out
# (version 0, flexible: compact strings and arrays, a tagged-field section closing every struct).
KIP848_RECORDS = {
    "ConsumerGroupMetadata": (
        ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7),
        struct.pack(">hi", 0, 7) + b"\x00"),
    "ConsumerGroupMemberMetadata": (
        ConsumerMemberKey(MEMBER_METADATA, "g", "m"),
        ConsumerMemberMetadataValue(instance_id=None, rack_id="r1", client_id="c", client_host="/h",
                                    subscribed_topic_names=("a", "b"), subscribed_topic_regex=None,
                                    rebalance_timeout_ms=300_000, server_assignor="range"),
        struct.pack(">h", 0) + _cstr(None) + _cstr("r1") + _cstr("c") + _cstr("/h") + b"\x03" + _cstr("a") + _cstr("b")
        + _cstr(None) + struct.pack(">i", 300_000) + _cstr("range") + b"\x00"),
    "ConsumerGroupMemberMetadata-empty": (
        ConsumerMemberKey(MEMBER_METADATA, "g", "m"),
        ConsumerMemberMetadataValue(instance_id="i", subscribed_topic_regex="t.*"),
        struct.pack(">h", 0) + _cstr("i") + _cstr(None) + _cstr("") + _cstr("") + b"\x01" + _cstr("t.*")
        + struct.pack(">i", -1) + _cstr(None) + b"\x00"),
    "ConsumerGroupTargetAssignmentMetadata": (
        ConsumerTargetMetadataKey("g"), ConsumerTargetMetadataValue(4),
        struct.pack(">hi", 0, 4) + b"\x00"),
    "ConsumerGroupTargetAssignmentMember": (
        ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, "g", "m"), ConsumerTargetMemberValue(((_TID, (0, 2)),)),
        struct.pack(">h", 0) + b"\x02" + _TID.bytes + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00\x00"),
    "ConsumerGroupCurrentMemberAssignment": (
        ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, "g", "m"),
        ConsumerCurrentAssignmentValue(member_epoch=4, previous_member_epoch=3, state=1, assigned=((_TID, (0,)),),
                                       pending_revocation=()),
        struct.pack(">hiib", 0, 4, 3, 1) + b"\x02" + _TID.bytes + b"\x02" + struct.pack(">i", 0) + b"\x00"
        + b"\x01" + b"\x00"),
}


@pytest.mark.parametrize("name", KIP848_RECORDS)
def test_each_kip848_record_round_trips_in_kafkas_bytes(name: str) -> None:
    key, value, raw = KIP848_RECORDS[name]
    assert encode_value(value) == raw
    assert decode_value(decode_key(encode_key(key)), raw) == value
    assert decode_value(key, None) is None  # a tombstone
    with pytest.raises(RecordDecodeError, match="unsupported version 1"):
        decode_value(key, struct.pack(">h", 1) + raw[2:])
    with pytest.raises(RecordDecodeError):
        decode_value(key, raw[:-1])  # the tagged-field section cut off


_ints = st.integers(-(2**31), 2**31 - 1)
_partitions = st.lists(st.tuples(st.uuids(), st.lists(_ints, max_size=4).map(tuple)), max_size=3).map(tuple)
_kip848_values = st.one_of(
    st.builds(ConsumerGroupMetadataValue, _ints),
    st.builds(ConsumerMemberMetadataValue, instance_id=st.none() | _text, rack_id=st.none() | _text, client_id=_text,
              client_host=_text, subscribed_topic_names=st.lists(_text, max_size=3).map(tuple),
              subscribed_topic_regex=st.none() | _text, rebalance_timeout_ms=_ints,
              server_assignor=st.none() | _text),
    st.builds(ConsumerTargetMetadataValue, _ints),
    st.builds(ConsumerTargetMemberValue, _partitions),
    st.builds(ConsumerCurrentAssignmentValue, member_epoch=_ints, previous_member_epoch=_ints,
              state=st.integers(-128, 127), assigned=_partitions, pending_revocation=_partitions),
)
_KEY_OF = {ConsumerGroupMetadataValue: ConsumerGroupMetadataKey("g"),
           ConsumerMemberMetadataValue: ConsumerMemberKey(MEMBER_METADATA, "g", "m"),
           ConsumerTargetMetadataValue: ConsumerTargetMetadataKey("g"),
           ConsumerTargetMemberValue: ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, "g", "m"),
           ConsumerCurrentAssignmentValue: ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, "g", "m")}


@settings(max_examples=200, deadline=None)
@given(value=_kip848_values)
def test_kip848_values_round_trip_property(value) -> None:
    assert decode_value(_KEY_OF[type(value)], encode_value(value)) == value


def test_tombstones_decode_to_none() -> None:
    assert decode_value(OffsetCommitKey("g", "t", 0), None) is None
    assert decode_value(GroupMetadataKey("g"), None) is None
    assert decode_value(UnknownKey(5), b"\x00\x00") is None


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_value_round_trips_every_version(version: int) -> None:
    value = OffsetCommitValue(
        offset=123, leader_epoch=7 if version >= 3 else -1, metadata="meta", commit_timestamp=555,
        expire_timestamp=999 if version == 1 else -1,
    )
    data = encode_offset_commit_value(value, version)
    assert struct.unpack(">h", data[:2])[0] == version
    assert decode_offset_commit_value(data) == value


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_round_trips_every_version(version: int) -> None:
    members = (
        MemberMetadata(
            member_id="a",
            group_instance_id="inst-a" if version >= 3 else None,
            client_id="ca",
            client_host="/1",
            rebalance_timeout=200 if version >= 1 else 100,  # v0: the session timeout stands in
            session_timeout=100,
            subscription=b"\x00\x01",
            assignment=b"",
        ),
        MemberMetadata(member_id="b", client_id="cb", client_host="/2", rebalance_timeout=100, session_timeout=100),
    )
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="a",
        current_state_timestamp=77 if version >= 2 else -1,
        members=members,
    )
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue(protocol_type="consumer", generation=5, protocol=None, leader=None)
    decoded = decode_group_metadata_value(encode_group_metadata_value(value))
    assert decoded.protocol is None and decoded.leader is None and decoded.members == ()


def test_flexible_value_skips_unknown_tagged_fields() -> None:
    data = encode_offset_commit_value(OffsetCommitValue(offset=1, metadata=""), 4)
    assert data.endswith(b"\x00")  # empty tagged-field section
    with_tag = data[:-1] + bytes([1, 9, 2]) + b"zz"  # one tag (9) of 2 bytes
    assert decode_offset_commit_value(with_tag).offset == 1


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        struct.pack(">h", 3) + struct.pack(">q", 1),  # cut after the offset
        struct.pack(">h", 9) + b"\x00" * 30,  # unknown version
        struct.pack(">h", 3) + struct.pack(">qi", 1, 0) + struct.pack(">h", 500) + b"short",  # string past the end
        struct.pack(">h", 3) + struct.pack(">qi", 1, 0) + struct.pack(">h", -5),  # negative length
    ],
)
def test_bad_offset_values_raise_decode_error(data: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_offset_commit_value(data)


def test_huge_declared_member_count_fails_without_allocating() -> None:
    data = struct.pack(">h", 3) + _str("consumer") + struct.pack(">i", 1) + _str("r") + _str("l") + struct.pack(">q", 0)
    data += struct.pack(">i", 2_000_000_000)
    with pytest.raises(RecordDecodeError):
        decode_group_metadata_value(data)


def test_huge_declared_bytes_length_is_rejected() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer", generation=1, protocol="r", leader="a",
        members=(MemberMetadata(member_id="a", subscription=b"x"),),
    )
    data = bytearray(encode_group_metadata_value(value, 3))
    # The subscription's int32 length sits 1 + 4 + 4 bytes before the end (x, len(assignment)=0).
    idx = len(data) - 4 - 1 - 4
    assert struct.unpack(">i", data[idx : idx + 4])[0] == 1
    data[idx : idx + 4] = struct.pack(">i", 1 << 30)
    with pytest.raises(RecordDecodeError, match="exceeds"):
        decode_group_metadata_value(bytes(data))


def test_non_utf8_string_is_a_decode_error() -> None:
    with pytest.raises(RecordDecodeError):
        decode_key(struct.pack(">hh", 2, 2) + b"\xff\xfe")


_members = st.builds(
    MemberMetadata,
    member_id=_text,
    group_instance_id=st.none() | _text,
    client_id=_text,
    client_host=_text,
    rebalance_timeout=st.integers(-(2**31), 2**31 - 1),
    session_timeout=st.integers(-(2**31), 2**31 - 1),
    subscription=st.binary(max_size=40),
    assignment=st.binary(max_size=40),
)


@settings(max_examples=150, deadline=None)
@given(
    value=st.builds(
        GroupMetadataValue,
        protocol_type=_text,
        generation=st.integers(-(2**31), 2**31 - 1),
        protocol=st.none() | _text,
        leader=st.none() | _text,
        current_state_timestamp=st.integers(-(2**63), 2**63 - 1),
        members=st.lists(_members, max_size=4).map(tuple),
    ),
    version=st.sampled_from([3, 4]),
)
def test_group_metadata_value_round_trip_property(value: GroupMetadataValue, version: int) -> None:
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


@settings(max_examples=150, deadline=None)
@given(group=_text, topic=_text, partition=st.integers(-(2**31), 2**31 - 1))
def test_offset_commit_key_round_trip_property(group: str, topic: str, partition: int) -> None:
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_key(key)) == key


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=80))
def test_arbitrary_bytes_never_crash_the_decoders(data: bytes) -> None:
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        try:
            decode(data)
        except RecordDecodeError:
            pass
