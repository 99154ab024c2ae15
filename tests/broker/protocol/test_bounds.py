"""bounds: lengths are checked against the bytes present before kio allocates (CVE-2022-34917 class)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial.writers import write_unsigned_varint

from tinystream.broker.protocol.bounds import check_entity, read_uvarint
from tinystream.broker.protocol.codec import encode_request, schemas
from tinystream.broker.protocol.errors import MalformedRequest

METADATA_V12 = schemas(3, 12).request_type
FETCH_V12 = schemas(1, 12).request_type


def uvarint(n: int) -> bytes:
    b = io.BytesIO()
    write_unsigned_varint(b, n)
    return b.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        uvarint(2**32 + 1),  # kio's native reader aborts the process on this one
        uvarint(2**31),
        uvarint(1000) + b"\x00" * 10,  # 999 topics in 10 bytes
        b"\xff\xff\xff\xff\xff\x01",  # varint longer than 5 bytes
        b"",
        b"\x02",  # one topic, then nothing
        b"\x01\x00\x00" + uvarint(5),  # 5 tagged fields, none present
        b"\x01\x00\x00\x01\x07" + uvarint(2**30),  # tagged field longer than the request
    ],
)
def test_lies_about_lengths_are_refused(data):
    with pytest.raises(MalformedRequest):
        check_entity(METADATA_V12, data)


def test_a_valid_message_is_walked_to_its_end():
    body = METADATA_V12(topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    frame = encode_request(body, correlation_id=1)
    s = schemas(3, 12)
    header_end = check_entity(s.request_header_type, frame, 4)
    assert check_entity(METADATA_V12, frame, header_end) == len(frame)


def test_known_tagged_fields_are_walked_inside_their_size():
    s = schemas(1, 12)
    body = FETCH_V12(cluster_id="abc", replica_id=-1, max_wait=__import__("datetime").timedelta(0), min_bytes=1,
                     max_bytes=1, isolation_level=0, session_id=0, session_epoch=-1, topics=(),
                     forgotten_topics_data=(), rack_id="")
    frame = encode_request(body, correlation_id=1)
    header_end = check_entity(s.request_header_type, frame, 4)
    assert check_entity(FETCH_V12, frame, header_end) == len(frame)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_never_crash_the_walker(data):
    try:
        end = check_entity(FETCH_V12, data)
    except MalformedRequest:
        return
    assert end <= len(data)


def test_read_uvarint():
    assert read_uvarint(uvarint(300), 0, 2) == (300, 2)
    with pytest.raises(MalformedRequest):
        read_uvarint(b"\x80", 0, 1)


def test_null_in_a_non_nullable_field_is_refused():
    """kio turns a -1 length into None even where the schema forbids null (found by fuzzing)."""
    produce_v3 = schemas(0, 3).request_type
    # transactional_id null (allowed), acks, timeout, then topic_data = null (not allowed).
    data = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\xff\xff\xff\xff"
    with pytest.raises(MalformedRequest):
        check_entity(produce_v3, data)
    ok = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x00"
    assert check_entity(produce_v3, ok) == len(ok)
