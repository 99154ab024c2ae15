"""__transaction_state keys and values: Kafka's v0 layouts, round trips, bad bytes refused."""

from __future__ import annotations

import struct

import pytest

from tinystream.broker.transactions.errors import RecordDecodeError
from tinystream.broker.transactions.records import decode_key, decode_value, encode_key, encode_value
from tinystream.broker.transactions.state import TxnState, TxnTransit


def test_key_layout_and_round_trip():
    key = encode_key("tx-é")
    assert key[:2] == b"\x00\x00" and struct.unpack(">h", key[2:4])[0] == len("tx-é".encode())
    assert decode_key(key) == "tx-é"


def test_value_round_trip_and_layout():
    t = TxnTransit(event="x", producer_id=123, producer_epoch=4, last_producer_epoch=3, timeout_ms=60_000,
                   state=TxnState.PREPARE_COMMIT, partitions=frozenset({("a", 1), ("a", 0), ("b", 2)}),
                   txn_start_ms=1000, last_update_ms=2000)
    data = encode_value(t)
    assert struct.unpack_from(">hqhib", data) == (0, 123, 4, 60_000, 2)
    back = decode_value(data)
    assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.state) == (123, 4, 60_000, TxnState.PREPARE_COMMIT)
    assert back.partitions == t.partitions and (back.txn_start_ms, back.last_update_ms) == (1000, 2000)


@pytest.mark.parametrize("junk", [b"", b"\x00\x01", b"\x00\x00\x00\x09ab", b"\x00\x00\xff\xff"])
def test_bad_keys(junk):
    with pytest.raises(RecordDecodeError):
        decode_key(junk)


def test_bad_values():
    good = encode_value(TxnTransit(event="x", producer_id=1, producer_epoch=0, last_producer_epoch=-1, timeout_ms=1,
                                   state=TxnState.ONGOING, partitions=frozenset({("t", 0)}), txn_start_ms=0,
                                   last_update_ms=0))
    for junk in (b"", good[:-3], b"\x00\x05" + good[2:], good[:16] + b"\x63" + good[17:]):
        with pytest.raises(RecordDecodeError):
            decode_value(junk)
