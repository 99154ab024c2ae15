"""`tinystream controller`'s own dashboard asks for the controller's admin token (issue 21)."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import read_secret
from tinystream.operator.service.app import ControllerServer


async def test_the_controllers_dashboard_wants_the_admin_token(tmp_path: Path) -> None:
    server = ControllerServer(ControllerSettings.model_validate({
        "host": "127.0.0.1", "port": 0, "dashboard.port": 0, "state.file": str(tmp_path / "state.json")}))
    info = await server.start()
    try:
        assert server.dashboard_url is not None and read_secret(info.secret_file)
        async with aiohttp.ClientSession() as http:
            async with http.get(server.dashboard_url + "/api/overview") as r:
                assert r.status == 401
            async with http.get(server.dashboard_url + "/", allow_redirects=False) as r:
                assert r.status == 303 and r.headers["Location"] == "/login"
            async with http.get(server.dashboard_url + "/login") as r:
                assert r.status == 200 and "tinystream token --admin" in await r.text()
            async with http.get(server.dashboard_url + "/api/overview",
                                headers={"Authorization": f"Bearer {info.admin_token}"}) as r:
                assert r.status == 200 and (await r.json())["cluster_id"] == info.cluster_id
    finally:
        await server.stop()
