"""Every `envsync COMMAND --option` the docs show must be a command and option of the parser."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from docsgen.cli import commands, shown

# Code as the docs write it: fenced blocks and inline spans.
_FENCED = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
# A command line that runs envsync: at the start of a line (after a `$ ` prompt), or after
# `$(`, `&&`, `|` or `;`; a path before the name (`.venv/bin/envsync`) is allowed.
_CALL = re.compile(
    r"(?:^\s*(?:\$\s+)?|\$\(|&&\s*|\|\s*|;\s*)(?:[\w./~-]*/)?envsync((?:[ \t]+[^\s|;&<>#)`\"]+)+)"
)


def code(markdown: str) -> Iterator[str]:
    """Each line of code in a Markdown text."""
    for block in _FENCED.finditer(markdown):
        yield from block.group(2).splitlines()
    for span in _SPAN.finditer(_FENCED.sub("", markdown)):
        yield span.group(1)


def _options(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """Each visible option string and whether it takes a value."""
    return {opt: a.nargs != 0 for a in shown(parser) for opt in a.option_strings}


def problems(markdown: str, parser: argparse.ArgumentParser) -> list[str]:
    subs = {c.name: c.parser for c in commands(parser)}
    top = _options(parser)
    out = []
    for line in code(markdown):
        line = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]  # a shell comment is prose
        for call in _CALL.finditer(line):
            words = [w.strip("[]") for w in call.group(1).split()]
            command = None
            skip = False
            for word in words:
                if skip:
                    skip = False
                    continue
                if not word.startswith("-") or word in ("-", "--"):
                    if command is None:
                        if word not in subs:
                            if word.isupper() or word == "COMMAND":  # a placeholder
                                break
                            out.append(f"`envsync {word}`: no such command (in {line.strip()!r})")
                            break
                        command = word
                    continue
                option = word.split("=", 1)[0]
                known = _options(subs[command]) if command else top
                if option not in known:
                    where = f"envsync {command}" if command else "envsync"
                    out.append(f"`{where} {option}`: no such option (in {line.strip()!r})")
                    continue
                skip = known[option] and "=" not in word
    return out
