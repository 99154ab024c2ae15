"""Tests of the Kubernetes side: CRDs, Helm chart, owned objects, kopf handlers.

Two tiers. Without an API server: the CRDs are checked by re-doing the API
server's admission steps (tests/operator/k8s/k8s_helpers.py), the chart by
`helm template`, the handlers against KMock. With a real one (api_server/, the
fast tier): etcd + kube-apiserver + kube-controller-manager as processes, for
what only a real server does (validation, CEL, subresources, RBAC, finalizers,
garbage collection) and `helm install` itself. Helper modules live beside this file (pyproject's pytest
`pythonpath` lists this folder, and api_server/ for real_api.py).
"""
