"""Certificates replaced on disk reach new connections without a restart; old connections keep theirs.

Kubernetes updates a mounted Secret by writing a new timestamped folder and swapping the `..data`
symlink, so a file's path stays and what it resolves to changes. `ReloadingContext` remembers a
fingerprint of each watched file (resolved path, size, mtime and a content hash) and, when one changes,
builds a whole new SSLContext from the files:

- built: it becomes `current`; new connections use it, established ones keep their session;
- not built (a half-written file, a key that does not match its certificate, a missing file): the
  error is logged once per change and the old context stays; nothing raises out of `check`.

A server keeps one SSLContext for its listening socket (asyncio's create_server), so the context it
was given (`outer`) swaps in `current` from its SNI callback, which OpenSSL calls in every ClientHello,
with or without a server name; SSL_set_SSL_CTX then serves the new certificate and verifies clients
against the new truststore. Clients (replica fetchers, the transaction-marker channel) read `current`
when they connect.

`CertificateWatcher.run` polls every ssl.reload.interval.ms (Kafka reloads on a dynamic config
update instead; a mounted Secret has no such event).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileFingerprint:
    resolved: str
    size: int
    mtime_ns: int
    sha256: str


def fingerprint(path: str) -> FileFingerprint | None:
    """What a file is now; None when it cannot be read (it is then left as it was)."""
    try:
        resolved = os.path.realpath(path)
        with open(resolved, "rb") as handle:
            data = handle.read()
        stat = os.stat(resolved)
    except OSError:
        return None
    return FileFingerprint(resolved, stat.st_size, stat.st_mtime_ns, hashlib.sha256(data).hexdigest())


class ReloadingContext:
    """An SSLContext rebuilt from its files when they change (see the module docstring)."""

    def __init__(self, build: Callable[[], ssl.SSLContext], files: tuple[str, ...], *, name: str,
                 server: bool = False) -> None:
        self._build = build
        self.files = tuple(f for f in files if f)
        self.name = name
        self._seen = {f: fingerprint(f) for f in self.files}
        self.current = build()  # the first build may raise: a broker does not start with bad certificates
        self.reloads = 0
        self.failures = 0
        self.outer = self.current
        if server:
            self.outer.sni_callback = self._serve_current

    def _serve_current(self, sslobj: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        if sslobj.context is not self.current:
            sslobj.context = self.current
        return None

    def check(self) -> bool:
        """Rebuild when a file changed; True when a new context is in use."""
        now = {f: fingerprint(f) for f in self.files}
        if now == self._seen or any(v is None for v in now.values()):
            return False  # unchanged, or a file is missing mid-swap: look again next time
        self._seen = now
        try:
            context = self._build()
        except (ssl.SSLError, OSError, ValueError) as exc:
            self.failures += 1
            log.warning("%s: the changed certificate files could not be loaded (%s); keeping the old ones",
                        self.name, exc)
            return False
        self.current = context
        self.reloads += 1
        log.info("%s: loaded the new certificate files %s for new connections", self.name, ", ".join(self.files))
        return True


class CertificateWatcher:
    """Polls every watched context's files (one task per broker)."""

    def __init__(self, contexts: list[ReloadingContext], interval_ms: int) -> None:
        self.contexts = contexts
        self.interval_s = interval_ms / 1000

    def check_all(self) -> None:
        for context in self.contexts:
            context.check()

    async def run(self) -> None:
        if not self.contexts or self.interval_s <= 0:
            return
        while True:
            await asyncio.sleep(self.interval_s)
            await asyncio.get_running_loop().run_in_executor(None, self.check_all)
