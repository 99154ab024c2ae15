"""`tinystream demo` (what `make demo` runs) speaks to a user: what ran, what to try next; no development aims."""

from __future__ import annotations

import subprocess
import sys


def test_demo_says_what_ran_and_what_next_without_development_aims(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tinystream", "demo", "--skip-spark", "--records", "200"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "aim " not in out and "NOT met" not in out
    assert "group demo-group consumed" in out
    assert "== done ==" in out and "200 records were produced" in out
    assert "dev --brokers 3" in out and "http://127.0.0.1:3200" in out
    assert "topics create events" in out
