"""The kopf ids of the handlers: the same across releases, wherever a handler's code lives.

kopf keeps a handler's progress (retries, started, failures) in annotations on
the object under the handler's id, by default the function's qualified name.
The handlers were once closures in `make_registry` and
`register_user_handlers`; their ids stay those names, so an object whose
handler is in flight during an operator upgrade keeps its progress.
"""

from __future__ import annotations

CLUSTERS_TOPICS_SCOPE = "make_registry"
USERS_SCOPE = "register_user_handlers"
SCHEMAS_SCOPE = "schemas"


def handler_id(name: str, *, scope: str = CLUSTERS_TOPICS_SCOPE) -> str:
    return f"{scope}.<locals>.{name}"
