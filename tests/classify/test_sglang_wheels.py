"""Classification on real SGLang wheels: three versions whose verdicts differ.

Each case is a pair of real venvs with the same real SGLang wheel: the reference with
xgrammar 0.1.32 and soundfile, the target with xgrammar 0.1.10 and no soundfile (the
story). Expectations are read from the wheels' own files, not written from memory.
"""

from __future__ import annotations

import ast
import json
import re
import zipfile
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import fetch, make_venv, pip_install

pytestmark = pytest.mark.slow

SGLANG_VERSIONS = ("0.5.9", "0.5.11", "0.5.16")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sglang-pairs")
    xg_good = fetch(wheel_cache, "xgrammar==0.1.32")
    xg_old = fetch(wheel_cache, "xgrammar==0.1.10")
    soundfile = fetch(wheel_cache, "soundfile==0.13.1")
    out = {}
    for version in SGLANG_VERSIONS:
        sglang = fetch(wheel_cache, f"sglang=={version}")
        ref = make_venv(root / version / "ref")
        tgt = make_venv(root / version / "tgt")
        pip_install(ref, sglang, xg_good, soundfile)
        pip_install(tgt, sglang, xg_old)
        out[version] = root / version
    return out


def wheel_text(cache: Path, requirement: str, member: str) -> str | None:
    with zipfile.ZipFile(fetch(cache, requirement)) as zf:
        try:
            return zf.read(member).decode()
        except KeyError:
            return None


_RESULTS: dict[tuple[Path, str], dict[str, dict]] = {}


def diff(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pair: Path, flags: str = ""
) -> dict[str, dict]:
    """`envsync diff` of a pair as JSON findings by subject (once per pair and flags)."""
    if (pair, flags) in _RESULTS:
        return _RESULTS[pair, flags]
    inv = tmp_path / "envsync.toml"
    command = ["{python}", "-m", "sglang.launch_server", "--model-path", "/m", *flags.split()]
    inv.write_text(
        f'[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["sglang"]\n'
        f"[service]\ncommand = {json.dumps(command)}\n"
        f'[hosts.ref]\npython = "{pair / "ref/bin/python"}"\n'
        f'[hosts.tgt]\npython = "{pair / "tgt/bin/python"}"\n'
    )
    assert main(["--inventory", str(inv), "-q", "diff", "--format", "json"]) == 1
    _RESULTS[pair, flags] = {
        f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]
    }
    return _RESULTS[pair, flags]


def module_level_soundfile_import(cache: Path, version: str) -> tuple[str, int] | None:
    """(file, line) of the first module-level `import soundfile` in the wheel, if any."""
    with zipfile.ZipFile(fetch(cache, f"sglang=={version}")) as zf:
        for member in sorted(zf.namelist()):
            if not member.endswith(".py") or "/srt/entrypoints/" not in member:
                continue
            for node in ast.parse(zf.read(member)).body:
                if isinstance(node, ast.Import) and any(a.name == "soundfile" for a in node.names):
                    return member, node.lineno
    return None


def xgrammar_names_missing(cache: Path, version: str) -> set[str]:
    """Names sglang's xgrammar_backend imports from xgrammar that xgrammar 0.1.10 lacks."""
    source = wheel_text(cache, f"sglang=={version}", "sglang/srt/constrained/xgrammar_backend.py")
    assert source is not None
    wanted = {
        a.name
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom) and node.module == "xgrammar"
        for a in node.names
    }
    init = wheel_text(cache, "xgrammar==0.1.10", "xgrammar/__init__.py")
    assert init is not None
    have = {
        a.asname or a.name
        for node in ast.parse(init).body
        if isinstance(node, ast.ImportFrom)
        for a in node.names
    }
    return wanted - have


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_soundfile_is_classified_where_that_version_imports_it(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    pairs: dict[str, Path],
    wheel_cache: Path,
    version: str,
) -> None:
    finding = diff(capsys, tmp_path, pairs[version])["soundfile"]
    top = module_level_soundfile_import(wheel_cache, version)
    if top is None:  # 0.5.9: only lazy imports, inside functions
        assert finding["severity"] == "degraded"
        assert all(
            e["context"].startswith("function")
            for e in finding["evidence"]
            if e["source"] == "import-graph"
        )
    else:  # 0.5.11+: at module level, through the transcription routes of the HTTP server
        member, line = top
        assert finding["severity"] == "fatal"
        first = finding["evidence"][0]
        assert first["file"].endswith(member)
        assert first["line"] == line
        assert "sglang.srt.entrypoints.http_server" in first["context"]


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_old_xgrammar_is_fatal_under_the_default_launch_command(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    pairs: dict[str, Path],
    wheel_cache: Path,
    version: str,
) -> None:
    finding = diff(capsys, tmp_path, pairs[version])["xgrammar"]
    assert finding["severity"] == "fatal"
    assert finding["decided_by"] == "name-check"
    missing = xgrammar_names_missing(wheel_cache, version)
    reported = {
        m.group(1)
        for e in finding["evidence"]
        if (m := re.search(r"cannot import name '(\w+)' from 'xgrammar'", e["detail"]))
        and e["file"].endswith("xgrammar_backend.py")
    }
    assert reported == missing and missing  # StructuralTagItem (0.5.9), + StructuralTag (0.5.11+)
    assert finding["fixes"][0] == {
        "kind": "pin",
        "summary": finding["fixes"][0]["summary"],
        "requirement": "xgrammar==0.1.32",
        "dist": "xgrammar",
        "path": None,
        "flag": None,
        "value": None,
        "gives_up": None,
        "used_when": [],
    }


@pytest.mark.parametrize(
    ("version", "flag_helps"), [("0.5.9", True), ("0.5.11", True), ("0.5.16", False)]
)
def test_grammar_backend_none_is_offered_only_where_it_avoids_every_failing_import(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    pairs: dict[str, Path],
    wheel_cache: Path,
    version: str,
    flag_helps: bool,
) -> None:
    finding = diff(capsys, tmp_path, pairs[version])["xgrammar"]
    flags = [(f["flag"], f["value"]) for f in finding["fixes"] if f["kind"] == "flag"]
    # llguidance and outlines are not installed on the target: only `none` can work
    assert flags == ([("--grammar-backend", "none")] if flag_helps else [])
    if not flag_helps:
        # 0.5.16 imports StructuralTag at module level from its tool-call parsers
        detector = wheel_text(
            wheel_cache, f"sglang=={version}", "sglang/srt/function_call/inkling_detector.py"
        )
        assert detector is not None and "from xgrammar import StructuralTag" in detector
        assert any("inkling_detector" in (e["file"] or "") for e in finding["evidence"])


def test_not_fatal_when_the_command_already_says_grammar_backend_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pairs: dict[str, Path]
) -> None:
    got = diff(capsys, tmp_path, pairs["0.5.11"], "--grammar-backend none")
    assert got["xgrammar"]["severity"] != "fatal"
    assert got["soundfile"]["severity"] == "fatal"  # no flag avoids the HTTP server's imports
