"""Raw differences between snapshots (deepdiff underneath)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.model.changes import differences
from envsync.model.codec import from_data
from envsync.model.environment import Distribution, Snapshot

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"


def base() -> Snapshot:
    return from_data(Snapshot, json.loads(SNAPSHOT.read_text()))


def with_dists(snap: Snapshot, **versions: str) -> Snapshot:
    return replace(
        snap,
        distributions=tuple(
            Distribution(name=n, display_name=n, version=v) for n, v in versions.items()
        ),
    )


@pytest.mark.parametrize(
    ("ref", "tgt", "expected"),
    [
        # no name in common: deepdiff reports one changed table, envsync splits it
        (
            {"soundfile": "0.13.1"},
            {"pip": "23"},
            [("missing", "soundfile", "0.13.1", None), ("extra", "pip", None, "23")],
        ),
        ({"a": "1", "b": "2"}, {"a": "1", "b": "3"}, [("version", "b", "2", "3")]),
        ({}, {"pip": "23"}, [("extra", "pip", None, "23")]),
        ({"a": "1"}, {"a": "1"}, []),
    ],
)
def test_distribution_differences(
    ref: dict[str, str],
    tgt: dict[str, str],
    expected: list[tuple[str, str, str | None, str | None]],
) -> None:
    got = differences(with_dists(base(), **ref), with_dists(base(), **tgt))
    assert sorted((d.kind, d.subject, d.reference, d.target) for d in got) == sorted(expected)


def test_file_tables_with_no_path_in_common_are_split_too() -> None:
    ref, tgt = base(), base()
    sglang = ref.distribution("sglang")
    assert sglang is not None
    ref = replace(ref, distributions=(replace(sglang, files={"sglang/a.py": "1" * 64}),))
    tgt = replace(tgt, distributions=(replace(sglang, files={"sglang/b.py": "2" * 64}),))
    got = {(d.subject, d.reference is None, d.target is None) for d in differences(ref, tgt)}
    assert got == {("sglang/a.py", False, True), ("sglang/b.py", True, False)}


def test_environment_and_installer_records() -> None:
    ref, tgt = replace(base(), env={}), replace(base(), env={"CUDA_VISIBLE_DEVICES": "1"})
    (diff,) = differences(ref, tgt)
    assert (diff.kind, diff.subject, diff.target) == ("system", "env CUDA_VISIBLE_DEVICES", "1")
    sglang = base().distribution("sglang")
    assert sglang is not None and sglang.files is not None
    files = dict(sglang.files)
    ref = replace(base(), distributions=(replace(sglang, files=files),))
    tgt = replace(
        base(),
        distributions=(
            replace(sglang, files={**files, "sglang-0.5.11.dist-info/direct_url.json": "3" * 64}),
        ),
    )
    assert differences(ref, tgt) == []  # how it was installed is not what it contains


def wheel_install(files: dict[str, str]) -> Distribution:
    return Distribution(
        name="app",
        display_name="app",
        version="1.0",
        location="/venv/site-packages",
        files={
            **files,
            "app-1.0.dist-info/METADATA": "m1",
            "app-1.0.dist-info/WHEEL": "w1",
            "app-1.0.dist-info/INSTALLER": "pip",
            "../../../bin/app": "script",
        },
    )


def source_install(files: dict[str, str], commit: str) -> Distribution:
    from envsync.model.environment import GitState, SourceTree

    return Distribution(
        name="app",
        display_name="app",
        version="1.0",
        location="/venv/site-packages",
        files=files,
        source=SourceTree(
            mode="editable-finder",
            packages={"app": "/src/app/python/app"},
            git=GitState(root="/src/app", commit=commit, branch="main"),
        ),
    )


def test_files_compare_by_their_path_in_the_package_whichever_way_each_host_installed_it() -> None:
    files = {"app/__init__.py": "i", "app/server.py": "s"}
    wheel = replace(base(), distributions=(wheel_install(files),))
    editable = replace(base(), distributions=(source_install(files, "c1"),))
    assert differences(wheel, editable) == []
    patched = replace(
        base(),
        distributions=(source_install({**files, "app/server.py": "S", "app/new.py": "n"}, "c1"),),
    )
    got = [(d.kind, d.subject, d.reference, d.target) for d in differences(wheel, patched)]
    assert got == [("file", "app/new.py", None, "n"), ("file", "app/server.py", "s", "S")]
    assert patched.distributions[0].file_path("app/new.py") == "/src/app/python/app/new.py"
    assert wheel.distributions[0].file_path("app/new.py") == "/venv/site-packages/app/new.py"


def test_two_checkouts_at_different_commits_are_a_commit_difference() -> None:
    files = {"app/__init__.py": "i"}
    a = replace(base(), distributions=(source_install(files, "c1"),))
    b = replace(base(), distributions=(source_install(files, "c2"),))
    got = [(d.kind, d.subject, d.dist, d.reference, d.target) for d in differences(a, b)]
    assert got == [("commit", "app commit", "app", "c1", "c2")]


@pytest.mark.parametrize(
    "path",
    [
        "app/__pycache__/server.cpython-311.pyc",
        "app.egg-info/PKG-INFO",
        "app/sub/app.egg-info/SOURCES.txt",
        "__editable__.app-1.0.pth",
        "__editable___app_1_0_finder.py",
        "app-1.0.dist-info/uv_cache.json",
        "app-1.0.dist-info/INSTALLER",
        "app-1.0.dist-info/direct_url.json",
    ],
)
def test_files_that_are_not_part_of_the_package_are_never_differences(path: str) -> None:
    a = replace(base(), distributions=(wheel_install({"app/x.py": "1"}),))
    extra = wheel_install({"app/x.py": "1", path: "junk"})
    b = replace(base(), distributions=(extra,))
    assert differences(a, b) == []
