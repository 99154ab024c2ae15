"""Write the reference tables of docs/configuration.md from the one settings table.

The sources are the pydantic models of tinystream/config/settings.py (`COMPONENTS`:
each field's Kafka key, default and bounds from `kafka_field(...)`, and the comment
written beside the field), its per-listener keys, and the topic-config table of
tinystream/config/topic_configs.py. The page's prose is written by hand; only the
part between the two markers below is generated. tests/architecture/test_docs.py
fails when the page differs from what this script makes, so the tables cannot drift
from the code.

    python tools/gen_config_docs.py            # print the page as it should be
    python tools/gen_config_docs.py --write    # rewrite docs/configuration.md
    python tools/gen_config_docs.py --check    # exit 1 when the page is out of date

Comments in settings.py: a comment on a field's own line, or a comment block right
after the previous field, describes that field; a comment block after a blank line
opens a section (a paragraph before the rows that follow it).
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
import typing
from dataclasses import dataclass, field
from pathlib import Path

from annotated_types import Ge, Le, MinLen
from pydantic.fields import FieldInfo

from tinystream.config import settings as settings_module
from tinystream.config.settings import COMPONENTS, PER_LISTENER_KEYS, BrokerSettings, ComponentSettings
from tinystream.config.topic_configs import TOPIC_CONFIGS, broker_default

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"
BEGIN = "<!-- BEGIN GENERATED: tools/gen_config_docs.py writes this part from tinystream/config; do not edit -->"
END = "<!-- END GENERATED -->"
HEADER = ("| key | type | default | allowed | what |", "|---|---|---|---|---|")


@dataclass
class Notes:
    """What the source's comments say about one settings class."""

    described: dict[str, str] = field(default_factory=dict)  # field name -> its comment
    sections: dict[str, str] = field(default_factory=dict)  # field name -> the section paragraph it opens


def _comment_text(lines: list[str]) -> str:
    return " ".join(line.strip().lstrip("#").strip() for line in lines).strip()


def read_notes(source: str) -> dict[str, Notes]:
    """Class name -> the comments beside and above its fields."""
    lines = source.splitlines()
    trailing: dict[int, str] = {}  # line number (1-based) -> a comment after code on that line
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and not token.line.lstrip().startswith("#"):
            text = token.string.lstrip("#").strip()
            if not text.startswith(("noqa", "type:")):
                trailing[token.start[0]] = text
    found: dict[str, Notes] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        notes = found.setdefault(node.name, Notes())
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            above: list[str] = []
            row = stmt.lineno - 1  # 1-based line of the statement; lines[row - 1] is the line above it
            while row >= 1 and lines[row - 1].lstrip().startswith("#"):
                above.insert(0, lines[row - 1])
                row -= 1
            opens_section = bool(above) and row >= 1 and not lines[row - 1].strip()
            beside = [trailing[n] for n in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1) if n in trailing]
            if opens_section:
                notes.sections[name] = _comment_text(above)
                text = " ".join(beside)
            else:
                text = " ".join(filter(None, [_comment_text(above), *beside]))
            if text:
                notes.described[name] = text
    return found


def _human(key: str, value: int) -> str:
    """A unit hint for durations and sizes: 604800000 ms -> 7 d, 1073741824 bytes -> 1 GiB."""
    if key.endswith(".ms") and value >= 1000:
        for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
            if value % size == 0:
                return f" ({value // size} {unit})"
    if key.endswith((".bytes", ".size")) and value >= 1024:
        for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
            if value % size == 0:
                return f" ({value // size} {unit})"
    return ""


def show_value(key: str, value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, int):
        return f"`{value}`{_human(key, value)}"
    if value == "":
        return '`""` (empty)'
    return f"`{value}`"


def _plain(annotation: object) -> object:
    """`int | None` -> int: unset is shown as the default, not as a type."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if type(None) in typing.get_args(annotation) and len(args) == 1:
        return args[0]
    return annotation


def show_type(annotation: object) -> str:
    plain = _plain(annotation)
    if typing.get_origin(plain) is typing.Literal:
        return "string"
    names: dict[object, str] = {int: "int", str: "string", bool: "boolean", float: "double"}
    return names.get(plain, str(plain))


_ALTERNATIVES = re.compile(r"^\^\(([\w.-]+(?:\|[\w.-]+)*)\)\$$")


def show_allowed(info: FieldInfo) -> str:
    plain = _plain(info.annotation)
    if typing.get_origin(plain) is typing.Literal:
        return ", ".join(f"`{choice}`" for choice in typing.get_args(plain))
    if plain is bool:
        return "`true`, `false`"
    low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
    high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
    min_length = next((m.min_length for m in info.metadata if isinstance(m, MinLen)), None)
    pattern = next((getattr(m, "pattern", None) for m in info.metadata if getattr(m, "pattern", None)), None)
    parts = []
    if low is not None and high is not None:
        parts.append(f"{low} to {high}")
    elif low is not None:
        parts.append(f">= {low}")
    elif high is not None:
        parts.append(f"<= {high}")
    if min_length == 1:
        parts.append("not empty")
    elif min_length is not None:
        parts.append(f"at least {min_length} characters")
    if pattern is not None:
        choices = _ALTERNATIVES.match(pattern)
        if choices:
            parts.append(", ".join(f"`{choice}`" for choice in choices.group(1).split("|")))
        else:
            parts.append(f"matches `{pattern}`")
    return "; ".join(parts)


def cell(text: str) -> str:
    """Table-safe: a pipe inside a cell (also inside code) is escaped, as GitHub's tables need."""
    return text.replace("|", "\\|")


_MARKUP = re.compile(r"([\\*_<>$~\[\]])")


def prose(text: str) -> str:
    """A source comment as Markdown text: outside `code`, characters Markdown would read are escaped.

    Comments hold regular expressions (`RULE:^CN=(.*?),.*$/$1/L`) and placeholders (`<namespace>`),
    which GitHub would otherwise show as emphasis, math or an HTML tag.
    """
    parts = text.split("`")
    return "`".join(part if i % 2 else _MARKUP.sub(r"\\\1", part) for i, part in enumerate(parts))


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def component_section(component: str, model: type[ComponentSettings], notes: Notes) -> list[str]:
    out = [f"### `{component}`", "", prose(_first_paragraph(model.__doc__)), ""]
    in_table = False
    for name, info in model.model_fields.items():
        key = info.alias or name
        if name in notes.sections:
            if in_table:
                out.append("")
            out += [prose(notes.sections[name]), ""]
            in_table = False
        if not in_table:
            out += list(HEADER)
            in_table = True
        row = (f"`{key}`", show_type(info.annotation), show_value(key, info.default), show_allowed(info),
               prose(notes.described.get(name, "")))
        out.append("| " + " | ".join(cell(c) for c in row) + " |")
    return [*out, ""]


def listener_section() -> list[str]:
    keys = ", ".join(f"`{key}`" for key in PER_LISTENER_KEYS)
    return [
        "### Per-listener keys (`broker`)",
        "",
        "`listener.name.<listener>.<setting>` overrides `<setting>` on that listener only "
        "(environment: `TINYSTREAM_LISTENER_NAME_<LISTENER>_<SETTING>`), for these settings: " + keys + ".",
        "",
    ]


def topic_section() -> list[str]:
    defaults = BrokerSettings()
    out = [
        "### Topic configs",
        "",
        "Set per topic (`tinystream topics create -c KEY=VALUE`, CreateTopics, IncrementalAlterConfigs, "
        "a Topic resource's `config`). A topic without its own value takes the broker setting named "
        "in the third column (the synonym DescribeConfigs shows), else the default given here. "
        "*applied by*: `log` the partition log, `produce` the leader's produce path, `controller` the "
        "controller's decisions, `replication` the leaders' and followers' replication throttles, "
        "`not applied` accepted and kept for Kafka tools, but not acted on.",
        "",
        "| key | type | default | broker setting | applied by | what |",
        "|---|---|---|---|---|---|",
    ]
    for name, key in sorted(TOPIC_CONFIGS.items()):
        row = (f"`{name}`", key.type.name.lower(), show_value(name, broker_default(defaults, key)),
               f"`{key.broker_key}`" if key.broker_key else "", key.applied_by.value, prose(key.doc))
        out.append("| " + " | ".join(cell(c) for c in row) + " |")
    return [*out, ""]


def generated_part() -> str:
    notes = read_notes(Path(settings_module.__file__).read_text(encoding="utf-8"))
    lines = [BEGIN, ""]
    for component, model in COMPONENTS.items():
        lines += component_section(component, model, notes.get(model.__name__, Notes()))
        if component == "broker":
            lines += listener_section()
    lines += topic_section()
    lines.append(END)
    return "\n".join(lines)


def render(page: str) -> str:
    """`page` with its generated part made anew; the hand-written text around it is kept."""
    if BEGIN not in page or END not in page:
        raise SystemExit(f"{PAGE.relative_to(ROOT)}: the markers are missing:\n{BEGIN}\n{END}")
    head, rest = page.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return head + generated_part() + tail


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite {PAGE.relative_to(ROOT)}")
    mode.add_argument("--check", action="store_true", help="exit 1 when the page is out of date")
    args = parser.parse_args(argv)
    current = PAGE.read_text(encoding="utf-8")
    wanted = render(current)
    if args.write:
        if wanted != current:
            PAGE.write_text(wanted, encoding="utf-8")
        return 0
    if args.check:
        if wanted != current:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python tools/gen_config_docs.py --write",
                  file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
