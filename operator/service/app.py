"""Start and stop the local controller: `run_controller` (async) and `main` (sync, with signals).

Start-up: lock and load the state file (or bootstrap a new cluster and save
it) -> `ControllerActivated` restarts every broker session, so brokers get a
full session timeout to find the controller again -> the HTTP API listens ->
the driver loop starts (session checks, preferred-leader elections) ->
`ready(ControllerInfo)`. Shutdown reverses it: the driver stops, new changes
are refused and long-polls released, in-flight requests finish, the state
file's lock is released. Nothing needs saving at shutdown: every change was
saved before it was answered.

    await run_controller(settings, ready=print)   # until cancelled
    main(settings, ready=announce)                # SIGINT / SIGTERM stop it cleanly
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import ADMIN, ensure_secret_file, token_for
from tinystream.foreground import run_until_signalled, serve_until_cancelled
from tinystream.operator.dashboard import DashboardServer, HttpClusterSource, make_dashboard_app
from tinystream.operator.dashboard.login import require_login
from tinystream.operator.service.controller_service import Clock, ControllerService, DriverTiming, monotonic_ms
from tinystream.operator.service.errors import StateFileError
from tinystream.operator.service.http_api import make_app
from tinystream.operator.service.metrics import ControllerMetrics
from tinystream.operator.service.state_store import FileStateStore, StateStore
from tinystream.operator.service.tls import pinned_client_context, server_context

log = logging.getLogger(__name__)

_ANY_ADDRESS = ("0.0.0.0", "::", "")
SHUTDOWN_TIMEOUT_S = 5.0  # in-flight requests get this long; long-polls are released at once


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """What `ready` gets once the API answers."""

    host: str  # where clients connect (127.0.0.1 when bound to every address)
    port: int  # the bound port (settings.port 0 picks a free one)
    cluster_id: str
    metadata_version: int
    state_file: str
    secret_file: str  # signs the API's tokens (tinystream/controller_auth.py)
    admin_token: str = dataclasses.field(repr=False)
    tls: bool = False  # HTTPS (controller.ssl.keystore.location)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


def config_overrides(settings: ControllerSettings) -> dict[str, Any]:
    """The ControllerConfig fields `tinystream controller` settings own."""
    return {
        "broker_session_timeout_ms": settings.broker_session_timeout_ms,
        "num_partitions": settings.num_partitions,
        "default_replication_factor": settings.default_replication_factor,
        "max_partitions": settings.max_partitions,
    }


class ControllerServer:
    """The service, its HTTP API and its driver loop, started and stopped together."""

    def __init__(
        self,
        settings: ControllerSettings,
        *,
        store: StateStore | None = None,
        timing: DriverTiming = DriverTiming(),
        clock: Clock = monotonic_ms,
    ) -> None:
        self.settings = settings
        self.store = store if store is not None else FileStateStore(settings.state_file)
        self.timing = timing
        self.clock = clock
        self.service: ControllerService | None = None
        self._runner: web.AppRunner | None = None
        self._driver: asyncio.Task[None] | None = None
        self._dashboard: DashboardServer | None = None  # on settings.dashboard_port, when enabled and bound
        self.dashboard_url: str | None = None
        # GET /metrics on the API port: this controller's registry (metrics.py).
        self.metrics = ControllerMetrics()
        self.metrics.watch(lambda: [] if self.service is None else [((), self.service)])
        # Every call but /healthz needs a token this secret made; a missing file is made (0600).
        self.secret_file = settings.secret_file or str(Path(settings.state_file).parent / "controller.secret")

    async def start(self) -> ControllerInfo:
        try:
            self.service = await ControllerService.open(
                self.store, config_overrides=config_overrides(self.settings), clock=self.clock, timing=self.timing
            )
        except BaseException:
            await self.store.close()
            raise
        keystore = self.settings.ssl_keystore_location
        try:
            secret = ensure_secret_file(self.secret_file)
            tls = server_context(keystore) if keystore else None
            app = make_app(self.service, secret=secret, metrics=self.metrics)
            runner = web.AppRunner(app, shutdown_timeout=SHUTDOWN_TIMEOUT_S, access_log=None)
            await runner.setup()
            self._runner = runner
            site = web.TCPSite(runner, self.settings.host, self.settings.port, ssl_context=tls)
            await site.start()
        except BaseException:
            await self.stop()
            raise
        self._driver = asyncio.create_task(self.service.run_driver(), name="controller-driver")
        port = _bound_port(runner)
        host = "127.0.0.1" if self.settings.host in _ANY_ADDRESS else self.settings.host
        image = self.service.image
        info = ControllerInfo(
            host=host,
            port=port,
            cluster_id=image.cluster_id,
            metadata_version=image.version,
            state_file=str(self.settings.state_file),
            secret_file=self.secret_file,
            admin_token=token_for(secret, ADMIN),
            tls=tls is not None,
        )
        log.info("controller for cluster %s listening on %s", info.cluster_id, info.url)
        await self._start_dashboard(info.url, info.admin_token)
        return info

    # -- the dashboard (operator/dashboard): one host, on dashboard.port -------------------------------

    async def _start_dashboard(self, api_url: str, token: str) -> None:
        """Best effort: a taken dashboard.port is logged, never fatal (the API does not need it).

        One dashboard host per process: this one, unless `dashboard.enabled` is
        false (`tinystream dev` turns it off because its supervisor hosts the
        cluster's dashboard). The API port serves the API only. Its viewers log in with the
        controller's admin token (operator/dashboard/login.py).
        """
        if not self.settings.dashboard_enabled:
            return
        keystore = self.settings.ssl_keystore_location
        source = HttpClusterSource(api_url, controller_token=token,
                                   controller_ssl=pinned_client_context(keystore) if keystore else None)
        app = make_dashboard_app(source)
        require_login(app, token, where=f"The token: tinystream token --admin --secret-file {self.secret_file}")
        server = DashboardServer(app, host=self.settings.host, port=self.settings.dashboard_port)
        try:
            self.dashboard_url = await server.start()
        except OSError as exc:
            log.warning("dashboard not served on port %s (%s)", self.settings.dashboard_port, exc)
            return
        self._dashboard = server
        log.info("dashboard on %s", self.dashboard_url)

    async def stop(self) -> None:
        if self._dashboard is not None:
            await self._dashboard.stop()
            self._dashboard = None
        if self._driver is not None:
            self._driver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._driver
            self._driver = None
        if self.service is not None:
            self.service.begin_close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.service is not None:
            await self.service.close()
            self.service = None
        else:
            await self.store.close()
        log.info("controller stopped")


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    raise RuntimeError("the controller API is not bound to a TCP port")  # pragma: no cover


async def run_controller(
    settings: ControllerSettings,
    *,
    ready: Callable[[ControllerInfo], None] | None = None,
    store: StateStore | None = None,
    timing: DriverTiming = DriverTiming(),
) -> None:
    """Run the controller until cancelled. StateFileError: the state file is corrupt or in use."""
    server = ControllerServer(settings, store=store, timing=timing)
    await serve_until_cancelled(server.start, server.stop, ready)


def main(settings: ControllerSettings, *, ready: Callable[[ControllerInfo], None] | None = None) -> None:
    """Run the controller in this thread until SIGINT or SIGTERM.

    A state file that cannot be used (corrupt, locked by another controller)
    exits with its reason (SystemExit) instead of a traceback.
    """
    try:
        run_until_signalled(lambda: run_controller(settings, ready=ready))
    except (StateFileError, ValueError) as exc:  # ValueError: a keystore that cannot be loaded
        raise SystemExit(f"tinystream controller: {exc}") from None
