"""The map of envsync's modules in CONTRIBUTING.md, made from the tree: every package and
module under envsync/ with the first paragraph of its docstring.

    python -m docsgen.architecture          # write it (commit it with the change)
    python -m docsgen.architecture --check  # exit 1 when it is stale (the tests run this)

The map sits between the markers `<!-- envsync:tree -->` and `<!-- /envsync:tree -->`:
everything else in the file is written by hand.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from docsgen.hooks import ROOT

PACKAGE = ROOT / "envsync"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
BEGIN, END = "<!-- envsync:tree -->", "<!-- /envsync:tree -->"


def summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ")
    return first.replace("|", "\\|")


def rows(folder: Path) -> list[str]:
    """A row per module of `folder`, a package's (or a plain folder's) row above its own."""
    out: list[str] = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.name in ("__pycache__", "__init__.py"):
            continue
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if path.is_dir() and any(path.rglob("*.py")):
            init = path / "__init__.py"
            what = summary(init) if init.is_file() else "(a folder of files run by another tool)"
            out.append(f"| `{rel}/` | {what} |")
            out.extend(rows(path))
        elif path.suffix == ".py":
            out.append(f"| `{rel}` | {summary(path)} |")
    return out


def tree() -> str:
    """The map: a table of every package and module."""
    head = [
        "| module | what it is (its docstring's first paragraph) |",
        "| --- | --- |",
    ]
    return "\n".join([*head, *rows(PACKAGE)])


def written(text: str) -> str:
    """CONTRIBUTING.md's text with the map between its markers made anew."""
    before, sep, rest = text.partition(BEGIN)
    _, sep2, after = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{CONTRIBUTING.name}: no {BEGIN} ... {END} markers")
    return f"{before}{BEGIN}\n{tree()}\n{END}{after}"


def main(argv: list[str]) -> int:
    text = CONTRIBUTING.read_text(encoding="utf-8")
    new = written(text)
    if "--check" in argv:
        if new != text:
            print(f"{CONTRIBUTING.name}: the module map is stale (python -m docsgen.architecture)")
            return 1
        return 0
    if new != text:
        CONTRIBUTING.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
