"""A flag's default as the installed version of the pack's package has it (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from envsync.classify.rules import for_version, load_packs, parse_pack
from envsync.errors import RulesError

PACK: dict[str, Any] = {
    "pack": {"name": "svc", "package": "My_Svc"},
    "flags": [
        {
            "flag": "--backend",
            "default": "new",
            "values": {"new": {}, "old": {}},
            "defaults": [{"version": "<2.0", "value": "old", "source": "svc/args.py:3"}],
        }
    ],
}


@pytest.mark.parametrize(
    ("version", "default"),
    [("1.9", "old"), ("1.9.post3+cu130", "old"), ("2.0", "new"), ("2.1rc1", "new"), (None, "new")],
)
def test_the_target_version_picks_the_default(version: str | None, default: str) -> None:
    pack = parse_pack(PACK, "svc.toml")
    versions = {"my-svc": version} if version else {}
    (resolved,) = for_version((pack,), versions)
    assert resolved.flags[0].default == default


def test_an_unreadable_version_keeps_the_plain_default() -> None:
    (resolved,) = for_version((parse_pack(PACK, "svc.toml"),), {"my-svc": "not a version"})
    assert resolved.flags[0].default == "new"


def test_the_builtin_sglang_pack_knows_the_outlines_era() -> None:
    """Ground truth, from the wheels' server_args.py: `grammar_backend: Optional[str] =
    "outlines"` in 0.3.6 (line 117) and 0.4.4.post1 (line 125); "xgrammar" in 0.4.4.post2
    (line 129); None resolved to "xgrammar" from 0.4.4.post4 (line 288)."""
    (sglang,) = [p for p in load_packs(()) if p.name == "sglang"]

    def default(version: str) -> str | None:
        (pack,) = for_version((sglang,), {"sglang": version})
        return next(r.default for r in pack.flags if r.flag == "--grammar-backend")

    assert [default(v) for v in ("0.3.6", "0.4.4.post1", "0.4.4.post2", "0.5.11")] == [
        "outlines",
        "outlines",
        "xgrammar",
        "xgrammar",
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"version": "<<2", "value": "old"}, r"defaults\[0\].version '<<2' is not a version range"),
        (
            {"version": "<2", "value": "gone"},
            r"defaults\[0\].value 'gone' is not one of its values",
        ),
        ("old", r"flags\[0\].defaults\[0\]: expected a table, got str"),
    ],
)
def test_bad_versioned_defaults_are_one_clear_error(entry: object, message: str) -> None:
    bad = {**PACK, "flags": [{**PACK["flags"][0], "defaults": [entry]}]}
    with pytest.raises(RulesError, match=message):
        parse_pack(bad, "svc.toml")
