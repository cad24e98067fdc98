"""Raw differences between snapshots (deepdiff underneath)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.diff import differences
from envsync.model import Distribution, Snapshot, from_data

SNAPSHOT = Path(__file__).resolve().parent / "data" / "snapshots" / "ct129.json"


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
