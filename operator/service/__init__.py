"""The controller service: the local driver of the controller core, over HTTP/JSON.

`tinystream controller` runs it; brokers talk to it through
`tinystream.controller_client.ControllerClient`. The Kubernetes operator
will serve the same API over another `StateStore`.

Layers, top to bottom (an arrow means "may import"):

    app.py                 run_controller / main: start, signals, stop
      -> http_api.py       aiohttp routes: decode, submit, answer JSON
         -> request_bodies.py, openapi.py   strict request types; the API document
      -> controller_service.py   the single writer: apply -> persist -> adopt; driver loop
         -> state_store.py       StateStore protocol, FileStateStore, MemoryStateStore
      -> errors.py         ApiError (Kafka name, code, HTTP status), StateFileError
    all -> tinystream.operator.controller (the pure core)

The API is described in README.md beside this file and served at
/v1/openapi.json.
"""

from tinystream.operator.service.app import ControllerInfo, ControllerServer, config_overrides, main, run_controller
from tinystream.operator.service.controller_service import ControllerService, DriverTiming, monotonic_ms, must_persist
from tinystream.operator.service.errors import HTTP_STATUS, ApiError, StateFileError
from tinystream.operator.service.http_api import make_app
from tinystream.operator.service.openapi import openapi_document
from tinystream.operator.service.state_store import FileStateStore, MemoryStateStore, StateStore

__all__ = [
    "HTTP_STATUS",
    "ApiError",
    "ControllerInfo",
    "ControllerServer",
    "ControllerService",
    "DriverTiming",
    "FileStateStore",
    "MemoryStateStore",
    "StateFileError",
    "StateStore",
    "config_overrides",
    "main",
    "make_app",
    "monotonic_ms",
    "must_persist",
    "openapi_document",
    "run_controller",
]
