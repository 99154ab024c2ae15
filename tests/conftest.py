"""Suite-wide test settings.

Under CI (`CI` set, as `.ci/run` is run) hypothesis draws the same examples on
every run (`derandomize`): a gate must not fail on a rare draw that no one can
reproduce. Local runs keep exploring new examples; a failure there prints the
seed to replay it. No profile has a deadline: an example that takes 200 ms on a
machine busy with other suites is not a failure (speed is for the benchmarks).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("local", deadline=None)
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")
