"""Which of a host's files define some symbols: the reference's side of a native finding.

A symbol the target's loads miss is looked for in the files the same load has on the
reference, in the order envsync names them (its lookup scope); the first that exports
it is the reference's provider. Files are read through their section tables, never loaded.
"""

from __future__ import annotations

import json
import sys

from .protocol import NATIVE_QUERY_MARKER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .protocol import NativeQueryAnswer, NativeQueryRequest


def providers(files: list[str], symbols: list[str]) -> NativeQueryAnswer:
    """{symbol: the first of `files` whose dynamic symbol table defines it}."""
    from .native.elf import ElfFile, read_elf

    wanted = set(symbols)
    out: dict[str, str] = {}
    for path in files:
        if not wanted:
            break
        elf = read_elf(path)
        if not isinstance(elf, ElfFile) or elf.symbols is None:
            continue
        for name in sorted(wanted & elf.symbols.exports.names):
            out[name] = path
            wanted.discard(name)
    return out


def main(args: list[str], digest: str, cache: str | None) -> int:
    asked: NativeQueryRequest = json.loads(args[0])
    answer = providers([str(f) for f in asked["files"]], [str(s) for s in asked["symbols"]])
    sys.stdout.write("\n" + NATIVE_QUERY_MARKER + json.dumps(answer) + "\n")
    return 0
