"""The docs read well in the repository (issue 34): the pages made only of what the code
says are committed rendered (docs/generated/, current: this test is CI's check), and the
README links to pages a reader sees whole, never to one whose content is markers."""

from __future__ import annotations

import re

from docsgen import rendered
from tests.helpers import REPO

README = (REPO / "README.md").read_text()
COMMENT = re.compile(r"<!--.*?-->", re.S)


def prose(text: str) -> list[str]:
    """What a forge shows of a page: lines outside comments, headings and blank lines."""
    return [
        line
        for line in COMMENT.sub("", text).splitlines()
        if line.strip() and not line.startswith("#")
    ]


def test_the_rendered_pages_are_current() -> None:
    assert rendered.pages(), "no page to render"
    assert rendered.stale() == [], "run `python -m docsgen.rendered` and commit the pages"


def test_the_reference_pages_are_among_them() -> None:
    pages = set(rendered.pages())
    for name in ("cli", "inventory", "findings", "snapshot", "lock", "plan", "exit-codes"):
        assert f"reference/{name}.md" in pages


def test_a_rendered_page_has_no_marker_and_nothing_a_forge_shows_raw() -> None:
    for uri in rendered.pages():
        text = (rendered.OUT / uri).read_text()
        assert "<!-- envsync:" not in text, uri
        assert not re.search(r"^#+ .*\{#", text, re.M), uri  # attr_list ids
        assert not re.search(r"^!!! ", text, re.M), uri  # admonitions
        assert len(prose(text)) > len(prose((rendered.DOCS / uri).read_text())), uri
        for target in re.findall(r"\]\(([^)#\s]+\.md)", text):
            assert (rendered.OUT / uri).parent.joinpath(target).resolve().is_file(), target


def test_the_cli_page_has_every_command() -> None:
    from envsync.cli.parser import build_parser

    text = (rendered.OUT / "reference" / "cli.md").read_text()
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert commands is not None
    for command in commands:
        assert f"\n## envsync {command}\n" in text, command


def test_the_readme_links_to_pages_that_read_well() -> None:
    pages = set(rendered.pages())
    links = re.findall(r"\]\((docs/[^)#\s]+\.md)", README)
    assert links
    for link in links:
        path = REPO / link
        assert path.is_file(), link
        uri = link.removeprefix("docs/")
        assert uri not in pages, f"{link}: link its rendered copy, docs/generated/{uri}"
        markers = len(re.findall(r"<!--\s*envsync:", path.read_text()))
        assert len(prose(path.read_text())) >= 5 * max(1, markers), f"{link}: mostly markers"


def test_contributings_module_map_is_the_tree() -> None:
    from docsgen import architecture

    text = architecture.CONTRIBUTING.read_text()
    assert architecture.written(text) == text, "run `python -m docsgen.architecture` and commit"
    mapped = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `envsync/")}
    modules = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "envsync").rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }
    assert modules <= mapped, sorted(modules - mapped)
