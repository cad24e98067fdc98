"""The one "door" finding (classify/startup.py door_finding), as files and packages word it."""

from __future__ import annotations

from envsync.classify.doors import Door
from envsync.classify.packages import door_words
from envsync.classify.startup import door_finding
from envsync.model.findings import Difference, Evidence, SyncFileFix

DOOR = Door(
    module="pkg.plugins",
    file="/site/pkg/plugins.py",
    context="module",
    what="a computed import (`import_module(name)`)",
    line=12,
)


def test_a_file_behind_a_door_is_unknown_naming_the_door() -> None:
    diff = Difference(kind="file", section="files", key="pkg/a.py", reference="1", target="2")
    fix = SyncFileFix(summary="copy pkg/a.py", dist="pkg", path="a.py")
    found = door_finding(
        diff,
        DOOR,
        head="pkg/a.py: startup may import pkg.a",
        behind="pkg.a",
        context=DOOR.context,
        fixes=(fix,),
    )
    assert found.severity == "unknown"
    assert found.decided_by == "import-graph"
    assert found.reason == (
        "pkg/a.py: startup may import pkg.a: envsync stops reading at a computed import "
        "(`import_module(name)`) in pkg.plugins:12, and pkg.a could be behind it."
    )
    assert found.evidence == (
        Evidence(
            source="import-graph",
            detail="envsync stops reading at a computed import (`import_module(name)`) in "
            "pkg.plugins:12",
            file="/site/pkg/plugins.py",
            line=12,
            context="module",
        ),
    )
    assert found.fixes == (fix,)


def test_a_distribution_behind_a_door_says_what_kind_of_door_and_keeps_its_requirements() -> None:
    diff = Difference(kind="version", section="distributions", key="b", reference="1", target="2")
    wanted = Evidence(source="requirements", detail="pkg requires b")
    found = door_finding(
        diff,
        DOOR,
        head="b 1 -> 2: startup may import it",
        behind="b",
        context="module; startup path: main -> pkg.plugins",
        words=door_words(DOOR),
        more=[wanted],
    )
    assert found.reason == (
        "b 1 -> 2: startup may import it: envsync stops reading at a computed import "
        "(`import_module(name)`) in pkg.plugins:12 (the module name is computed at run time), "
        "and b could be behind it."
    )
    assert found.evidence[0].context == "module; startup path: main -> pkg.plugins"
    assert found.evidence[1:] == (wanted,)
    assert found.fixes == ()
