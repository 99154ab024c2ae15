"""Client quotas: where AlterClientQuotas takes effect and what Produce and Fetch are measured against.

Under a controller (`controller.url`) quotas are cluster metadata, as in
KRaft (ClientQuotaRecord): AlterClientQuotas is forwarded to the controller
(`control/forwarding.py`), and every broker takes the image's `client_quotas`
(`use_image`, called by `image.ImageApplier` in the same synchronous step as
the rest of the image), so a quota set through one broker is enforced by all.
Such a broker has no file (`metadata_dir` None).

A broker without a controller keeps them in `<metadata dir>/quotas.json`
({"quotas": [{"entity": {"user": "alice", "client-id": null}, "values":
{"producer_byte_rate": ...}}]}, null = <default>: the image's records in a
wrapper), written atomically, read at start: they survive a restart.

`ClientQuotas` owns one ClientQuotaManager per byte-rate key (quotas/manager.py,
pure), the request_percentage accounting (quotas/request_time.py), the
controller_mutation_rate buckets (quotas/mutation.py) and the clock; the
handlers (byte rates, mutations) and the dispatcher (request time) ask it for a
throttle time.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from tinystream.atomic_file import write_atomically
from tinystream.broker.quotas.book import QuotaBook
from tinystream.broker.quotas.entities import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, Entity
from tinystream.broker.quotas.manager import ClientQuotaManager
from tinystream.broker.quotas.mutation import ControllerMutationQuota
from tinystream.broker.quotas.request_time import RequestTimeQuota

log = logging.getLogger(__name__)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def user_of(principal: str) -> str:
    """Kafka quotas name a user by the principal's name: "User:alice" -> "alice" (ANONYMOUS when none)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class ClientQuotas:
    FILE = "quotas.json"

    def __init__(self, metadata_dir: str | Path | None, *, clock: Callable[[], int] = _monotonic_ms,
                 samples: int = 11, window_ms: int = 1000) -> None:
        self.path = Path(metadata_dir) / self.FILE if metadata_dir is not None else None
        self.clock = clock
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples=samples, window_ms=window_ms)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples=samples, window_ms=window_ms)
        self.requests = RequestTimeQuota(samples=samples, window_ms=window_ms)
        self.mutations = ControllerMutationQuota(samples=samples, window_ms=window_ms)
        book = QuotaBook()
        if self.path is not None and self.path.exists():
            try:
                book = QuotaBook.from_json(json.loads(self.path.read_text()))
            except (ValueError, KeyError, AttributeError, TypeError) as exc:
                raise ValueError(f"{self.path}: not a client quota file ({exc}); fix or remove it") from exc
        self._use(book)

    @property
    def book(self) -> QuotaBook:
        return self.produce.book

    def _use(self, book: QuotaBook) -> None:
        self.produce.use(book)
        self.fetch.use(book)
        self.requests.use(book)
        self.mutations.use(book)

    def alter(self, changes: Iterable[tuple[Entity, Iterable[tuple[str, float, bool]]]]) -> None:
        book = self.book.alter(changes)
        if self.path is not None:
            write_atomically(self.path, json.dumps(book.to_json(), indent=1).encode(), durable=True)
        self._use(book)

    def use_image(self, records: Sequence[Mapping[str, object]]) -> None:
        """The controller image's `client_quotas` become the quotas in force (nothing is written). A record
        this broker cannot read is logged and skipped: the controller checked it, a broker must not stop."""
        good = []
        for item in records:
            try:
                QuotaBook.from_json({"quotas": [item]})
            except (ValueError, KeyError, AttributeError, TypeError) as exc:
                log.error("ignoring a client quota of the metadata image: %s (%r)", exc, item)
                continue
            good.append(item)
        book = QuotaBook.from_json({"quotas": good})
        if book != self.book:
            self._use(book)

    def record_produce(self, principal: str, client_id: str | None, size: int) -> int:
        return self.produce.record(user_of(principal), client_id or "", size, self.clock())

    def record_fetch(self, principal: str, client_id: str | None, size: int) -> int:
        return self.fetch.record(user_of(principal), client_id or "", size, self.clock())

    def request_time_applies(self, principal: str, client_id: str | None) -> bool:
        return self.requests.applies(user_of(principal), client_id or "")

    def record_request_time(self, principal: str, client_id: str | None, busy_s: float) -> int:
        return self.requests.record(user_of(principal), client_id or "", busy_s, self.clock())

    def record_request_time_only(self, principal: str, client_id: str | None, busy_s: float) -> None:
        self.requests.record_only(user_of(principal), client_id or "", busy_s, self.clock())

    def mutation_exceeded_ms(self, principal: str, client_id: str | None) -> int:
        return self.mutations.exceeded_ms(user_of(principal), client_id or "", self.clock())

    def spend_mutations(self, principal: str, client_id: str | None, partitions: int) -> int:
        return self.mutations.spend(user_of(principal), client_id or "", partitions, self.clock())
