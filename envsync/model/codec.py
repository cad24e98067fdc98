"""The codec between frozen dataclasses and plain data (JSON, TOML): one for every document.

Snapshots, plans, reports, the host's answers, rule packs and the inventory are all read
through `from_data`, which checks every value against the dataclass's annotations and
names the dotted path of the first bad one (`plan.steps[2].requirements: expected a
list, got str`). An `Unavailable` is `{"unavailable": why}`. A union of dataclasses that
each have a `kind` field of a Literal type is a tagged union: `kind` picks the class.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, Union

from envsync.errors import DecodeError
from envsync.model.environment import Unavailable

T = TypeVar("T")

Decoder = Callable[[Any], Any]
_DECODERS: dict[Any, Decoder] = {}
_SCALAR_WORDS = {str: "a string", int: "an integer", bool: "true or false"}


class _Fail(Exception):
    """A decoding failure on its way out; collects the path while it unwinds."""

    def __init__(self, message: str, *segments: str) -> None:
        super().__init__(message)
        self.message = message
        self.segments = list(segments)


def to_data(value: Any) -> Any:
    """Encode a model value as plain JSON-compatible data (dicts, lists, scalars)."""
    if isinstance(value, Unavailable):
        return {"unavailable": value.reason}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        out = dict(value)
        # Fast path for the large {path: sha256} tables: plain strings need no encoding.
        if all(type(v) is str for v in out.values()):
            return out
        return {str(k): to_data(v) for k, v in out.items()}
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    return value


def from_data(cls: type[T], data: Any, path: str = "") -> T:
    """Decode plain data into `cls` (a dataclass), checking types; raise DecodeError.

    `path` names the document's root in the message (`plan` -> `plan.steps[2]...`);
    without one, the class's name does.
    """
    return typing.cast(T, decode(cls, data, path or cls.__name__))


def decode(tp: Any, data: Any, root: str = "") -> Any:
    """Decode plain data into any type the codec knows (a dataclass, a union, a tuple of
    them...). `root` begins the dotted path of a DecodeError; without one the path is the
    dotted key alone (`hosts.a.python: expected a string, got 3`)."""
    try:
        return _decoder(tp)(data)
    except _Fail as e:
        where = "".join(reversed(e.segments))
        if not root:
            where = where.removeprefix(".")
        where = root + where
        raise DecodeError(f"{where}: {e.message}" if where else e.message) from None


def _decoder(tp: Any) -> Decoder:
    """A decoding function for type `tp`, built once (decoding large graphs is hot)."""
    if tp not in _DECODERS:
        _DECODERS[tp] = _build(tp)
    return _DECODERS[tp]


def _scalar(tp: type) -> Decoder:
    word = _SCALAR_WORDS[tp]

    def decode(data: Any) -> Any:
        if type(data) is not tp:
            raise _Fail(f"expected {word}, got {data!r}")
        return data

    return decode


def _decode_float(data: Any) -> float:
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return float(data)
    raise _Fail(f"expected a number, got {data!r}")


def _build(tp: Any) -> Decoder:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _build_union(typing.get_args(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build_dataclass(tp)
    if origin is tuple:
        return _build_tuple(typing.get_args(tp)[0])
    if origin in (Mapping, dict):
        return _build_mapping(typing.get_args(tp)[1])
    if origin is Literal:
        return _build_literal(typing.get_args(tp))
    if tp is Any:
        return lambda data: data
    if tp is float:
        return _decode_float
    if tp in (str, int, bool):
        return _scalar(tp)
    raise TypeError(f"cannot decode type {tp!r}")  # pragma: no cover


def _build_literal(allowed: tuple[Any, ...]) -> Decoder:
    def decode(data: Any) -> Any:
        if data not in allowed or type(data) is not type(allowed[0]):
            shown = ", ".join(repr(a) for a in allowed)
            raise _Fail(f"expected one of {shown}, got {data!r}")
        return data

    return decode


def tag_of(cls: type) -> tuple[str, ...] | None:
    """The values of a dataclass's `kind` field when it is a Literal (a tagged variant)."""
    hint = typing.get_type_hints(cls).get("kind")
    if typing.get_origin(hint) is Literal:
        return tuple(str(a) for a in typing.get_args(hint))
    return None


def _build_union(options: tuple[Any, ...]) -> Decoder:
    nullable = type(None) in options
    unavailable = Unavailable in options
    kinds = [o for o in options if o is not type(None) and o is not Unavailable]
    tagged: dict[str, Any] = {}
    if len(kinds) > 1 and all(isinstance(o, type) and dataclasses.is_dataclass(o) for o in kinds):
        for option in kinds:
            for tag in tag_of(option) or ():
                tagged[tag] = option
        if not all(tag_of(o) for o in kinds):
            tagged = {}
    decoders = [_decoder(o) for o in kinds]
    by_tag = {tag: _decoder(option) for tag, option in tagged.items()}
    tags = ", ".join(repr(t) for t in by_tag)

    def decode(data: Any) -> Any:
        if data is None:
            if nullable:
                return None
            raise _Fail("a value is required")
        if unavailable and type(data) is dict and len(data) == 1 and "unavailable" in data:
            reason = data["unavailable"]
            if type(reason) is not str:
                raise _Fail(f"expected a string, got {reason!r}", ".unavailable")
            return Unavailable(reason=reason)
        if by_tag:
            if type(data) is not dict:
                raise _Fail(f"expected a table, got {type(data).__name__}")
            if "kind" not in data:
                raise _Fail(f"missing key 'kind' (one of {tags})")
            chosen = by_tag.get(data["kind"]) if type(data["kind"]) is str else None
            if chosen is None:
                raise _Fail(f"expected one of {tags}, got {data['kind']!r}", ".kind")
            return chosen(data)
        if len(decoders) == 1:
            return decoders[0](data)
        for decoder in decoders:
            with contextlib.suppress(_Fail):
                return decoder(data)
        raise _Fail(f"unexpected value {data!r}")

    return decode


def _build_dataclass(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    decoders = {f.name: _decoder(hints[f.name]) for f in fields if f.init}
    required = {
        f.name
        for f in fields
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    known = ", ".join(decoders)

    def decode(data: Any) -> Any:
        if type(data) is not dict:
            raise _Fail(f"expected a table, got {type(data).__name__}")
        kwargs = {}
        for key, value in data.items():
            decoder = decoders.get(key)
            if decoder is None:
                raise _Fail(f"unknown key {key!r}; expected one of: {known}")
            try:
                kwargs[key] = decoder(value)
            except _Fail as e:
                e.segments.append(f".{key}")
                raise
        if not required <= kwargs.keys():
            missing = next(f.name for f in fields if f.name in required and f.name not in kwargs)
            raise _Fail(f"missing key {missing!r}")
        return cls(**kwargs)

    return decode


def _build_tuple(item: Any) -> Decoder:
    decoder = _decoder(item)

    def decode(data: Any) -> Any:
        if type(data) is not list:
            raise _Fail(f"expected a list, got {type(data).__name__}")
        if item is str and all(type(v) is str for v in data):
            return tuple(data)
        out = []
        for i, value in enumerate(data):
            try:
                out.append(decoder(value))
            except _Fail as e:
                e.segments.append(f"[{i}]")
                raise
        return tuple(out)

    return decode


def _build_mapping(value_type: Any) -> Decoder:
    decoder = _decoder(value_type)

    def decode(data: Any) -> Any:
        if type(data) is not dict:
            raise _Fail(f"expected a table, got {type(data).__name__}")
        if value_type is str and all(type(v) is str for v in data.values()):
            return dict(data)  # the large {path: sha256} tables
        out = {}
        for key, value in data.items():
            try:
                out[str(key)] = decoder(value)
            except _Fail as e:
                e.segments.append(f".{key}")
                raise
        return out

    return decode
