"""`main` in its own process: ready callback with the URL, SIGTERM stops it cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

_SCRIPT = textwrap.dedent(
    """
    import sys
    from tinystream.config.settings import ControllerSettings
    from tinystream.operator.service import main

    settings = ControllerSettings(host="127.0.0.1", port=0, state_file=sys.argv[1])
    main(settings, ready=lambda info: print("READY", info.url, info.cluster_id, flush=True))
    print("STOPPED", flush=True)
    """
)


def _run(state_file: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, str(state_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY http://127.0.0.1:"), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line


def test_main_serves_until_sigterm_and_keeps_the_cluster(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    proc, line = _run(state_file)
    try:
        _, url, cluster_id = line.split()
        with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
            health = json.loads(response.read())
        assert health == {"status": "ok", "cluster_id": cluster_id, "metadata_version": 0}
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "STOPPED" in out
    assert json.loads(state_file.read_text())["image"]["cluster_id"] == cluster_id

    # A second start on the same file: same cluster. SIGINT works too.
    proc, line = _run(state_file)
    try:
        assert line.split()[2] == cluster_id
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0


def test_main_refuses_a_corrupt_state_file_with_its_reason(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    state_file.write_text("{not json")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(state_file)], capture_output=True, text=True,
                          timeout=20)
    assert proc.returncode == 1
    assert "tinystream controller:" in proc.stderr and "not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
