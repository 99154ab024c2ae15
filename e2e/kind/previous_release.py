"""The previous release, for the upgrade test: its chart and its image, made from git.

The suite installs the previous release's chart with the previous release's
image first, and test_kind.py upgrades it with `helm upgrade` to this tree's
chart and image under a writer: what a user does between two releases. Both
come from `git archive` of the commit below (the last one CI landed with
that chart version), so nothing of the old release is kept in the tree.

Move PREVIOUS_COMMIT to the last landed commit of the chart version before
when Chart.yaml's version goes up. A checkout without that commit (a shallow
clone) installs this tree's chart instead and says so in the measurements:
the test still runs `helm upgrade`, from the same chart.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from kind_helpers import IMAGE_REPO, IMAGE_TAGS, ROOT, Kube

#: chart 0.1.0: the last commit that landed before the chart went to 0.2.0
PREVIOUS_COMMIT = "e88bcda8255a5daf2d2b5c270ddb50074c9f3b96"
PREVIOUS_IMAGE = f"{IMAGE_REPO}:previous"


@dataclass(frozen=True)
class Release:
    """A chart to install and the image it runs (operator and brokers)."""

    chart: Path
    image_tag: str
    version: str  # the chart's version, as `helm list` shows it after the name
    commit: str | None  # None: this tree


def chart_version(chart: Path) -> str:
    return str(yaml.safe_load((chart / "Chart.yaml").read_text())["version"])


def previous_tree(dest: Path) -> Path | None:
    """PREVIOUS_COMMIT's tree in `dest` (extracted once), or None where this checkout lacks the commit."""
    tree = dest / f"release-{PREVIOUS_COMMIT[:12]}"
    if (tree / "Dockerfile").is_file():
        return tree
    archived = subprocess.run(["git", "archive", "--format=tar", PREVIOUS_COMMIT], cwd=ROOT, capture_output=True,
                              timeout=120)
    if archived.returncode != 0:
        return None
    partial = dest / f"{tree.name}.partial"
    subprocess.run(["rm", "-rf", str(partial)], check=True)
    partial.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        tar.extractall(partial, filter="data")
    partial.rename(tree)  # whole or absent: an interrupted extraction is never taken for the tree
    return tree


THIS_CHART = ROOT / "charts" / "tinystream"


def upgrade_to_this_tree(kube: Kube, *, tag: str = IMAGE_TAGS[1]) -> None:
    """`helm upgrade` of the suite's release to this tree's chart, its operator on this tree's image `tag`."""
    kube.helm("upgrade", "ts", str(THIS_CHART), "--set", f"image.repository={IMAGE_REPO}", "--set",
              f"image.tag={tag}", "--set", "image.pullPolicy=Never", "--wait", "--timeout", "5m", timeout=400)


def installed_chart(kube: Kube) -> str:
    """The chart of the suite's release as `helm list` shows it (tinystream-<version>)."""
    releases = json.loads(kube.helm("list", "-o", "json").stdout)
    return next(r["chart"] for r in releases if r["name"] == "ts")


def ensure_this_chart(kube: Kube) -> None:
    """A module run without test_kind.py's upgrade test (`-k`) still tests this tree's operator."""
    if installed_chart(kube) != f"tinystream-{chart_version(THIS_CHART)}":
        upgrade_to_this_tree(kube)
