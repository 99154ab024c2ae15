"""The local cluster's dashboard: `tinystream.operator.dashboard`, hosted by the `tinystream dev` supervisor.

The supervisor knows every child's address, so it hosts the dashboard itself
(aiohttp on a thread of its own): it keeps answering while brokers or the
controller are down and shows them as down. The broker admin URLs come from
the supervisor's children, not from the controller's image, so a broker that
never registered still shows. It owns no state beyond the throughput ring
buffer; every view reads the controller's `GET /v1/metadata` and each
broker's admin API afresh (see operator/dashboard/sources.py). The controller
child hosts no dashboard of its own (`dashboard.enabled=false`): one host.

    Dashboard(controller_url=..., admin_urls=..., port=3200).start()  -> "http://127.0.0.1:3200"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tinystream.operator.dashboard import (
    HttpClusterSource,
    ThreadedDashboard,
    make_dashboard_app,
)


class Dashboard:
    """The dashboard app on a daemon thread; `start` returns its URL."""

    def __init__(
        self,
        *,
        controller_url: Callable[[], str | None],
        admin_urls: Callable[[], Mapping[int, str]],
        controller_token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        def broker_admin_urls(_: Mapping[str, Any] | None) -> Mapping[int, str]:
            return admin_urls()

        source = HttpClusterSource(controller_url, controller_token=controller_token, admin_urls=broker_admin_urls)
        self._server = ThreadedDashboard(lambda: make_dashboard_app(source), host=host, port=port)

    def start(self) -> str:
        return self._server.start()

    def stop(self) -> None:
        self._server.stop()
