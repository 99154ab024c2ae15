"""Suite-wide test settings.

Under CI (`CI` set, as `.ci/run` is run) hypothesis draws the same examples on
every run (`derandomize`): a gate must not fail on a rare draw that no one can
reproduce. Local runs keep exploring new examples; a failure there prints the
seed to replay it.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
