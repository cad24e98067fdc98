"""Reference tables of envsync's vocabularies, exit codes and inventory keys, from the code."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, get_args

from docsgen import text
from envsync import inventory, vocab
from envsync.exitcodes import ExitCode


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
    "fixes": ("fix", vocab.FIX_KINDS, text.FIXES),
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


_TYPES: dict[Any, str] = {str: "string", int: "integer", list: "list", dict: "table"}


def inventory_keys() -> str:
    """Every key the inventory parser accepts, with its type, from the parser's own tables."""
    tables: dict[str, Mapping[str, Any]] = {
        "defaults": inventory._DEFAULTS_KEYS,
        "service": inventory._SERVICE_KEYS,
        "hosts": inventory._HOST_KEYS,
    }
    keys = {f"{t}.{k}": tp for t, spec in tables.items() for k, tp in spec.items()}
    covered("INVENTORY", text.INVENTORY, keys)
    headings = {
        "defaults": "`[defaults]`",
        "service": "`[service]`, and a host's `service = {...}` table",
        "hosts": "`[hosts.NAME]`",
    }
    out: list[str] = []
    for table, heading in headings.items():
        out += [f"### {heading}", "", "| key | type | meaning |", "| --- | --- | --- |"]
        out += [
            f"| `{key.partition('.')[2]}` | {_TYPES[tp]} | {_cell(text.INVENTORY[key])} |"
            for key, tp in keys.items()
            if key.startswith(f"{table}.")
        ]
        out.append("")
    return "\n".join(out)
