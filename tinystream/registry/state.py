"""The registry's state, rebuilt from `_schemas` records; decisions return records to write.

Pure: no I/O. `apply(record)` is the only mutation (the store calls it for
every record read back from the topic, in order), so every instance that has
read the same prefix of the topic holds the same state. The `plan_*` methods
check a request against the state and return the records that carry it out
(or raise RegistryError); nothing changes until those records come back
through `apply`.

Invariants: a schema (type, compact text, references) has one global id
whatever subject holds it (Confluent); versions of a subject only grow (a new
version is one past the highest ever seen, soft-deleted ones included); a
SCHEMA record whose id already names a different schema, or whose subject
version already holds another id, is refused by `apply` (two writers raced;
the loser sees it and plans again). Every reader refuses the same records,
so instances agree; see docs/schema-registry.md for what compaction can do
to a refused record.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from tinystream.registry import compatibility
from tinystream.registry.compatibility import ParsedSchema
from tinystream.registry.errors import ErrorCode, RegistryError
from tinystream.registry.model import (
    DEFAULT_COMPATIBILITY,
    DEFAULT_MODE,
    Compatibility,
    Mode,
    Reference,
    SchemaDef,
    SchemaType,
    SubjectVersion,
)
from tinystream.registry.normalize import normalize
from tinystream.registry.records import CONFIG, MODE, SCHEMA, Record, config_key, mode_key, schema_key


@dataclass(frozen=True, slots=True)
class Limits:
    """What the registry holds at most; soft-deleted versions count until hard-deleted (they are still stored)."""
    max_subjects: int = 10_000
    max_subjects_per_user: int = 1_000
    max_versions: int = 100_000
    max_versions_per_user: int = 10_000


@dataclass(frozen=True, slots=True)
class Registration:
    """The outcome of a register request: the id, and records to write (none if already there)."""
    schema_id: int
    subject: str
    version: int
    records: tuple[Record, ...]


class RegistryState:
    def __init__(self, *, default_compatibility: Compatibility = DEFAULT_COMPATIBILITY, limits: Limits = Limits()) -> None:
        self.limits = limits
        self.schemas: dict[int, SchemaDef] = {}
        self.ids: dict[SchemaDef, int] = {}
        self.subjects: dict[str, dict[int, SubjectVersion]] = {}
        self.default_compatibility = default_compatibility
        self.configs: dict[str | None, Compatibility] = {None: default_compatibility}
        self.modes: dict[str | None, Mode] = {None: DEFAULT_MODE}
        self.normalize: dict[str | None, bool] = {}  # the config key "normalize", per subject and global (None)
        self._held: Counter[str | None] = Counter()  # versions held per owner (None: registered without a login)
        self.max_id = 0
        self._parsed: dict[int, ParsedSchema] = {}

    # -- applying records -------------------------------------------------------------------
    def apply(self, record: Record) -> bool:
        """Apply one record read from the topic; False if it was refused (a lost id race, a bad value)."""
        kind, subject = record.key.get("keytype"), record.key.get("subject")
        try:
            if kind == SCHEMA:
                return self._apply_schema(str(subject), int(record.key["version"]), record.value)
            if kind == CONFIG:
                self._apply_config(subject, record.value)
            elif kind == MODE:
                self._set_or_drop(self.modes, subject, record.value, "mode", Mode)
        except (KeyError, ValueError, TypeError):
            return False
        return True

    def _apply_config(self, subject: Any, value: dict[str, Any] | None) -> None:
        """A CONFIG value is the key's whole config: a level, `normalize`, or both."""
        level = None if value is None or "compatibilityLevel" not in value else Compatibility(value["compatibilityLevel"])
        normalize = None if value is None else value.get("normalize")
        if normalize is not None and not isinstance(normalize, bool):
            raise ValueError("normalize is true or false")
        if level is not None:
            self.configs[subject] = level
        elif subject is not None:
            self.configs.pop(subject, None)
        elif value is not None:
            self.configs[None] = self.default_compatibility
        if normalize is None:
            self.normalize.pop(subject, None)
        else:
            self.normalize[subject] = normalize

    def normalizes(self, subject: str) -> bool:
        """Whether the subject's config (or the global one) says `normalize`."""
        return self.normalize.get(subject, self.normalize.get(None, False))

    @staticmethod
    def _set_or_drop(table: dict[Any, Any], subject: Any, value: dict[str, Any] | None, field: str, kind: Any) -> None:
        if value is None:
            if subject is not None:
                table.pop(subject, None)
        else:
            table[subject] = kind(value[field])

    def _apply_schema(self, subject: str, version: int, value: dict[str, Any] | None) -> bool:
        versions = self.subjects.setdefault(subject, {})
        if value is None:
            gone = versions.pop(version, None)
            if not versions:
                del self.subjects[subject]
            if gone is not None:
                self._held[gone.owner] -= 1
                self._forget_if_unused(gone.schema_id)
            return True
        schema = SchemaDef(SchemaType(value.get("schemaType") or "AVRO"), value["schema"],
                           tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in value.get("references") or ()))
        schema_id = int(value["id"])
        if self.schemas.get(schema_id, schema) != schema:
            return False
        held = versions.get(version)
        if held is not None and held.schema_id != schema_id:
            return False  # two writers planned the same version of one subject: the first one stays
        self.schemas[schema_id] = schema
        self.ids.setdefault(schema, schema_id)
        self.max_id = max(self.max_id, schema_id)
        owner = value.get("owner")
        versions[version] = SubjectVersion(subject, version, schema_id, bool(value.get("deleted")),
                                           owner if isinstance(owner, str) else None)
        if held is not None:
            self._held[held.owner] -= 1
        self._held[versions[version].owner] += 1
        return True

    def _forget_if_unused(self, schema_id: int) -> None:
        if any(v.schema_id == schema_id for versions in self.subjects.values() for v in versions.values()):
            return
        schema = self.schemas.pop(schema_id, None)
        self._parsed.pop(schema_id, None)
        if schema is not None and self.ids.get(schema) == schema_id:
            del self.ids[schema]

    # -- queries ----------------------------------------------------------------------------
    def subject_names(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s, versions in self.subjects.items() if any(deleted or not v.deleted for v in versions.values()))

    def versions(self, subject: str, *, deleted: bool = False) -> list[SubjectVersion]:
        found = [v for _, v in sorted(self.subjects.get(subject, {}).items()) if deleted or not v.deleted]
        if not found:
            raise RegistryError(ErrorCode.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        return found

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> SubjectVersion:
        live = self.versions(subject, deleted=deleted)
        number = parse_version(version)
        if number == -1:
            return live[-1]
        for candidate in live:
            if candidate.version == number:
                return candidate
        raise RegistryError(ErrorCode.VERSION_NOT_FOUND, f"Version {version} not found.")

    def schema(self, schema_id: int) -> SchemaDef:
        try:
            return self.schemas[schema_id]
        except KeyError:
            raise RegistryError(ErrorCode.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found") from None

    def uses_of(self, schema_id: int, *, deleted: bool = False) -> list[SubjectVersion]:
        self.schema(schema_id)
        return [v for s in sorted(self.subjects) for _, v in sorted(self.subjects[s].items())
                if v.schema_id == schema_id and (deleted or not v.deleted)]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name this subject version."""
        users = {v.schema_id for versions in self.subjects.values() for v in versions.values() if not v.deleted}
        return sorted(i for i in users
                      if any(r.subject == subject and r.version == version for r in self.schemas[i].references))

    def lookup(self, subject: str, schema: SchemaDef, *, deleted: bool = False, normalized: bool = False) -> SubjectVersion:
        """The version holding `schema`; `normalized`: `schema` is normalized, and so is each stored one compared."""
        versions = self.versions(subject, deleted=deleted)
        for candidate in reversed(versions):
            if self.schemas[candidate.schema_id] == schema:  # by content: IMPORT may give one schema two ids
                return candidate
        if normalized:
            for candidate in reversed(versions):
                stored = self.schemas[candidate.schema_id]
                if stored.references == schema.references and stored.schema_type is schema.schema_type and \
                        normalize(stored.text, stored.schema_type) == schema.text:
                    return candidate
        if schema.schema_type is SchemaType.PROTOBUF:
            # One .proto file in either form (text from curl, a descriptor from confluent-kafka) is one schema.
            wanted = self.parsed(schema)
            for candidate in reversed(versions):
                stored = self.schemas[candidate.schema_id]
                if stored.references == schema.references and compatibility.same_protobuf(
                        self.parsed(stored, candidate.schema_id), wanted):
                    return candidate
        raise RegistryError(ErrorCode.SCHEMA_NOT_FOUND, "Schema not found")

    def compatibility(self, subject: str | None) -> Compatibility:
        return self.configs.get(subject, self.configs[None])

    def mode(self, subject: str | None) -> Mode:
        return self.modes.get(subject, self.modes[None])

    def parsed(self, schema: SchemaDef, schema_id: int | None = None) -> ParsedSchema:
        if schema_id is not None and schema_id in self._parsed:
            return self._parsed[schema_id]
        result = compatibility.parse(schema, self._resolve)
        if schema_id is not None:
            self._parsed[schema_id] = result
        return result

    def _resolve(self, reference: Reference) -> SchemaDef:
        try:
            return self.schemas[self.version(reference.subject, reference.version).schema_id]
        except RegistryError as exc:
            raise RegistryError(ErrorCode.INVALID_SCHEMA,
                                f"Invalid schema: reference {reference.name} to {reference.subject} "
                                f"version {reference.version}: {exc.message}") from exc

    def incompatibilities(self, subject: str, schema: SchemaDef, *, against: str | int | None = None) -> list[str]:
        """What the subject's level finds wrong with `schema` (against one version, or the level's set)."""
        new = self.parsed(schema)
        level = self.compatibility(subject)
        if against is not None:
            old = self.version(subject, against)
            level = Compatibility(level.value.removesuffix("_TRANSITIVE"))
            return compatibility.check(level, new, [self.parsed(self.schemas[old.schema_id], old.schema_id)])
        live = [v for _, v in sorted(self.subjects.get(subject, {}).items()) if not v.deleted]
        previous = [self.parsed(self.schemas[v.schema_id], v.schema_id) for v in live]
        return compatibility.check(level, new, previous)

    # -- decisions --------------------------------------------------------------------------
    def _within_limits(self, subject: str, owner: str | None) -> None:
        """Refuse a new version (and maybe a new subject) past a cap; what is held stays as it is."""
        new_subject = not self.subjects.get(subject)
        held = sum(self._held.values())
        checks = [(held >= self.limits.max_versions, f"the registry holds {held} schema versions, "
                   f"its limit (max_versions {self.limits.max_versions})")]
        subjects = sum(bool(versions) for versions in self.subjects.values())
        if new_subject:
            checks.append((subjects >= self.limits.max_subjects, f"the registry holds {subjects} subjects, "
                           f"its limit (max_subjects {self.limits.max_subjects})"))
        if owner is not None:
            mine = self._held[owner]
            checks.append((mine >= self.limits.max_versions_per_user, f"user '{owner}' registered {mine} schema "
                           f"versions, the limit per user (max_versions_per_user {self.limits.max_versions_per_user})"))
            if new_subject:
                created = sum(versions[min(versions)].owner == owner for versions in self.subjects.values() if versions)
                checks.append((created >= self.limits.max_subjects_per_user, f"user '{owner}' created {created} "
                               f"subjects, the limit per user (max_subjects_per_user {self.limits.max_subjects_per_user})"))
        for over, why in checks:
            if over:
                raise RegistryError(ErrorCode.LIMIT_REACHED, f"Cannot register under subject '{subject}': {why}")

    def plan_register(self, subject: str, schema: SchemaDef, *, schema_id: int | None = None,
                      version: int | None = None, owner: str | None = None, normalized: bool = False) -> Registration:
        mode = self.mode(subject)
        if mode is Mode.READONLY:
            raise RegistryError(ErrorCode.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        if (schema_id is not None or version is not None) and mode is not Mode.IMPORT:
            raise RegistryError(ErrorCode.OPERATION_NOT_PERMITTED,
                                "Registering with a given id or version needs IMPORT mode")
        self.parsed(schema)  # raises INVALID_SCHEMA
        existing = self.subjects.get(subject, {})
        try:
            found = self.lookup(subject, schema, normalized=normalized)
            if schema_id is None or found.schema_id == schema_id:
                return Registration(found.schema_id, subject, found.version, ())
        except RegistryError:
            pass
        self._within_limits(subject, owner)  # before the compatibility check: the cheaper refusal first
        if mode is not Mode.IMPORT:
            problems = self.incompatibilities(subject, schema)
            if problems:
                raise RegistryError(ErrorCode.INCOMPATIBLE_SCHEMA,
                                    "Schema being registered is incompatible with an earlier schema for subject "
                                    f"\"{subject}\", details: {problems}")
        if schema_id is None:
            schema_id = self.ids.get(schema, self.max_id + 1)
        elif self.schemas.get(schema_id, schema) != schema:
            raise RegistryError(ErrorCode.OPERATION_NOT_PERMITTED, f"Schema id {schema_id} already names another schema")
        if version is None:
            version = max(existing, default=0) + 1
        elif version in existing:
            raise RegistryError(ErrorCode.INVALID_VERSION, f"Version {version} of {subject} already exists")
        value = {"subject": subject, "version": version, "id": schema_id, "schemaType": schema.schema_type.value,
                 "schema": schema.text, "references": [r.to_json() for r in schema.references], "deleted": False}
        if schema.schema_type is SchemaType.AVRO:
            del value["schemaType"]  # Confluent's layout: absent means AVRO
        if owner is not None:
            value["owner"] = owner  # an extra field; Confluent's readers ignore unknown ones
        return Registration(schema_id, subject, version, (Record(schema_key(subject, version), value),))

    def _writable(self, subject: str) -> None:
        if self.mode(subject) is Mode.READONLY:
            raise RegistryError(ErrorCode.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")

    def _not_referenced(self, target: SubjectVersion) -> None:
        users = self.referenced_by(target.subject, target.version)
        if users:
            raise RegistryError(ErrorCode.REFERENCE_EXISTS,
                                f"One or more references exist to the schema {{subject={target.subject}, "
                                f"version={target.version}}}: ids {users}")

    def _deleted_value(self, target: SubjectVersion) -> dict[str, Any]:
        schema = self.schemas[target.schema_id]
        value = {"subject": target.subject, "version": target.version, "id": target.schema_id,
                 "schemaType": schema.schema_type.value, "schema": schema.text,
                 "references": [r.to_json() for r in schema.references], "deleted": True}
        if target.owner is not None:
            value["owner"] = target.owner  # a soft-deleted version still counts for its owner
        return value

    def plan_delete_version(self, subject: str, version: str | int, *, permanent: bool) -> tuple[int, list[Record]]:
        self._writable(subject)
        if permanent:
            target = self.version(subject, version, deleted=True)
            if not target.deleted:
                raise RegistryError(ErrorCode.SCHEMA_VERSION_NOT_SOFT_DELETED,
                                    f"Subject '{subject}' Version {target.version} was not deleted first before "
                                    "being permanently deleted")
            self._not_referenced(target)
            return target.version, [Record(schema_key(subject, target.version), None)]
        # a numbered version already soft-deleted is named as such (Confluent's 40406), not "not found"
        numbered = parse_version(version) != -1
        target = self.version(subject, version, deleted=numbered)
        if target.deleted:
            raise RegistryError(ErrorCode.SCHEMA_VERSION_SOFT_DELETED,
                                f"Subject '{subject}' Version {target.version} was soft deleted. "
                                "Set permanent=true to delete permanently")
        self._not_referenced(target)
        return target.version, [Record(schema_key(subject, target.version), self._deleted_value(target))]

    def plan_delete_subject(self, subject: str, *, permanent: bool) -> tuple[list[int], list[Record]]:
        self._writable(subject)
        every = self.versions(subject, deleted=True)
        live = [v for v in every if not v.deleted]
        for target in every if permanent else live:
            self._not_referenced(target)
        if permanent:
            if live:
                raise RegistryError(ErrorCode.SUBJECT_NOT_SOFT_DELETED,
                                    f"Subject '{subject}' was not deleted first before being permanently deleted")
            records = [Record(schema_key(subject, v.version), None) for v in every]
            records += [Record(config_key(subject), None), Record(mode_key(subject), None)]
            return [v.version for v in every], records
        if not live:
            raise RegistryError(ErrorCode.SUBJECT_SOFT_DELETED, f"Subject '{subject}' was soft deleted.")
        return [v.version for v in live], [Record(schema_key(subject, v.version), self._deleted_value(v)) for v in live]

    def plan_config(self, subject: str | None, level: str | None, normalize: bool | None = None) -> list[Record]:
        """The key's whole config: no level and no `normalize` drops it (a tombstone)."""
        if level is None and normalize is None:
            return [Record(config_key(subject), None)]
        value: dict[str, Any] = {}
        if level is not None:
            try:
                Compatibility(level)
            except ValueError:
                raise RegistryError(ErrorCode.INVALID_COMPATIBILITY_LEVEL,
                                    f"Invalid compatibility level. Valid values are {[c.value for c in Compatibility]}") from None
            value["compatibilityLevel"] = level
        if normalize is not None:
            value["normalize"] = normalize
        return [Record(config_key(subject), value)]

    def plan_mode(self, subject: str | None, mode: str | None, *, force: bool = False) -> list[Record]:
        if mode is None:
            return [Record(mode_key(subject), None)]
        try:
            chosen = Mode(mode)
        except ValueError:
            raise RegistryError(ErrorCode.INVALID_MODE,
                                f"Invalid mode. Valid values are {[m.value for m in Mode]}") from None
        has_schemas = bool(self.subject_names()) if subject is None else subject in self.subjects
        if chosen is Mode.IMPORT and has_schemas and not force:
            raise RegistryError(ErrorCode.OPERATION_NOT_PERMITTED,
                                "Cannot import since found existing subjects (use force=true)")
        return [Record(mode_key(subject), {"mode": chosen.value})]


def parse_version(version: str | int) -> int:
    """A version in a URL: a number from 1, or "latest" / -1 for the latest live one."""
    if version == "latest":
        return -1
    try:
        number = int(version)
    except (TypeError, ValueError):
        number = 0
    if number == -1 or 1 <= number <= 2**31 - 1:
        return number
    raise RegistryError(ErrorCode.INVALID_VERSION,
                        f"The specified version '{version}' is not a valid version id. Allowed values are between "
                        "[1, 2^31-1] and the string \"latest\"")
