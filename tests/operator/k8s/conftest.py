"""Tests of the Kubernetes side: CRDs, Helm chart, owned objects, kopf handlers.

Two tiers. Without an API server: the CRDs are checked by re-doing the API
server's admission steps (tests/operator/k8s/k8s_helpers.py), the chart by
`helm template`, the handlers against KMock. With a real one (api_server/, the
fast tier): etcd + kube-apiserver + kube-controller-manager as processes, for
what only a real server does (validation, CEL, subresources, RBAC, finalizers,
garbage collection) and `helm install` itself. Helper modules live beside this file; the folder is put on
sys.path because the suite runs with --import-mode=importlib.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
