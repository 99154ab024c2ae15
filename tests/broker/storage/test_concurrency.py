"""One writer thread, several reader threads: readers only ever see whole, valid batches."""

from __future__ import annotations

import threading

from tinystream.broker.storage.base import LogConfig, OffsetOutOfRangeError
from tinystream.broker.storage.batch import Record, build_batch, decode_records, iter_batches
from tinystream.broker.storage.cleaner import LogCleaner
from tinystream.broker.storage.segmented import SegmentedLog

BATCHES = 1500


def test_readers_see_consistent_batches_while_the_writer_appends_rolls_and_deletes(tmp_path, make_batch):
    size = len(make_batch(2, value_size=40))
    config = LogConfig(segment_bytes=40 * size, index_interval_bytes=3 * size, retention_bytes=400 * size, retention_ms=-1)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    done = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def writer():
        try:
            for i in range(BATCHES):
                log.append(make_batch(2, value_size=40, timestamp=i), leader_epoch=i // 500, now_ms=i)
                if i % 100 == 99:
                    log.enforce_retention(now_ms=i)  # deletes old segments under the readers' feet
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    def reader(seed: int):
        offset = 0
        try:
            while not done.is_set() or offset < log.log_end_offset:
                try:
                    result = log.read(offset, (seed % 4 + 1) * size + seed, min_one=True)
                except OffsetOutOfRangeError:
                    offset = log.log_start_offset  # retention moved the start: jump, like a consumer reset
                    continue
                data = bytes(result.data)
                expected = result.first_offset
                total = 0
                for _pos, header in iter_batches(data, verify=True):  # CRC-checks every batch
                    assert header.base_offset == expected, (header.base_offset, expected)
                    assert header.record_count == 2
                    expected = header.next_offset
                    total += header.size
                assert total == len(data)  # nothing but whole batches
                if data:
                    assert expected == result.next_offset
                    assert result.first_offset <= max(offset, result.log_start_offset)
                    offset = result.next_offset
                    reads[0] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[0]
    assert reads[0] > 100
    assert log.log_end_offset == 2 * BATCHES and log.log_start_offset > 0
    log.close()


def test_cleaner_thread_and_writer_thread(tmp_path):
    config = LogConfig(cleanup_policy="compact", segment_bytes=2000)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def clean():
        try:
            while not stop.is_set():
                LogCleaner().clean(log, now_ms=0)
        except BaseException as exc:
            errors.append(exc)

    cleaner = threading.Thread(target=clean)
    cleaner.start()
    try:
        for i in range(400):
            log.append(build_batch([Record(b"k%d" % (i % 5), b"v%d" % i)]), leader_epoch=0, now_ms=i)
    finally:
        stop.set()
        cleaner.join(timeout=60)
    assert not errors, errors[0]
    LogCleaner().clean(log, now_ms=0)
    # After a final clean, closed segments hold at most one record per key, and the newest values survive.
    latest: dict[bytes, bytes] = {}
    for _header, data in log.batches_from(0):
        for record in decode_records(bytes(data)):
            latest[record.key] = record.value
    assert latest == {b"k%d" % k: b"v%d" % (395 + k) for k in range(5)}
    assert log.log_end_offset == 400
    log.close()
