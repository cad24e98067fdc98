"""The pages of the docs that read well in the repository too: each page whose directives
say only what the code says (the parser, schemas, vocabularies, tracked files) rendered to
plain Markdown under docs/generated/, for the README's links and for readers on a forge.

    python -m docsgen.rendered          # write them (commit them with the change)
    python -m docsgen.rendered --check  # exit 1 naming the stale ones (the tests run this)

A page with a directive that depends on a run (an example output, a measured figure) is
not rendered: the site shows it. Links are rewritten to the rendered copy of a page when
there is one, else to the page's source; attribute lists and admonitions, which a forge
shows as text, become plain Markdown.
"""

from __future__ import annotations

import posixpath
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from docsgen.hooks import DIRECTIVE, ROOT, expand

DOCS = ROOT / "docs"
OUT = DOCS / "generated"
# The directives whose expansion is the code's (nothing measured, nothing a run wrote).
PURE = frozenset({"cli", "schema", "vocab", "exit-codes", "inventory-keys", "file"})
_LINK = re.compile(r"(\]\()([^)#\s]+\.md)(#[^)\s]*)?(\))")
_HEADING_ID = re.compile(r"^(#+ .*?)\s*\{#[\w-]+\}\s*$", re.M)
_ADMONITION = re.compile(r'^!!! (\w+)(?: "([^"]*)")?\n((?:    .*\n|\n)*)', re.M)


def pages() -> list[str]:
    """The docs pages (paths under docs/) to render: directives, and only pure ones."""
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        uri = path.relative_to(DOCS).as_posix()
        if uri.startswith(("generated/", "examples/")):
            continue
        names = {m["name"] for m in DIRECTIVE.finditer(path.read_text())}
        if names and names <= PURE:
            found.append(uri)
    return found


def _link(uri: str, target: str, rendered: set[str]) -> str:
    """A page's link from its rendered copy: to that page's rendered copy, else its source."""
    page = posixpath.normpath(posixpath.join(posixpath.dirname(uri), target))
    where = f"generated/{page}" if page in rendered else page
    return posixpath.relpath(where, posixpath.dirname(f"generated/{uri}"))


def _admonition(m: re.Match[str]) -> str:
    title = m[2] or m[1].capitalize()
    body = [line[4:] if line.startswith("    ") else line for line in m[3].splitlines()]
    quoted = [f"> {line}".rstrip() for line in [f"**{title}**", "", *body]]
    while quoted and quoted[-1] == ">":
        quoted.pop()
    return "\n".join(quoted) + "\n\n"


def render(uri: str, rendered: set[str]) -> str:
    """The page `uri` (under docs/) as plain Markdown."""
    source = (DOCS / uri).read_text()
    text = DIRECTIVE.sub(lambda m: expand(m["name"], m["args"].split(), uri), source)
    text = _LINK.sub(lambda m: m[1] + _link(uri, m[2], rendered) + (m[3] or "") + m[4], text)
    text = _HEADING_ID.sub(r"\1", text)
    text = _ADMONITION.sub(_admonition, text)
    head = (
        f"<!-- generated from docs/{uri} by `python -m docsgen.rendered`: do not edit; "
        "the site shows the same page -->\n"
    )
    return head + text.rstrip() + "\n"


def stale() -> list[str]:
    """The rendered copies that differ from what the pages and the code say now."""
    uris = pages()
    wrong = []
    for uri in uris:
        path = OUT / uri
        if not path.is_file() or path.read_text() != render(uri, set(uris)):
            wrong.append(f"docs/generated/{uri}")
    return wrong


def write() -> list[Path]:
    uris = pages()
    written = []
    for uri in uris:
        path = OUT / uri
        path.parent.mkdir(parents=True, exist_ok=True)
        text = render(uri, set(uris))
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


def main(argv: Sequence[str]) -> int:
    if "--check" in argv:
        wrong = stale()
        for path in wrong:
            print(f"{path}: stale; run `python -m docsgen.rendered`", file=sys.stderr)
        return 1 if wrong else 0
    for made in write():
        print(made.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
