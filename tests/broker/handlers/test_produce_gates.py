"""Produce's gates without a broker: each refuses what it should, lets through the rest, and the first refusal wins."""

from __future__ import annotations

import uuid

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers import produce_gates
from tinystream.broker.handlers.produce_gates import Writer
from tinystream.broker.metadata.topics import TopicSpec
from tinystream.broker.storage.batch import Record, build_batch
from tinystream.broker.storage.topic_partition import TopicPartition

SPEC = TopicSpec(name="t", topic_id=uuid.uuid4(), partitions=2, replication_factor=1)
OFFSETS = TopicSpec(name="__consumer_offsets", topic_id=uuid.uuid4(), partitions=1, replication_factor=1)


def writer(*, version: int = 9, acks: int = -1, txn_refused: bool = False, writable: bool = True) -> Writer:
    return Writer.of(version=version, acks=acks, transactional_id_refused=txn_refused, may_write=lambda name: writable)


def error_of(w: Writer, tp: TopicPartition, spec: TopicSpec | None) -> ErrorCode | None:
    refused = produce_gates.refusal(w, tp, spec)
    return None if refused is None else refused.error


def test_a_writable_partition_of_a_known_topic_passes_every_gate():
    assert produce_gates.refusal(writer(), TopicPartition("t", 1), SPEC) is None


def test_each_gate_refuses_its_case():
    tp = TopicPartition("t", 0)
    assert error_of(writer(txn_refused=True), tp, SPEC) == ErrorCode.transactional_id_authorization_failed
    assert error_of(writer(writable=False), tp, SPEC) == ErrorCode.topic_authorization_failed
    assert error_of(writer(version=2), tp, SPEC) == ErrorCode.unsupported_version
    refused = produce_gates.refusal(writer(acks=2), tp, SPEC)
    assert refused is not None and (refused.error, refused.message) == (ErrorCode.invalid_required_acks, "acks=2")
    assert error_of(writer(), TopicPartition("t", 2), SPEC) == ErrorCode.unknown_topic_or_partition
    assert error_of(writer(), TopicPartition("ghost", 0), None) == ErrorCode.unknown_topic_or_partition
    refused = produce_gates.refusal(writer(), TopicPartition("__consumer_offsets", 0), OFFSETS)
    assert refused is not None and refused.error == ErrorCode.invalid_topic_exception
    assert refused.message == "__consumer_offsets is an internal topic"


def test_the_first_refusal_wins_in_kafkas_order():
    # Not allowed to write, and the topic does not exist: the ACL answers, so a name's existence does not leak.
    assert error_of(writer(writable=False), TopicPartition("ghost", 0), None) == ErrorCode.topic_authorization_failed
    # The transactional id is checked before anything else, even a version that is not served.
    assert error_of(writer(version=2, txn_refused=True, writable=False), TopicPartition("t", 0),
                    SPEC) == ErrorCode.transactional_id_authorization_failed


def test_one_whole_batch_v2_passes_the_records_check_and_gives_its_header():
    batch = build_batch([Record(key=None, value=b"v")])
    error, message, header = produce_gates.check_records(batch, 9)
    assert (error, message) == (ErrorCode.none, None) and header is not None and header.record_count == 1
    assert produce_gates.check_records(batch + batch, 9)[0] == ErrorCode.invalid_record
    assert produce_gates.check_records(batch[:-1], 9)[0] == ErrorCode.corrupt_message
    assert produce_gates.check_records(None, 9)[0] == ErrorCode.invalid_record


def test_each_request_runs_only_gates_that_can_refuse_it():
    """`gates_for` leaves out only the request-wide gates that pass it: the answers are those of all GATES."""
    cases = [(TopicPartition("t", 0), SPEC), (TopicPartition("t", 5), SPEC), (TopicPartition("ghost", 0), None),
             (TopicPartition("__consumer_offsets", 0), OFFSETS)]
    seen = set()
    for version, acks, txn_refused, writable in [(v, a, t, w) for v in (2, 3, 9) for a in (-1, 0, 1, 2, -2)
                                                 for t in (False, True) for w in (False, True)]:
        w = writer(version=version, acks=acks, txn_refused=txn_refused, writable=writable)
        for tp, spec in cases:
            everything = next((r for gate in produce_gates.GATES if (r := gate(w, tp, spec)) is not None), None)
            assert produce_gates.refusal(w, tp, spec) == everything
            seen.add(None if everything is None else everything.error)
    assert len(seen) == 7  # none and the six gates' errors
    assert len(writer().gates) == 3  # the common request: ACL, topic, internal
