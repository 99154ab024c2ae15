"""The Kubernetes driver of the controller: kopf handlers over pure decisions.

Layers, top to bottom (an arrow means "may import"):

    handlers.py  (kopf: create/update/resume/delete, field handlers, timers)
        -> reconcile.py, topics.py   what to do next: pure (spec, status, observed) -> plan
        -> resources.py              the owned objects of a cluster: pure builders
        -> model.py, conditions.py   typed specs; status conditions with CamelCase reasons
        -> api.py                    the only module that talks to the Kubernetes API
        -> controller_port.py        what the handlers need from the controller core
        -> crds.py                   keeps the installed CRDs current at start-up

Everything below handlers.py is plain Python without kopf, so the decisions
are tested without an API server (tests/operator/k8s/).
"""
