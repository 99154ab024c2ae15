"""The registry's values: schemas, references, compatibility levels and modes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class SchemaType(str, Enum):
    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


class Compatibility(str, Enum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """The new schema must read data written with the old (new = reader)."""
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """The old schema must read data written with the new (old = reader)."""
        return self.value.startswith(("FORWARD", "FULL"))


class Mode(str, Enum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    IMPORT = "IMPORT"


DEFAULT_COMPATIBILITY = Compatibility.BACKWARD  # Confluent's default
DEFAULT_MODE = Mode.READWRITE


@dataclass(frozen=True, slots=True)
class Reference:
    """A named dependency on another subject's version (Avro: a named type; JSON: a $ref URL; Protobuf: an import path)."""
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaDef:
    """A schema as stored: type, text (compact JSON; Protobuf: normalized text) and references; its identity for global ids."""
    schema_type: SchemaType
    text: str
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True)
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    deleted: bool = False
    owner: str | None = None  # the user who registered it (with a users file), for the per-user caps
