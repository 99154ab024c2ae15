"""What an API server would do with a custom resource, without one.

kube-apiserver validates a custom resource in this order: prune unknown
fields, apply schema defaults, check the OpenAPI v3 schema (types, ranges,
enums, required), then run the CEL rules (`x-kubernetes-validations`), with
`oldSelf` on updates. This module redoes each step so tests can show that
a CRD refuses what it should:

- `structural_errors`: the rules of a *structural* schema (every node typed,
  no `additionalProperties` beside `properties`, metadata limited), which
  apiextensions/v1 requires.
- `jsonschema_errors`: the schema as JSON Schema (jsonschema), with unknown
  fields refused as `kubectl --validate=strict` (the default) does.
- `cel_errors`: the CEL rules with cel-python; an evaluation error counts as
  a refusal, as it does in the API server.
- `builtin_errors`: a built-in kind against Kubernetes' own JSON schemas
  (the kubernetes-validate package ships them, strict variant).

Kubernetes-only CEL libraries (quantity, url, ...) are not used by our CRDs,
so plain CEL is enough.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "crds"
CHART_DIR = ROOT / "charts" / "tinystream"


def load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def load_crd(plural: str) -> dict[str, Any]:
    return load_yaml_docs(CRD_DIR / f"tinystream.io_{plural}.yaml")[0]


def version_schema(crd: Mapping[str, Any], version: str = "v1alpha1") -> dict[str, Any]:
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return v["schema"]["openAPIV3Schema"]
    raise KeyError(version)


# --- structural schema ------------------------------------------------------------------

def structural_errors(schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Violations of apiextensions/v1's structural-schema rules (a useful subset)."""
    errors: list[str] = []
    typed = ("type" in schema or schema.get("x-kubernetes-int-or-string")
             or schema.get("x-kubernetes-preserve-unknown-fields"))
    if not typed:
        errors.append(f"{path or '/'}: type is missing")
    if "properties" in schema and "additionalProperties" in schema:
        errors.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if schema.get("x-kubernetes-int-or-string"):
        any_of = schema.get("anyOf")
        if any_of is not None and any_of != [{"type": "integer"}, {"type": "string"}]:
            errors.append(f"{path}: int-or-string allows only anyOf integer/string")
    for key in ("$ref", "definitions", "dependencies", "additionalItems", "patternProperties"):
        if key in schema:
            errors.append(f"{path}: {key} is not allowed in a structural schema")
    if schema.get("type") == "array" and "items" not in schema:
        errors.append(f"{path}: array without items")
    for name, sub in schema.get("properties", {}).items():
        sub_path = f"{path}.{name}"
        if sub_path == ".metadata" and set(sub) - {"type"}:
            errors.append(".metadata: only `type: object` is allowed at the root's metadata")
        errors.extend(structural_errors(sub, sub_path))
    if isinstance(schema.get("additionalProperties"), Mapping):
        errors.extend(structural_errors(schema["additionalProperties"], f"{path}[*]"))
    if isinstance(schema.get("items"), Mapping):
        errors.extend(structural_errors(schema["items"], f"{path}[]"))
    return errors


# --- defaults ---------------------------------------------------------------------------

def apply_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """The object after the API server's defaulting (defaults of present parents only)."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for name, sub in schema.get("properties", {}).items():
        if name not in out and "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
        if name in out:
            out[name] = apply_defaults(sub, out[name])
    return out


# --- JSON Schema ------------------------------------------------------------------------

def to_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAPI v3 (Kubernetes flavour) -> JSON Schema, refusing unknown fields."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in ("default", "example", "description", "format"):
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("additionalProperties", "items") and isinstance(value, Mapping):
            out[key] = to_json_schema(value)
        elif key == "anyOf":
            out[key] = [to_json_schema(sub) for sub in value]
        else:
            out[key] = copy.deepcopy(value)
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["type"] = ["integer", "string"]
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False  # strict field validation
    return out


def jsonschema_errors(schema: Mapping[str, Any], obj: Any) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft7Validator(to_json_schema(schema))
    return [f"{'.'.join(map(str, e.absolute_path)) or '/'}: {e.message}" for e in validator.iter_errors(obj)]


# --- CEL --------------------------------------------------------------------------------

def _cel_nodes(schema: Mapping[str, Any], value: Any, old: Any, path: str
               ) -> Iterator[tuple[str, Mapping[str, Any], Any, Any]]:
    """(path, schema node, value, old value) for every present node, depth first."""
    yield path, schema, value, old
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                old_sub = old.get(name) if isinstance(old, dict) else None
                yield from _cel_nodes(sub, value[name], old_sub, f"{path}.{name}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for name, sub_value in value.items():
                old_sub = old.get(name) if isinstance(old, dict) else None
                yield from _cel_nodes(extra, sub_value, old_sub, f"{path}[{name!r}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _cel_nodes(schema["items"], item, None, f"{path}[{i}]")


def _kubernetes_cel_functions() -> dict[str, Any]:
    """The part of Kubernetes' CEL quantity library the CRDs use: quantity(s).compareTo(quantity(t))."""
    import celpy

    from tinystream.operator.k8s.volume_expansion import quantity

    def compare_to(a: Any, b: Any) -> Any:
        return celpy.celtypes.IntType((a > b) - (a < b))

    return {"quantity": lambda text: quantity(str(text)), "compareTo": compare_to}


def cel_errors(schema: Mapping[str, Any], obj: Any, old: Any = None) -> list[str]:
    """Messages of the CEL rules `obj` breaks (`old`: the stored object on an update)."""
    import celpy

    env = celpy.Environment()
    functions = _kubernetes_cel_functions()
    errors: list[str] = []
    for path, node, value, old_value in _cel_nodes(schema, obj, old, ""):
        for rule in node.get("x-kubernetes-validations", []):
            expr = rule["rule"]
            transition = "oldSelf" in expr
            if transition and old_value is None:
                continue  # transition rules run only when an old value exists
            activation = {"self": celpy.json_to_cel(value)}
            if transition:
                activation["oldSelf"] = celpy.json_to_cel(old_value)
            try:
                result = env.program(env.compile(expr), functions=functions).evaluate(activation)
            except celpy.CELEvalError as exc:  # the API server refuses on evaluation errors too
                errors.append(f"{path or '/'}: {rule.get('message', expr)} (evaluation error: {exc.args[0]})")
                continue
            if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
                errors.append(f"{path or '/'}: {rule.get('message', expr)}")
    return errors


def admission_errors(crd: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None = None
                     ) -> list[str]:
    """Everything the API server would refuse in `obj` (create, or update from `old`)."""
    schema = version_schema(crd)
    new = apply_defaults(schema, obj)
    prior = apply_defaults(schema, old) if old is not None else None
    return jsonschema_errors(schema, new) + cel_errors(schema, new, prior)


# --- built-in kinds ---------------------------------------------------------------------

KUBERNETES_VERSION = "1.30"  # the oldest version the chart supports (values.schema.json says so too)


def builtin_errors(obj: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> list[str]:
    """`obj` against Kubernetes' own schema of its kind (strict: unknown fields refused)."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(dict(obj), version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{obj['kind']}/{obj['metadata'].get('name')}: {'.'.join(map(str, exc.path))}: {exc.message}"]
    return []


def has_builtin_schema(obj: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> bool:
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError

    try:
        kubernetes_validate.validate(dict(obj), version, strict=True)
    except SchemaNotFoundError:
        return False
    except kubernetes_validate.ValidationError:
        return True
    return True
