"""Registry-framed Protobuf values <-> Spark rows, with no I/O.

Confluent's wire format for Protobuf (what ProtobufSerializer writes):

    byte 0      magic 0
    bytes 1..4  schema id, big-endian int32
    then        the message indexes: a zigzag varint count, then one zigzag varint per
                level (top-level message, nested message, ...); the common [0] (the
                file's first message) is the single byte 0
    then        the message's binary encoding

A schema arrives here as descriptors, never as .proto text: the registry
parses (`?format=serialized` gives the base64 FileDescriptorProto; the
connector packs the file and its references into one FileDescriptorSet,
dependencies first), so the connector needs the protobuf runtime only, not
protoc. Well-known imports (google/protobuf/*.proto) come from the runtime.

Protobuf -> Spark types follow Spark's `from_protobuf`: int32/sint32/sfixed32
-> int, int64/sint64/sfixed64/uint32/fixed32 -> bigint (uint32 upcast as
with upcast.unsigned.ints), uint64/fixed64 -> decimal(20,0), float, double,
bool, string, bytes -> binary, enum -> string (the value's name), message ->
struct, repeated -> array, map<K, V> -> map. A recursive message is refused
(from_protobuf's default, recursive.fields.max.depth=-1). Reads emit proto3's
default values for scalars without presence (an unset int32 reads 0, as the
generated classes and confluent-kafka show it); an unset message field, or
a scalar with presence (`optional`, proto2), reads null.
"""

from __future__ import annotations

import base64
import decimal
from typing import Any

from pyspark.sql import types as T

from tinystream.spark.errors import SchemaRegistryError

_INT = T.IntegerType()
_LONG = T.LongType()
_U64 = T.DecimalType(20, 0)


def _protobuf() -> Any:
    """google.protobuf, imported only when a pipeline uses Protobuf values (plain reads never need it)."""
    try:
        from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message_factory  # noqa: PLC0415
    except ImportError as exc:
        raise SchemaRegistryError("registry-framed Protobuf needs protobuf: pip install 'protobuf>=5.26'") from exc
    return descriptor, descriptor_pb2, descriptor_pool, message_factory


# --- message indexes --------------------------------------------------------


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_zigzag(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise SchemaRegistryError("the Protobuf message indexes end early (a truncated varint)")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def frame_indexes(indexes: list[int]) -> bytes:
    """The message-index list as ProtobufSerializer writes it ([0] as the single byte 0)."""
    if indexes == [0]:
        return b"\x00"
    return _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)


def read_indexes(data: bytes) -> tuple[list[int], bytes]:
    """(message indexes, message bytes) of what follows the schema id."""
    count, pos = _read_zigzag(data, 0)
    if count == 0:
        return [0], data[pos:]
    if count < 0 or count > len(data):
        raise SchemaRegistryError(f"the Protobuf message-index count {count} is not a valid count")
    indexes = []
    for _ in range(count):
        index, pos = _read_zigzag(data, pos)
        indexes.append(index)
    return indexes, data[pos:]


# --- descriptors ------------------------------------------------------------


def file_set(files: list[bytes]) -> str:
    """base64 of a FileDescriptorSet of serialized FileDescriptorProtos (dependencies first, the main file last)."""
    _, descriptor_pb2, _, _ = _protobuf()
    result = descriptor_pb2.FileDescriptorSet()
    for data in files:
        result.file.add().ParseFromString(data)
    return base64.b64encode(result.SerializeToString()).decode("ascii")


def main_file(set_text: str) -> Any:
    """The FileDescriptorProto of the registered file (the set's last)."""
    _, descriptor_pb2, _, _ = _protobuf()
    return descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(set_text)).file[-1]


def file_proto(serialized: str) -> Any:
    """The FileDescriptorProto of a registry's `?format=serialized` text (base64)."""
    _, descriptor_pb2, _, _ = _protobuf()
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized, validate=True))
    except Exception as exc:  # noqa: BLE001 - binascii.Error, DecodeError
        raise SchemaRegistryError(f"the registry served no Protobuf descriptor (format=serialized): {exc}") from exc


def message_name(file_proto: Any, indexes: list[int]) -> str:
    """The full name of the message the indexes point at ([0]: the file's first message)."""
    messages, names = file_proto.message_type, [file_proto.package] if file_proto.package else []
    for depth, index in enumerate(indexes):
        if not 0 <= index < len(messages):
            raise SchemaRegistryError(f"message index {indexes} names no message of {file_proto.name!r}")
        names.append(messages[index].name)
        if depth < len(indexes) - 1:
            messages = messages[index].nested_type
    return ".".join(names)


def message_indexes(file_proto: Any, full_name: str) -> list[int]:
    """The index path of a message (top-level or nested) in its file; a name it lacks is an error."""
    prefix = f"{file_proto.package}." if file_proto.package else ""
    pending = [(m, [i], prefix + m.name) for i, m in enumerate(file_proto.message_type)]
    while pending:
        message, path, name = pending.pop(0)
        if name == full_name:
            return path
        pending += [(n, [*path, i], f"{name}.{n.name}") for i, n in enumerate(message.nested_type)]
    raise SchemaRegistryError(f"the schema has no message {full_name!r}")


def load(set_text: str, full_name: str | None) -> Any:
    """The Descriptor of `full_name` (None: the main file's first message) in a pool of its own."""
    _, descriptor_pb2, descriptor_pool, _ = _protobuf()
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(set_text)).file
    if not files or not files[-1].message_type:
        raise SchemaRegistryError("the Protobuf schema has no message")
    pool, known = descriptor_pool.DescriptorPool(), {f.name for f in files}
    for file in files:
        for dep in file.dependency:
            if dep not in known:  # a well-known import the registry keeps built in (Confluent does too)
                _add_well_known(pool, descriptor_pb2, dep)
                known.add(dep)
        pool.Add(file)
    name = full_name or message_name(files[-1], [0])
    try:
        return pool.FindMessageTypeByName(name)
    except KeyError:
        raise SchemaRegistryError(f"the Protobuf schema has no message {name!r}") from None


def _add_well_known(pool: Any, descriptor_pb2: Any, name: str) -> None:
    from google.protobuf import descriptor_pool as runtime  # noqa: PLC0415
    try:
        found = runtime.Default().FindFileByName(name)
    except KeyError:
        module = name.removesuffix(".proto").replace("/", ".") + "_pb2"
        try:
            __import__(module)
            found = runtime.Default().FindFileByName(name)
        except (ImportError, KeyError):
            raise SchemaRegistryError(f"the Protobuf import {name!r} is neither a reference nor built in") from None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    for dep in proto.dependency:
        _add_well_known(pool, descriptor_pb2, dep)
    pool.Add(proto)


# --- types ------------------------------------------------------------------

_SCALARS = {  # FieldDescriptor.TYPE_* numbers (descriptor.proto's Type enum) -> Spark type
    5: _INT, 17: _INT, 15: _INT,  # int32, sint32, sfixed32
    3: _LONG, 18: _LONG, 16: _LONG, 13: _LONG, 7: _LONG,  # int64, sint64, sfixed64, uint32, fixed32
    4: _U64, 6: _U64,  # uint64, fixed64
    2: T.FloatType(), 1: T.DoubleType(), 8: T.BooleanType(), 9: T.StringType(), 12: T.BinaryType(),
    14: T.StringType(),  # enum: its value's name
}
_MESSAGE, _GROUP = 11, 10


def _is_map(field: Any) -> bool:
    return field.type == _MESSAGE and field.message_type.GetOptions().map_entry


def _is_repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 6.31; `label` is gone in 7
    return bool(repeated) if repeated is not None else field.label == 3  # LABEL_REPEATED


def spark_type(message: Any, seen: tuple[str, ...] = ()) -> T.StructType:
    """The struct of a message Descriptor; a message that contains itself is refused."""
    if message.full_name in seen:
        raise SchemaRegistryError(
            f"the Protobuf message {message.full_name} is recursive ({' -> '.join((*seen, message.full_name))}); "
            "a Spark struct cannot hold it")
    fields = []
    for field in message.fields:
        if _is_map(field):
            key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            kind: T.DataType = T.MapType(_field_type(key, seen + (message.full_name,)),
                                         _field_type(value, seen + (message.full_name,)), True)
        else:
            kind = _field_type(field, seen + (message.full_name,))
            if _is_repeated(field):
                kind = T.ArrayType(kind, False)
        fields.append(T.StructField(field.name, kind, True))
    return T.StructType(fields)


def _field_type(field: Any, seen: tuple[str, ...]) -> T.DataType:
    if field.type in (_MESSAGE, _GROUP):
        return spark_type(field.message_type, seen)
    return _SCALARS[field.type]


# --- values -----------------------------------------------------------------


def decode(message: Any, payload: bytes) -> dict[str, Any]:
    """A message's binary encoding -> a dict of its struct (see the module docstring for defaults)."""
    _, _, _, message_factory = _protobuf()
    parsed = message_factory.GetMessageClass(message)()
    try:
        parsed.ParseFromString(payload)
    except Exception as exc:  # noqa: BLE001 - DecodeError and friends from a malformed payload
        raise SchemaRegistryError(f"the payload does not decode as {message.full_name}: {exc}") from exc
    return _to_row(parsed)


def _to_row(parsed: Any) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for field in parsed.DESCRIPTOR.fields:
        value = getattr(parsed, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            row[field.name] = {k: _scalar_or_row(value_field, v) for k, v in value.items()}
        elif _is_repeated(field):
            row[field.name] = [_scalar_or_row(field, v) for v in value]
        elif field.has_presence and not parsed.HasField(field.name):
            row[field.name] = None
        else:
            row[field.name] = _scalar_or_row(field, value)
    return row


def _scalar_or_row(field: Any, value: Any) -> Any:
    if field.type in (_MESSAGE, _GROUP):
        return _to_row(value)
    if field.type == 14:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else str(value)  # an unknown number (a newer writer) as its digits
    if _SCALARS[field.type] is _U64:
        return decimal.Decimal(value)
    return value


def encode(message: Any, value: dict[str, Any]) -> bytes:
    """A row (dict of the struct) -> the message's binary encoding; a value the message does not take is an error."""
    _, _, _, message_factory = _protobuf()
    built = message_factory.GetMessageClass(message)()
    try:
        _fill(built, value)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise SchemaRegistryError(f"the value {value!r} does not match the Protobuf message {message.full_name}: {exc}") from exc
    return bytes(built.SerializeToString())


def _fill(target: Any, row: dict[str, Any]) -> None:
    if not isinstance(row, dict):
        raise TypeError(f"a message needs a struct, got {type(row).__name__}")
    for name in row:
        if name not in target.DESCRIPTOR.fields_by_name:
            raise KeyError(f"no field {name!r}")
    for field in target.DESCRIPTOR.fields:
        value = row.get(field.name)
        if value is None:
            continue
        if _is_map(field):
            value_field, entries = field.message_type.fields_by_name["value"], getattr(target, field.name)
            pairs = value.items() if isinstance(value, dict) else value  # Arrow gives a map as (key, value) pairs
            for k, v in pairs:
                if value_field.type == _MESSAGE:
                    _fill(entries[k], v)
                else:
                    entries[k] = _python(value_field, v)
        elif _is_repeated(field):
            items = getattr(target, field.name)
            for v in value:
                if field.type == _MESSAGE:
                    _fill(items.add(), v)
                else:
                    items.append(_python(field, v))
        elif field.type == _MESSAGE:
            _fill(getattr(target, field.name), value)
        else:
            setattr(target, field.name, _python(field, value))


def _python(field: Any, value: Any) -> Any:
    if field.type == 14 and isinstance(value, str):
        named = field.enum_type.values_by_name.get(value)
        if named is None:
            raise ValueError(f"{value!r} is not a value of the enum {field.enum_type.full_name}")
        return named.number
    if isinstance(value, decimal.Decimal):
        return int(value)
    return value
