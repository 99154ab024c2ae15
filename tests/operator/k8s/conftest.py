"""Tests of the Kubernetes side: CRDs, Helm chart, owned objects, kopf handlers.

No API server is needed: the CRDs are checked by re-doing the API server's
admission steps (tests/operator/k8s/k8s_helpers.py), the chart by `helm template`
(skipped, with the install command, when helm is missing), the handlers
against KMock. Helper modules live beside this file; the folder is put on
sys.path because the suite runs with --import-mode=importlib.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
