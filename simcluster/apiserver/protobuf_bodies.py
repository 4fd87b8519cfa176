"""Kubernetes protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`), decoded
into the JSON objects the rest of the API server handles.

kubectl v1.35's typed commands (`create namespace|configmap|secret|job|deployment`, `delete` with
options, `drain`'s evictions, `scale`) send built-in kinds as protobuf and have no JSON fallback.
The body is the 4-byte magic `k8s\\0` and a `runtime.Unknown` (typeMeta{apiVersion, kind}, raw, ...),
whose `raw` is the object's own message.

The messages' field numbers, names and types are upstream facts (k8s.io/api and
k8s.io/apimachinery `generated.proto`), kept as data in `protobuf_schema.json`; descriptors are
built from it at first use and parsed with Google's protobuf library. The result is converted to
the Kubernetes JSON form: `Time` -> RFC 3339, `Quantity` -> its string, `IntOrString` -> int or
string, `RawExtension` -> the embedded JSON, `bytes` -> base64, maps -> objects. A kind that is not
in the schema is refused as the real server refuses a body it cannot decode (415).

Go's generated marshallers write every non-pointer field, set or not (`name: ""`, `hostNetwork:
false`, a zero `Time` as an empty message), so the schema also keeps, from the Go types
(k8s.io/api `types.go`), each field's JSON name and whether it is a pointer, `omitempty` or inlined
(`Volume.volumeSource`): a zero value of a non-pointer `omitempty` field is dropped as the server's
JSON encoding drops it, a pointer's zero (`gracePeriodSeconds: 0`, `replicas: 0`) is kept, and an
inlined struct's fields go into its parent.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

FDP = descriptor_pb2.FieldDescriptorProto  # the field types and labels of the classes made from the schema
MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"
SCHEMA = Path(__file__).with_name("protobuf_schema.json")
META = "k8s.io.apimachinery.pkg.apis.meta.v1"
UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"
ZERO_TIME = -62135596800  # 0001-01-01T00:00:00Z, time.Time{} in seconds since the epoch

# (group, version) of an apiVersion -> the proto package of its kinds
PACKAGES = {
    ("", "v1"): "k8s.io.api.core.v1",
    ("apps", "v1"): "k8s.io.api.apps.v1",
    ("batch", "v1"): "k8s.io.api.batch.v1",
    ("policy", "v1"): "k8s.io.api.policy.v1",
    ("rbac.authorization.k8s.io", "v1"): "k8s.io.api.rbac.v1",
    ("authorization.k8s.io", "v1"): "k8s.io.api.authorization.v1",  # (kubectl auth can-i's reviews)
    ("coordination.k8s.io", "v1"): "k8s.io.api.coordination.v1",
    ("autoscaling", "v1"): "k8s.io.api.autoscaling.v1",
    ("meta.k8s.io", "v1"): META,
}
SCALARS: dict[str, FDP.Type.ValueType] = {
    "string": FDP.TYPE_STRING, "bytes": FDP.TYPE_BYTES, "bool": FDP.TYPE_BOOL,
    "int32": FDP.TYPE_INT32, "int64": FDP.TYPE_INT64, "uint32": FDP.TYPE_UINT32,
    "uint64": FDP.TYPE_UINT64, "double": FDP.TYPE_DOUBLE, "float": FDP.TYPE_FLOAT,
    "fixed32": FDP.TYPE_FIXED32, "fixed64": FDP.TYPE_FIXED64,
    "sint32": FDP.TYPE_SINT32, "sint64": FDP.TYPE_SINT64,
}


UNKNOWN_FORMAT = ("the body of the request was in an unknown format - accepted media types include: "
                  "application/json, application/yaml")  # kube-apiserver's words for a kind it has no protobuf for


class BodyError(Exception):
    """The body cannot be decoded: `status` (400 malformed, 415 a kind not served as protobuf)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def is_protobuf(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == PROTOBUF


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object of a protobuf request body (apiVersion and kind from its envelope)."""
    if not body.startswith(MAGIC):
        raise BodyError(400, "the protobuf body does not start with the Kubernetes magic number")
    envelope = _parse(UNKNOWN, body[len(MAGIC):])
    type_meta = _field(envelope, "typeMeta")
    api_version, kind = type_meta.apiVersion, type_meta.kind
    encoding = _field(envelope, "contentEncoding")
    if encoding:
        raise BodyError(415, f"unsupported content encoding {encoding!r}")
    group, _, version = api_version.rpartition("/")
    package = PACKAGES.get((group, version))
    name = f"{package}.{kind}" if package else ""
    if not kind or name not in _schema():
        raise BodyError(415, UNKNOWN_FORMAT)
    obj = to_json(_parse(name, _field(envelope, "raw")))
    return {"apiVersion": api_version, "kind": kind, **obj}


def _field(message: Message, name: str) -> Any:
    """A field of a message whose class is made at run time from the schema (not typed)."""
    return getattr(message, name)


def _parse(name: str, raw: bytes) -> Message:
    cls = _classes()[name]
    msg = cls()
    try:
        msg.ParseFromString(raw)
    except DecodeError as exc:
        raise BodyError(400, f"cannot decode the protobuf body: {exc}") from None
    return msg


def to_json(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    facts = _go_facts().get(msg.DESCRIPTOR.full_name, {})
    for field, value in msg.ListFields():
        json_name, flags = facts.get(field.name, (field.name, ""))
        v = _value(field, value)
        if "i" in flags and isinstance(v, dict):
            out.update(v)
            continue
        if v is None or ("o" in flags and "p" not in flags and _zero(v, field)):
            continue
        out[json_name or field.name] = v
    return out


def _zero(v: Any, field: FieldDescriptor) -> bool:
    """Empty as Go's encoding/json `omitempty` sees it (structs are never empty; maps and lists are)."""
    if isinstance(v, dict):
        return not v and field.message_type is not None and field.message_type.GetOptions().map_entry
    return v in ("", 0, False) or v == []


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        vf = field.message_type.fields_by_name["value"]
        return {k: _single(vf, v) for k, v in value.items()}
    if field.is_repeated:
        return [_single(field, v) for v in value]
    return _single(field, value)


def _single(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    if field.message_type is None:
        return value
    full = field.message_type.full_name
    if full in (f"{META}.Time", f"{META}.MicroTime"):
        if value.seconds <= ZERO_TIME or (value.seconds == 0 and value.nanos == 0):  # Go's zero time: null
            return None
        stamp = dt.datetime.fromtimestamp(value.seconds, dt.UTC)
        if full.endswith("MicroTime"):
            return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.nanos // 1000:06d}Z"
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    if full == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        return value.string
    if full == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        return value.strVal if value.type == 1 else value.intVal
    if full == "k8s.io.apimachinery.pkg.runtime.RawExtension":
        try:
            return json.loads(value.raw) if value.raw else {}
        except ValueError:
            return base64.b64encode(value.raw).decode()
    if full == f"{META}.FieldsV1":
        return json.loads(value.Raw) if value.Raw else {}
    return to_json(value)


# -- descriptors from the schema ---------------------------------------------------------------------


@cache
def _schema() -> dict[str, list[list[Any]]]:
    data: dict[str, list[list[Any]]] = json.loads(SCHEMA.read_text())
    return data


@cache
def _go_facts() -> dict[str, dict[str, tuple[str, str]]]:
    """message -> proto field name -> (JSON name, flags: p pointer, o omitempty, i inline)."""
    return {msg: {f[1]: (f[4], f[5]) for f in fields if len(f) >= 6} for msg, fields in _schema().items()}


@cache
def _classes() -> dict[str, type[Message]]:
    """One generated class per message of the schema (descriptors built once, in a private pool)."""
    schema = _schema()
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    deps: dict[str, set[str]] = {}
    for full, fields in schema.items():
        package, _, name = full.rpartition(".")
        fd = files.get(package)
        if fd is None:
            fd = files[package] = descriptor_pb2.FileDescriptorProto(
                name=f"{package.replace('.', '/')}/generated.proto", package=package, syntax="proto2")
            deps[package] = set()
        msg = fd.message_type.add(name=name)
        for number, fname, label, typ, *_go in fields:
            f = msg.field.add(name=fname, number=number, json_name=fname)
            if label == "map":
                key, val = typ[4:-1].split(",")
                entry = msg.nested_type.add(name=fname[0].upper() + fname[1:] + "Entry")
                entry.options.map_entry = True
                for n, (ename, etype) in enumerate((("key", key), ("value", val)), start=1):
                    ef = entry.field.add(name=ename, number=n, json_name=ename,
                                         label=FDP.LABEL_OPTIONAL)
                    _set_type(ef, etype, package, deps)
                f.label = FDP.LABEL_REPEATED
                f.type = FDP.TYPE_MESSAGE
                f.type_name = f".{full}.{entry.name}"
                continue
            f.label = FDP.LABEL_REPEATED if label == "repeated" else FDP.LABEL_OPTIONAL
            _set_type(f, typ, package, deps)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(package: str) -> None:
        if package in added:
            return
        added.add(package)
        for dep in sorted(deps[package]):
            add(dep)
        fd = files[package]
        fd.dependency.extend(sorted(f"{d.replace('.', '/')}/generated.proto" for d in deps[package]))
        pool.Add(fd)

    for package in sorted(files):
        add(package)
    return {full: message_factory.GetMessageClass(pool.FindMessageTypeByName(full)) for full in schema}


def _set_type(f: descriptor_pb2.FieldDescriptorProto, typ: str, package: str, deps: dict[str, set[str]]) -> None:
    if typ in SCALARS:
        f.type = SCALARS[typ]
        return
    f.type = FDP.TYPE_MESSAGE
    f.type_name = f".{typ}"
    other = typ.rpartition(".")[0]
    if other != package:
        deps[package].add(other)
