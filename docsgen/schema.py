"""Schema tables read from the frozen dataclasses that envsync encodes (model.to_data)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import io
import json
import textwrap
import tokenize
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from docsgen import text
from envsync.model.environment import Unavailable

# Classes whose tables were rendered in this build: every FIELDS entry must name one of them.
RENDERED: set[str] = set()


def resolve(dotted: str) -> Any:
    """`envsync.model.environment:Snapshot` -> the object."""
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


def field_notes(cls: type) -> dict[str, str]:
    """Each field's comment in the source of the class that declares it (a base's too:
    the model's native reasons are the host side's classes): the comment on its line, or
    the comment lines right above it (the code's own words, never retyped)."""
    notes: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if base is not cls and not _is_dataclass(base):
            continue
        notes.update({k: v for k, v in _own_notes(base).items() if v or k not in notes})
    return notes


def _own_notes(cls: type) -> dict[str, str]:
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    notes: dict[str, str] = {}
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line in comments and lines[line - 1].lstrip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        trailing = comments.get(node.end_lineno or node.lineno)
        notes[node.target.id] = " ".join([*above, *([trailing] if trailing else [])])
    return notes


def _is_dataclass(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def type_text(tp: Any) -> str:
    """A type as the JSON it is encoded to, nested dataclasses linked to their tables."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(type_text(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if tp is Unavailable:
        return '`{"unavailable": reason}`'
    if _is_dataclass(tp):
        return f"[{tp.__name__}](#{tp.__name__.lower()})"
    if origin is tuple:
        return f"list of {type_text(typing.get_args(tp)[0])}"
    if origin in (Mapping, dict):
        return f"table of {type_text(typing.get_args(tp)[1])}"
    if origin is Literal:
        return " \\| ".join(f'`"{a}"`' for a in typing.get_args(tp))
    names = {str: "string", int: "integer", float: "number", bool: "boolean", Any: "any"}
    return names.get(tp, str(tp))


def skipped(cls: type, name: str, skip: frozenset[str]) -> bool:
    """A field left out of a table: `name` for every class, `Class.name` for one."""
    return name in skip or f"{cls.__name__}.{name}" in skip


def nested(cls: type, skip: frozenset[str] = frozenset()) -> list[type]:
    """`cls` and every dataclass reachable from its fields, in first-seen order."""
    seen: list[type] = []

    def visit(tp: Any) -> None:
        if _is_dataclass(tp):
            if tp in seen or tp is Unavailable:
                return
            seen.append(tp)
            hints = typing.get_type_hints(tp)
            for f in dataclasses.fields(tp):
                if not skipped(tp, f.name, skip):
                    visit(hints[f.name])
            return
        for arg in typing.get_args(tp):
            visit(arg)

    visit(cls)
    return seen


def _default(f: dataclasses.Field[Any]) -> str:
    """The default as its JSON: `null`, `false`, `[]`, `"strict"`; else required."""
    if f.default is not dataclasses.MISSING:
        value: Any = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, Mapping):
        value = dict(value)
    return f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def table(cls: type, skip: frozenset[str] = frozenset(), level: int = 3) -> list[str]:
    """One dataclass: its docstring, then key, type, default and the code's comment."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    stale = [k for k in text.FIELDS if k.startswith(f"{cls.__name__}.")]
    stale = [k for k in stale if k.partition(".")[2] not in names]
    if stale:
        raise ValueError(f"docsgen/text.py FIELDS: gone from {cls.__name__}: {', '.join(stale)}")
    RENDERED.add(cls.__name__)
    # The code's comment first; the docs' words only where the code has none.
    notes = {
        **{
            k.partition(".")[2]: v
            for k, v in text.FIELDS.items()
            if k.startswith(f"{cls.__name__}.")
        },
        **{k: v for k, v in field_notes(cls).items() if v},
    }
    out = [f"{'#' * level} {cls.__name__}", ""]
    doc = inspect.getdoc(cls)
    if doc and not doc.startswith(f"{cls.__name__}("):  # not dataclass's own signature
        out += [" ".join(doc.split()), ""]
    out += ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        if skipped(cls, f.name, skip):
            continue
        out.append(
            f"| `{f.name}` | {type_text(hints[f.name])} | {_default(f)} "
            f"| {_cell(notes.get(f.name, ''))} |"
        )
    return [*out, ""]


def unrendered() -> list[str]:
    """FIELDS entries of classes no page rendered (a class renamed or removed)."""
    return sorted(k for k in text.FIELDS if k.partition(".")[0] not in RENDERED)


def schema_markdown(dotted: str, skip: frozenset[str] = frozenset(), level: int = 3) -> str:
    """The tables of a dataclass and of every dataclass nested in it."""
    return "\n".join(
        line for cls in nested(resolve(dotted), skip) for line in table(cls, skip, level)
    )
