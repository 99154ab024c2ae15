"""codec: request/response round trips for every served API version, headers, errors."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.static.primitive import Records, i64Timedelta

from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    schemas,
)
from tinystream.broker.protocol.errors import MalformedRequest, UnsupportedRequest

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))
# kio's own i64 timedelta strategy reaches timedelta.min, which its native decoder
# cannot read back ("timedelta milliseconds overflow"); the broker answers such a
# frame as malformed (test_codec_rejects_overflowing_timedelta), so the round trip
# stays within what a real client can send: about ±30,000 years. (±10**16 ms was too
# wide: the decoder goes through i64 microseconds, which overflow past ~9.2 * 10**15 ms.)
st.register_type_strategy(
    i64Timedelta,
    st.integers(-(10**15), 10**15).map(lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms))),
)

SERVED = [(a.key, v) for a in api_versions.API_TABLE for v in range(a.first_served, a.max_version + 1)]


def _edges() -> list[tuple[int, int]]:
    """Per API: the lowest and highest served version and the first flexible one."""
    out = []
    for a in api_versions.API_TABLE:
        versions = range(a.first_served, a.max_version + 1)
        flexible = [v for v in versions if schemas(a.key, v).request_flexible]
        out += [(a.key, v) for v in sorted({versions[0], versions[-1], *flexible[:1]})]
    return out


EDGES = _edges()


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=[f"{k}v{v}" for k, v in SERVED])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_request_round_trip(api_key, version, data):
    body = data.draw(st.from_type(load_request_schema(api_key, version)))
    frame = encode_request(body, correlation_id=1234, client_id="client")
    request = decode_request(memoryview(frame)[4:])
    assert request.header == RequestHeader(api_key, version, 1234, "client")
    assert request.body == body
    assert request.size == len(frame) - 4


@pytest.mark.parametrize(("api_key", "version"), EDGES, ids=[f"{k}v{v}" for k, v in EDGES])
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_response_round_trip(api_key, version, data):
    body = data.draw(st.from_type(load_response_schema(api_key, version)))
    frame = encode_response(RequestHeader(api_key, version, 99, None), body)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert decode_response(api_key, version, bytes(frame[4:])) == (99, body)


def test_header_versions_follow_flexibility():
    # Metadata v9 is flexible: request header v2 (tagged fields), response header v1.
    assert schemas(3, 9).request_header_type.__version__ == 2
    assert schemas(3, 9).response_header_flexible
    assert not schemas(3, 8).response_header_flexible
    # ApiVersions v3 is flexible but always answers with response header v0.
    assert schemas(18, 3).request_flexible and not schemas(18, 3).response_header_flexible


def test_null_client_id_and_tagged_header_fields():
    s = schemas(3, 12)
    body = s.request_type(topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    frame = bytearray(encode_request(body, correlation_id=5, client_id=None)[4:])
    assert decode_request(bytes(frame)).header.client_id is None
    # Add one unknown tagged field to the header (tag 7, 2 bytes): it must be skipped.
    header_end = 2 + 2 + 4 + 2
    assert frame[header_end] == 0  # no tagged fields
    frame[header_end : header_end + 1] = b"\x01\x07\x02ab"
    assert decode_request(bytes(frame)).body == body


def test_unknown_api_and_versions():
    with pytest.raises(UnsupportedRequest):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))
    with pytest.raises(UnsupportedRequest):
        decode_request(struct.pack(">hhih", 1, 3, 1, -1))  # Fetch v3: below the served range
    with pytest.raises(UnsupportedRequest):
        decode_request(struct.pack(">hhih", 3, 13, 1, -1))  # Metadata v13: above it


@pytest.mark.parametrize("cut", [8, 9, 10, 12, 20])
def test_truncated_requests_are_malformed(cut):
    s = schemas(3, 1)
    frame = encode_request(s.request_type(topics=(s.request_class("MetadataRequestTopic")(name="abcdef"),)),
                           correlation_id=1)[4:]
    with pytest.raises(MalformedRequest):
        decode_request(frame[:cut])


def test_legacy_produce_is_parsed_with_the_v3_layout():
    s = schemas(0, 3)
    body = s.request_type(transactional_id=None, acks=1, timeout=__import__("datetime").timedelta(seconds=1),
                          topic_data=(s.request_class("TopicProduceData")(name="t", partition_data=(
                              s.request_class("PartitionProduceData")(index=0, records=b"xyz"),)),))
    frame = bytearray(encode_request(body, correlation_id=3, client_id="c")[4:])
    frame[2:4] = (2).to_bytes(2, "big")
    header_len = 2 + 2 + 4 + 2 + 1
    legacy = bytes(frame[:header_len]) + bytes(frame[header_len + 2 :])  # drop transactional_id
    request = decode_request(legacy)
    assert request.header.api_version == 2
    assert request.body.topic_data[0].partition_data[0].records == b"xyz"


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=[f"{k}v{v}" for k, v in SERVED])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fast_encoder_writes_what_kio_writes(api_key, version, data):
    import io

    from kio.serial import entity_writer

    from tinystream.broker.protocol.encoder import entity_encoder

    response_type = load_response_schema(api_key, version)
    body = data.draw(st.from_type(response_type))
    expected = io.BytesIO()
    entity_writer(response_type)(expected, body)
    out = bytearray()
    entity_encoder(response_type)(out, body)
    assert bytes(out) == expected.getvalue()


def test_codec_rejects_overflowing_timedelta():
    # OffsetCommit v3 carries retention_time_ms as an int64 that kio turns into a
    # timedelta; the smallest int64 does not fit one. It must be a malformed
    # request (connection closed, logged once), not an unhandled ValueError.
    commit = load_request_schema(8, 3)
    body = commit(group_id="g", generation_id_or_member_epoch=1, member_id="m",
                  retention_time=i64Timedelta.parse(datetime.timedelta(milliseconds=12345)), topics=())
    frame = bytearray(encode_request(body, correlation_id=7, client_id="client"))
    at = bytes(frame).index(struct.pack(">q", 12345))
    frame[at:at + 8] = struct.pack(">q", -(2**63))
    with pytest.raises(MalformedRequest, match="overflow"):
        decode_request(memoryview(bytes(frame))[4:])
