"""Reference tables of envsync's vocabularies, exit codes and inventory keys, from the code."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from docsgen import text
from envsync.exitcodes import ExitCode
from envsync.model import inventory as inventorymodel
from envsync.model import vocab


class DriftError(Exception):
    """The docs' words and the code they describe no longer cover the same keys."""


def covered(what: str, words: Mapping[str, str], keys: Iterable[str]) -> None:
    """Every key of the code has its words, and no words describe a key the code lost."""
    keys = list(keys)
    lacking = [k for k in keys if k not in words]
    stale = [k for k in words if k not in keys]
    if lacking or stale:
        raise DriftError(
            f"docsgen/text.py {what}: "
            + "; ".join(
                part
                for part in (
                    f"not described: {', '.join(lacking)}" if lacking else "",
                    f"described but gone from the code: {', '.join(stale)}" if stale else "",
                )
                if part
            )
        )


def _cell(value: str) -> str:
    return value.replace("|", "\\|")


def word_table(name: str, heading: str, keys: Iterable[str], words: Mapping[str, str]) -> str:
    keys = list(keys)
    covered(name, words, keys)
    rows = [f"| {heading} | meaning |", "| --- | --- |"]
    rows += [f"| `{k}` | {_cell(words[k])} |" for k in keys]
    return "\n".join(rows) + "\n"


VOCABULARIES = {
    # name: (heading, the code's own order, words)
    "severities": ("severity", vocab.SEVERITIES, text.SEVERITIES),
    "kinds": ("kind", vocab.KINDS, text.KINDS),
    "fixes": ("fix", get_args(vocab.FixKind), text.FIXES),
    "evidence": ("source", get_args(vocab.EvidenceSource), text.EVIDENCE),
    "contexts": ("context", vocab.CONTEXTS, text.CONTEXTS),
}


def vocabulary(name: str) -> str:
    heading, keys, words = VOCABULARIES[name]
    return word_table(name.upper(), heading, keys, words)


def exit_codes() -> str:
    covered("EXIT_CODES", text.EXIT_CODES, [c.name for c in ExitCode])
    rows = ["| code | name | meaning |", "| --- | --- | --- |"]
    rows += [f"| {c.value} | `{c.name}` | {_cell(text.EXIT_CODES[c.name])} |" for c in ExitCode]
    return "\n".join(rows) + "\n"


def _type_word(tp: Any) -> str:
    """The word a user reads for a key's type: string, integer, list or table."""
    args = [a for a in get_args(tp) if a is not type(None)]
    if args and get_origin(tp) in (Union, UnionType):
        return _type_word(args[0])
    origin = get_origin(tp) or tp
    if origin in (str,):
        return "string"
    if origin in (int,):
        return "integer"
    if origin in (tuple, list):
        return "list"
    return "table"  # a mapping, or a table of its own (a host's service)


def inventory_keys() -> str:
    """Every key the inventory parser accepts, with its type, from the parser's own tables."""
    keys = {
        f"{table}.{f.name}": _type_word(get_type_hints(cls)[f.name])
        for table, cls in inventorymodel.TABLES.items()
        for f in fields(cls)
    }
    covered("INVENTORY", text.INVENTORY, keys)
    headings = {
        "defaults": "`[defaults]`",
        "service": "`[service]`, and a host's `service = {...}` table",
        "hosts": "`[hosts.NAME]`",
        "groups": "`[groups.NAME]`",
    }
    out: list[str] = []
    for table, heading in headings.items():
        out += [f"### {heading}", "", "| key | type | meaning |", "| --- | --- | --- |"]
        out += [
            f"| `{key.partition('.')[2]}` | {tp} | {_cell(text.INVENTORY[key])} |"
            for key, tp in keys.items()
            if key.startswith(f"{table}.")
        ]
        out.append("")
    return "\n".join(out)
