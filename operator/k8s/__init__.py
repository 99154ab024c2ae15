"""The Kubernetes driver of the controller: kopf handlers over reconcilers over pure decisions.

Layers, top to bottom (an arrow means "may import"; pyproject.toml's
import-linter contracts check them):

    handlers.py                  make_registry: each kind's handlers register into one registry
        -> *_handlers.py         kopf, one module per kind: lifecycle, cluster, pod, topic, user
        -> *_reconciler.py       one pass per object: observe -> plan (pure) -> execute -> report
        -> deps.py, caches.py    what is injected; what a pass remembers per object uid
        -> controller_port.py    what the reconcilers need from the controller core
        -> reconcile.py, topics.py, users.py   what to do next: pure (spec, status, observed) -> plan
        -> resources.py          the owned objects of a cluster: pure builders
        -> model.py, conditions.py   typed specs; status conditions with CamelCase reasons
        -> api.py                the only module that talks to the Kubernetes API
        -> crds.py               keeps the installed CRDs current at start-up

The pure decisions are in the "pure cores do no I/O" contract (no kopf,
asyncio, HTTP), so they are tested without an API server (tests/operator/k8s/).
"""
