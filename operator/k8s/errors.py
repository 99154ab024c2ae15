"""Errors of the Kubernetes driver.

    KubeApiError            an API call failed (status, reason, message from the server's Status)
    ├── NotFound            404
    ├── Conflict            409 (already exists, or a stale resourceVersion)
    └── Forbidden           403 (RBAC: the chart does not grant the call)

A spec the operator cannot act on is not an exception: it is a Ready=False
condition with a CamelCase reason (conditions.py, topics.validate_topic).

aiohttp's errors are translated in api.py with `raise ... from exc`.
"""

from __future__ import annotations


class KubeApiError(Exception):
    def __init__(self, status: int, reason: str, message: str, *, method: str = "", path: str = "") -> None:
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message
        self.method = method
        self.path = path


class NotFound(KubeApiError):
    pass


class Conflict(KubeApiError):
    pass


class Forbidden(KubeApiError):
    pass


def api_error(status: int, reason: str, message: str, *, method: str = "", path: str = "") -> KubeApiError:
    cls = {404: NotFound, 409: Conflict, 403: Forbidden}.get(status, KubeApiError)
    return cls(status, reason, message, method=method, path=path)
