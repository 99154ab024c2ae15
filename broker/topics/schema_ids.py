"""Which subjects a schema id is registered under: the registry's answer, cached (the only I/O of validation).

`GET {confluent.schema.registry.url}/schemas/ids/{id}/versions` lists the
(subject, version) pairs of an id; one call answers for every subject, so the
cache is keyed by id. Bounds, since produce requests choose the ids:

- the cache holds at most `max_entries` ids (least recently used go first);
  a found id is kept `positive_ttl` seconds (ids never change meaning, but a
  subject version can be deleted), an unknown one `negative_ttl` (a producer
  that registers then produces at once must not be refused for long). An id
  can gain subjects (the same schema registered under another subject keeps
  its id), so an answer that lacks a subject is trusted only for the subjects
  it was asked about, and only for `negative_ttl`: a producer that registers
  under a new subject, then produces, is never refused from the cache;
- at most `max_concurrent` HTTP calls run at once, and callers asking for the
  same id share one call;
- an answer is read up to `MAX_ANSWER_BYTES`, with a timeout.

A registry that cannot answer (refused connection, timeout, 5xx, a 401, a
body that is not the API's) raises RegistryUnavailable: the produce handler
then answers a retriable error, so producers retry instead of dropping data.

A registry that needs a login gets HTTP Basic credentials from
`user_info_file` (`user:password`, Confluent's confluent.basic.auth.user.info
in a file); the file is read at start (a malformed one stops the broker) and
again when its modification time changes, so a rotated password needs no restart.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

MAX_ANSWER_BYTES = 1 << 20
_UNKNOWN_ID = 40403  # Confluent's "Schema not found"


class RegistryUnavailable(Exception):
    """The registry could not say whether an id is registered."""


class UserInfoFile:
    """`user:password` from a file, read again when the file changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime: float | None = None
        self._auth: str | None = None
        self.auth()  # a missing or malformed file fails here, at start

    def auth(self) -> str:
        """The Authorization header's value."""
        mtime = os.stat(self.path).st_mtime
        if mtime != self._mtime or self._auth is None:
            with open(self.path, encoding="utf-8") as handle:
                user, sep, password = handle.read().strip().partition(":")
            if not sep or not user:
                raise ValueError(f"{self.path}: confluent.basic.auth.user.info.file holds user:password")
            self._auth, self._mtime = aiohttp.BasicAuth(user, password).encode(), mtime
        return self._auth


class SchemaIdLookup:
    def __init__(
        self,
        url: str,
        *,
        max_entries: int = 4096,
        positive_ttl: float = 300.0,
        negative_ttl: float = 2.0,
        max_concurrent: int = 8,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        user_info_file: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._user_info = UserInfoFile(user_info_file) if user_info_file else None
        self.max_entries, self.positive_ttl, self.negative_ttl = max_entries, positive_ttl, negative_ttl
        self._clock = clock
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._limit = asyncio.Semaphore(max_concurrent)
        self._cache: OrderedDict[int, tuple[float, float, frozenset[str], frozenset[str]]] = OrderedDict()
        # id -> (expires, asked at, its subjects, the subjects that ask was about)
        self._pending: dict[int, asyncio.Future[frozenset[str]]] = {}
        self._session: aiohttp.ClientSession | None = None
        self.calls = 0  # HTTP calls made (tests and metrics)

    def cached(self, schema_id: int, wanted: frozenset[str] = frozenset()) -> frozenset[str] | None:
        """The id's subjects if a fresh enough answer is cached (empty: not registered), else None.

        Fresh enough: within its TTL, and, when it lacks a `wanted` subject, asked about that subject
        less than `negative_ttl` ago.
        """
        entry = self._cache.get(schema_id)
        if entry is None:
            return None
        expires, asked, subjects, asked_for = entry
        now = self._clock()
        if expires <= now:
            del self._cache[schema_id]
            return None
        if not wanted <= subjects and not (wanted <= subjects | asked_for and now < asked + self.negative_ttl):
            return None
        self._cache.move_to_end(schema_id)
        return subjects

    async def subjects(self, schema_id: int, wanted: frozenset[str] = frozenset()) -> frozenset[str]:
        """The subjects `schema_id` is registered under (empty when the registry does not know it)."""
        found = self.cached(schema_id, wanted)
        if found is not None:
            return found
        pending = self._pending.get(schema_id)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[frozenset[str]] = asyncio.get_running_loop().create_future()
        self._pending[schema_id] = future
        try:
            found = await self._ask(schema_id)
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, RegistryUnavailable) else RegistryUnavailable(str(exc)))
            future.exception()  # retrieved: no "never retrieved" warning when no one else waits
            raise
        finally:
            del self._pending[schema_id]
        self._remember(schema_id, found, wanted)
        future.set_result(found)
        return found

    def _remember(self, schema_id: int, subjects: frozenset[str], asked_for: frozenset[str] = frozenset()) -> None:
        ttl = self.positive_ttl if subjects else self.negative_ttl
        now = self._clock()
        self._cache[schema_id] = (now + ttl, now, subjects, asked_for)
        self._cache.move_to_end(schema_id)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)

    async def _ask(self, schema_id: int) -> frozenset[str]:
        async with self._limit:
            self.calls += 1
            session = self._session
            if session is None or session.closed:
                session = self._session = aiohttp.ClientSession(timeout=self._timeout)
            where = f"{self.url}/schemas/ids/{schema_id}/versions"
            headers = {"Accept": "application/vnd.schemaregistry.v1+json"}
            try:
                if self._user_info is not None:
                    headers["Authorization"] = self._user_info.auth()
            except (OSError, ValueError) as exc:
                raise RegistryUnavailable(f"the registry login could not be read: {exc}") from None
            try:
                async with session.get(where, headers=headers) as resp:
                    body = await resp.content.read(MAX_ANSWER_BYTES)
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise RegistryUnavailable(f"{self.url}: {type(exc).__name__}: {exc}") from None
        return _subjects(status, body, self.url)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _subjects(status: int, body: bytes, url: str) -> frozenset[str]:
    """The registry's answer as subjects; RegistryUnavailable for anything but the API's two answers."""
    try:
        document: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        document = None
    if status == 404 and isinstance(document, dict) and document.get("error_code") == _UNKNOWN_ID:
        return frozenset()
    if status == 200 and isinstance(document, list):
        return frozenset(v["subject"] for v in document if isinstance(v, dict) and isinstance(v.get("subject"), str))
    raise RegistryUnavailable(f"{url} answered HTTP {status}: {body[:200]!r}")
