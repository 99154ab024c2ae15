"""Protobuf schemas: parse `.proto` text (or a base64 FileDescriptorProto) with protoc into descriptors.

Clients register either `.proto` source (curl, Java's serializer) or, as
confluent-kafka's ProtobufSerializer does, the base64 of the file's
serialized FileDescriptorProto. Both go through protoc itself
(grpc_tools' in-process `protoc`, the most faithful parser there is): the
main file and its references are laid out in a temporary folder under their
import names (sources as files, descriptors in a `--descriptor_set_in` set),
the well-known `google/protobuf/*.proto` (and `google/type/*.proto` when
googleapis-common-protos is installed) come from the include path, and
protoc writes a FileDescriptorSet with every import. A refusal carries
protoc's own message (read from its stderr, file descriptor 2, which is
captured for the few milliseconds of the run).
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc_tools
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from grpc_tools import _protoc_compiler

from tinystream.registry.errors import ErrorCode, RegistryError

MAIN_NAME = "default.proto"  # the name a text schema's file gets (Confluent's ProtobufSchema calls it "default")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_ABSL_LOG = re.compile(r"WARNING: All log messages|[WIE]\d{4} ")  # protoc's logging, not a finding
_WELL_KNOWN = Path(grpc_tools.__file__).parent / "_proto"
_STDERR = threading.Lock()  # fd 2 is one per process: two registries in one process (tests) take turns


@dataclass(frozen=True, slots=True)
class ParsedProto:
    """The registered file's descriptor and every file it imports (by import name), as protoc built them."""
    main: descriptor_pb2.FileDescriptorProto
    files: dict[str, descriptor_pb2.FileDescriptorProto]


def normalize(text: str) -> str:
    """The stored text: line ends and trailing spaces evened out (no .proto token spans them), base64 as given."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).strip("\n") + ("\n" if "\n" in text.strip() else "")


def as_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto a base64 schema holds, or None when `text` is .proto source."""
    if not _BASE64.fullmatch(text):
        return None
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, DecodeError, ValueError):
        return None
    return proto if proto.ByteSize() else None


def canonical(parsed: ParsedProto) -> bytes:
    """The file's descriptor without what differs between one file's forms (its name, json_name, source info)."""
    main = descriptor_pb2.FileDescriptorProto()
    main.CopyFrom(parsed.main)
    main.ClearField("name")
    main.ClearField("source_code_info")
    pending = list(main.message_type)
    while pending:
        message = pending.pop()
        for field in (*message.field, *message.extension):
            field.ClearField("json_name")
        pending += message.nested_type
    return bytes(main.SerializeToString(deterministic=True))


def serialized(parsed: ParsedProto) -> str:
    """`?format=serialized`: the base64 FileDescriptorProto confluent-kafka's deserializer reads."""
    return base64.standard_b64encode(parsed.main.SerializeToString()).decode("ascii")


def _include_paths() -> list[Path]:
    """protoc's own well-known files, and googleapis-common-protos' google/type/*.proto beside its modules."""
    google_type = importlib.util.find_spec("google.type")
    locations = google_type.submodule_search_locations if google_type is not None else None
    return [_WELL_KNOWN, *(Path(location).parent.parent for location in locations or ())]


def parse(text: str, references: dict[str, str]) -> ParsedProto:
    """Parse `text`; `references` maps import names to their schema texts (every transitive one)."""
    with tempfile.TemporaryDirectory(prefix="tinystream-proto-") as folder:
        root = Path(folder)
        sources, descriptors = root / "src", descriptor_pb2.FileDescriptorSet()
        sources.mkdir()
        for name, dep_text in references.items():
            _lay_out(sources, descriptors, name, dep_text)
        main_descriptor = as_descriptor(text)
        main_name = main_descriptor.name if main_descriptor is not None and main_descriptor.name else MAIN_NAME
        _lay_out(sources, descriptors, main_name, text)
        out = root / "out.pb"
        args = ["protoc", f"-I{sources}", *(f"-I{p}" for p in _include_paths()),
                "--include_imports", f"--descriptor_set_out={out}"]
        if descriptors.file:
            given = root / "given.pb"
            given.write_bytes(descriptors.SerializeToString())
            args.append(f"--descriptor_set_in={given}")
        args.append(main_name)
        code, errors = _run_protoc(args, root)
        if code != 0:
            lines = [line for line in errors.replace(str(sources) + os.sep, "").splitlines()
                     if line.strip() and not _ABSL_LOG.match(line)]
            message = "\n".join(lines) or f"protoc exited with {code}"
            raise RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: {message}")
        built = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    files = {f.name: f for f in built.file}
    return ParsedProto(files[main_name], files)


def _lay_out(sources: Path, descriptors: descriptor_pb2.FileDescriptorSet, name: str, text: str) -> None:
    if not name or name.startswith("/") or ".." in Path(name).parts:
        raise RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: {name!r} is not a relative import path")
    proto = as_descriptor(text)
    if proto is not None:
        proto.name = name  # a reference's descriptor is imported by its reference name (confluent-kafka does the same)
        descriptors.file.append(proto)
        return
    path = sources / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _run_protoc(args: list[str], scratch: Path) -> tuple[int, str]:
    """Run protoc in this process with its stderr (fd 2) sent to a file; (exit code, what it printed)."""
    log = scratch / "stderr.txt"
    with _STDERR:
        return _run_protoc_locked(args, log)


def _run_protoc_locked(args: list[str], log: Path) -> tuple[int, str]:
    saved = os.dup(2)
    try:
        with open(log, "wb") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                code = _protoc_compiler.run_main([a.encode() for a in args])
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)
    return code, log.read_text(errors="replace")
