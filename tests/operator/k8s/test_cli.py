"""The operator's entry point: help text and settings from the environment."""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'kopf')

import subprocess
import sys

from click.testing import CliRunner

from tinystream.operator.k8s import cli


def test_module_entry_point_shows_help():
    out = subprocess.run([sys.executable, "-m", "tinystream.operator.k8s", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "Run the TinyStream Kubernetes operator" in out.stdout


def test_operator_passes_settings_to_kopf(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr("kopf.run", lambda **kwargs: seen.update(kwargs))
    monkeypatch.setenv("TINYSTREAM_NAMESPACE", "apps")
    monkeypatch.setenv("TINYSTREAM_PEERING_NAME", "ts-tinystream")
    monkeypatch.setenv("TINYSTREAM_OPERATOR_HEALTH_PORT", "9999")
    monkeypatch.setenv("TINYSTREAM_CRDS_DIR", str(tmp_path))
    result = CliRunner().invoke(cli.operator, [])
    assert result.exit_code == 0, result.output
    assert seen["namespaces"] == ["apps"] and seen["clusterwide"] is False
    assert seen["peering_name"] == "ts-tinystream" and seen["standalone"] is False
    assert seen["liveness_endpoint"] == "http://0.0.0.0:9999/healthz"


def test_manage_crds_off_means_no_crd_dir(monkeypatch):
    monkeypatch.setenv("TINYSTREAM_MANAGE_CRDS", "false")
    assert cli._crds_dir() is None


def test_operator_context_outside_a_cluster_keeps_defaults_and_serialises():
    """Without the chart's environment the defaults are values, not slot descriptors (kopf serialises them)."""
    import dataclasses
    import json

    from tinystream.config.settings import OperatorSettings
    from tinystream.operator.k8s.model import OperatorContext

    ctx = cli.operator_context({}, OperatorSettings())
    assert ctx == OperatorContext(controller_port=OperatorSettings().controller_port,
                                  dashboard_port=OperatorSettings().dashboard_port)
    assert json.loads(json.dumps(dataclasses.asdict(ctx)))["operator_service"] == \
        "tinystream.tinystream.svc.cluster.local"
    assert cli.operator_context({"TINYSTREAM_OPERATOR_SERVICE": "op.ns.svc"}, OperatorSettings()).operator_service == "op.ns.svc"


def test_replicas_get_distinct_peering_priorities():
    # kopf pauses every operator that sees a peer at its own priority: the chart's standbys all paused.
    from tinystream.operator.k8s.cli import peering_priority  # noqa: PLC0415

    pods = [f"ts-tinystream-6d9f7c5b8-{suffix}" for suffix in ("x2k9q", "p7wq4", "mm2lz")]
    priorities = [peering_priority({"HOSTNAME": pod}) for pod in pods]
    assert len(set(priorities)) == 3 and all(p > 0 for p in priorities)
    assert peering_priority({"HOSTNAME": pods[0]}) == priorities[0]  # stable across restarts of one pod name
    assert peering_priority({"TINYSTREAM_OPERATOR_PRIORITY": "42", "HOSTNAME": pods[0]}) == 42


def test_outside_a_cluster_the_dashboard_login_is_a_file_made_once_beside_the_master_secret(tmp_path):
    from tinystream.config.settings import OperatorSettings

    settings = OperatorSettings.model_validate({"controller.secret.file": str(tmp_path / "master.secret")})
    master, login = cli.operator_secrets(settings)
    assert (tmp_path / "operator-dashboard.token").read_text().strip() == login
    assert login != master and cli.operator_secrets(settings) == (master, login)  # a restart reads the same
    assert (tmp_path / "operator-dashboard.token").stat().st_mode & 0o077 == 0  # the owner's alone
