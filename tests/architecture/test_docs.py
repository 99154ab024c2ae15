"""The documentation cannot drift from the code: generated parts, links, layers and the front page.

- docs/configuration.md is exactly what tools/gen_config_docs.py makes from the settings models now;
- every relative link in README.md and docs/*.md points at a file that exists and, into a Markdown
  file, at a heading that file has (GitHub's anchors);
- docs/architecture.md names every layer of the import-linter contracts in pyproject.toml;
- README.md opens with its two commands, `make demo` and `make test` (the one .ci/run runs), and
  stays a front page: under 150 lines.
"""

from __future__ import annotations

import re
import runpy
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
GENERATOR = ROOT / "tools" / "gen_config_docs.py"

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return _FENCE.sub("", text)


def link_targets(text: str) -> list[str]:
    """Targets of inline links, images and reference definitions, outside code."""
    prose = _CODE_SPAN.sub("", _prose(text))
    return _LINK.findall(prose) + _REFERENCE.findall(prose)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lower-cased, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, heading in _HEADING.findall(_prose(path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in link_targets(page.read_text(encoding="utf-8")):
        if _SCHEME.match(target):
            continue  # https:, mailto: ...: not this test's business
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading #{fragment} in {resolved.relative_to(ROOT)}")
    return broken


def test_the_configuration_reference_is_generated_from_the_settings_now():
    page = ROOT / "docs" / "configuration.md"
    render = runpy.run_path(str(GENERATOR))["render"]
    current = page.read_text(encoding="utf-8")
    assert render(current) == current, (
        "docs/configuration.md is out of date with tinystream/config: run "
        ".venv/bin/python tools/gen_config_docs.py --write")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_something(page: Path):
    assert broken_links(page) == []


def test_the_link_check_sees_links_and_skips_code():
    text = ("[a](docs/x.md#y) ![b](pic.svg \"t\") `[c](not-a-link.md)` [d][r] [e](https://example.org)\n"
            "```sh\n[f](inside-a-fence.md)\n```\n[r]: ref.md\n")
    assert link_targets(text) == ["docs/x.md#y", "pic.svg", "https://example.org", "ref.md"]
    assert slug("The real-cluster suite: `make test-kind`") == "the-real-cluster-suite-make-test-kind"
    assert slug("Per-listener keys (`broker`)") == "per-listener-keys-broker"


def test_the_architecture_page_names_every_layer_of_the_contracts():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    layers = [name.strip() for c in contracts if c["type"] == "layers" for layer in c["layers"] for name in layer.split("|")]
    assert layers, "no layer contracts found in pyproject.toml"
    assert [name for name in layers if f"`{name}`" not in page] == []


def test_the_readme_opens_with_the_two_commands_and_stays_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ")
    fence = lines.index("```sh")
    commands = lines[fence + 1: lines.index("```", fence + 1)]
    assert [line.split("#")[0].strip() for line in commands] == ["make demo", "make test"]
    assert all(not line.strip() or line.startswith("# ") for line in lines[:fence]), "something before the commands"
    assert len(lines) < 150, f"README.md has {len(lines)} lines: move detail into docs/"
