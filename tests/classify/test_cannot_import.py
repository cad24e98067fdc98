"""What Python cannot import is fatal, and `degraded` only with proof (issue 45, items 1-2).

One reference and one target venv, real wheels installed by pip; the target's copy of the
service package lacks a module the reference has (copied over without it), has one that is
a FIFO, one with a null byte and one nested deeper than the compiler takes. Each case
writes the service's entrypoint (the same on both hosts unless said) to import one of them,
asks envsync, and holds the verdict to what a real import of the entrypoint does on each
host: the exception Python raises on the target, and a clean import on the reference.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from envsync.cli import main
from tests.corpus import table
from tests.figures import add
from tests.helpers import make_venv, make_wheel, pip_install, site_packages

SECTION = "startup truth (issue 45, cases held)"
REPORT = "issue 45, item {}: a hostile target"
MERGED = "def load(path):\n    text = open(path).read()\n    return text\n"
REGISTRY = "REG = {}\ndef register(n):\n    if n in REG:\n        raise ValueError('registered twice: ' + n)\n    REG[n] = 1\n"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cannot-import")
    files = {
        "svc/__init__.py": "",
        "svc/main.py": "",
        "svc/helper.py": "X = 1\n",
        "svc/fifo.py": "F = 1\n",
        "svc/nul.py": "N = 1\n",
        "svc/deep.py": "D = 1\n",
        "svc/merged.py": MERGED,
        "svc/nested.py": "E = 1\n",
    }
    svc = make_wheel(root / "w", "svc", "1.0", files)
    lib1 = make_wheel(root / "w1", "lib", "1.0", {"lib/__init__.py": "gone = 1\n" + REGISTRY})
    # 1.1: a name registered twice while it is imported (and `gone` removed)
    lib2 = make_wheel(
        root / "w2", "lib", "1.1", {"lib/__init__.py": REGISTRY + "register('a')\nregister('a')\n"}
    )
    ref, tgt = make_venv(root / "ref"), make_venv(root / "tgt")
    pip_install(ref, svc, lib1)
    pip_install(tgt, svc, lib2)
    (site_packages(ref) / "svc" / "newmod.py").write_text("Y = 2\n")  # a new module...
    sp = site_packages(tgt)  # ...that never made it over
    (sp / "svc" / "fifo.py").unlink()
    os.mkfifo(sp / "svc" / "fifo.py")
    (sp / "svc" / "nul.py").write_bytes(b"N = 1\x00\n")
    (sp / "svc" / "deep.py").write_text("D = " + "(" * 300 + "1" + ")" * 300 + "\n")
    # a merge that left a function's last lines at module level: the parser takes it,
    # the compiler does not
    (sp / "svc" / "merged.py").write_text(MERGED.replace("    return", "return"))
    # generated code nested deeper than the compiler's blocks (21 loops)
    loops = "".join("    " * i + f"for i{i} in ():\n" for i in range(21))
    (sp / "svc" / "nested.py").write_text(loops + "    " * 21 + "pass\n")
    (root / "envsync.toml").write_text(
        f"""
[defaults]
reference = "ref"
target = "tgt"
watch = ["svc"]

[service]
command = ["{{python}}", "-m", "svc.main"]

[hosts.ref]
python = "{ref}"

[hosts.tgt]
python = "{tgt}"
"""
    )
    return root


def _entrypoint(bed: Path, text: str, target: str | None = None) -> None:
    for host, body in (("ref", text), ("tgt", target if target is not None else text)):
        (site_packages(bed / host / "bin" / "python") / "svc" / "main.py").write_text(body)


def _real(bed: Path, host: str) -> str:
    """What a real import of the entrypoint raises on `host` ("" when it imports)."""
    done = subprocess.run(
        [str(bed / host / "bin" / "python"), "-c", "import svc.main"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def _finding(
    capsys: pytest.CaptureFixture[str], bed: Path, subject: str, *more: str
) -> dict[str, object]:
    main(["--inventory", str(bed / "envsync.toml"), "-q", "diff", "--format", "json", *more])
    found = {f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    return found[subject]


def _record(
    case: str,
    culprit: str,
    ref: str,
    tgt: str,
    static: dict[str, object],
    checked: dict[str, object] | None,
    expected: str,
    item: int = 1,
) -> None:
    """The case's row of the corpus table, from the real imports and verdicts seen."""
    table.record(
        case,
        report=REPORT.format(item),
        culprit=culprit,
        reference=table.outcome(ref or None),
        target=table.outcome(tgt or None),
        static=str(static["severity"]),
        import_check=None if checked is None else str(checked["severity"]),
        expected=expected,
        test=table.current_test(),
    )


def _evidence(finding: dict[str, object]) -> list[dict[str, object]]:
    found = finding["evidence"]
    assert isinstance(found, list)
    return found


@pytest.mark.parametrize(
    ("module", "subject", "raised", "reason"),
    [
        # the product's story one step later: the importer made it over, its new module not
        (
            "newmod",
            "svc/newmod.py",
            "ModuleNotFoundError: No module named 'svc.newmod'",
            "the target has no svc.newmod",
        ),
        # a FIFO where the module was: Python's finder takes only regular files
        (
            "fifo",
            "svc/fifo.py",
            "ModuleNotFoundError: No module named 'svc.fifo'",
            "the target has no svc.fifo",
        ),
        (
            "nul",
            "svc/nul.py",
            "SyntaxError: source code string cannot contain null bytes",
            "importing it raises SyntaxError: source code string cannot contain null bytes",
        ),
        (
            "deep",
            "svc/deep.py",
            "SyntaxError: too many nested parentheses",
            "importing it raises SyntaxError: too many nested parentheses (line 1)",
        ),
        # what the compiler refuses after the parser took it (graph/compilable.py)
        (
            "merged",
            "svc/merged.py",
            "SyntaxError: 'return' outside function",
            "importing it raises SyntaxError: 'return' outside function (line 3)",
        ),
        (
            "nested",
            "svc/nested.py",
            "SyntaxError: too many statically nested blocks",
            "importing it raises SyntaxError: too many statically nested blocks (line 21)",
        ),
    ],
)
def test_a_module_python_cannot_import_at_module_level_is_fatal(
    capsys: pytest.CaptureFixture[str],
    bed: Path,
    module: str,
    subject: str,
    raised: str,
    reason: str,
) -> None:
    _entrypoint(bed, f"import svc.helper\nimport svc.{module}\n")
    ref, tgt = _real(bed, "ref"), _real(bed, "tgt")
    assert ref == ""
    assert tgt.startswith(raised)  # the ground truth
    finding = _finding(capsys, bed, subject)
    assert finding["severity"] == "fatal", finding
    _record(f"cannot-import-{module}", subject, ref, tgt, finding, None, "fatal")
    assert reason in str(finding["reason"]), finding["reason"]
    evidence = next(e for e in _evidence(finding) if e.get("line"))
    assert (evidence["line"], evidence["statement"]) == (2, f"import svc.{module}")
    assert str(evidence["file"]).endswith("svc/main.py")
    add(SECTION, "1 what Python cannot import at module level: fatal")


@pytest.mark.parametrize("module", ["newmod", "fifo"])
def test_the_same_import_guarded_is_degraded(
    capsys: pytest.CaptureFixture[str], bed: Path, module: str
) -> None:
    """The negative control: startup goes on (a real import says so), and the verdict says
    a feature is lost, never `benign` ("no import path reaches it")."""
    _entrypoint(bed, f"try:\n    import svc.{module}\nexcept ImportError:\n    pass\n")
    ref, tgt = _real(bed, "ref"), _real(bed, "tgt")
    assert ref == tgt == ""
    finding = _finding(capsys, bed, f"svc/{module}.py")
    assert finding["severity"] == "degraded", finding
    _record(
        f"cannot-import-{module}-guarded", f"svc/{module}.py", ref, tgt, finding, None, "degraded"
    )
    add(SECTION, "1 the same import guarded: degraded, startup goes on")


def test_a_patched_importer_of_a_module_no_host_has_is_fatal(
    capsys: pytest.CaptureFixture[str], bed: Path
) -> None:
    _entrypoint(bed, "import svc.helper\n", target="import svc.helper\nimport svc.never\n")
    ref, tgt = _real(bed, "ref"), _real(bed, "tgt")
    assert ref == ""
    assert tgt == "ModuleNotFoundError: No module named 'svc.never'"
    finding = _finding(capsys, bed, "svc/main.py")
    assert finding["severity"] == "fatal" and "the target has no svc.never" in str(
        finding["reason"]
    )
    _record("cannot-import-patched-importer", "svc/main.py", ref, tgt, finding, None, "fatal")
    add(SECTION, "1 a patched importer of a module no host has: fatal")


def test_degraded_needs_proof_beside_a_module_level_import_of_the_changed_version(
    capsys: pytest.CaptureFixture[str], bed: Path
) -> None:
    """lib 1.1 raises while it is imported; startup imports it at module level. A guarded
    import of lib that fails elsewhere is no proof that startup works: `risky`, and fatal
    where the import check runs it."""
    other = "try:\n    from lib import gone\nexcept ImportError:\n    gone = None\n"
    for host in ("ref", "tgt"):
        (site_packages(bed / host / "bin" / "python") / "svc" / "other.py").write_text(other)
    _entrypoint(bed, "import lib\nimport svc.other\n")
    ref, tgt = _real(bed, "ref"), _real(bed, "tgt")
    assert ref == ""
    assert tgt == "ValueError: registered twice: a"
    static = _finding(capsys, bed, "lib")
    assert static["severity"] == "risky", static
    why = "startup imports lib, and the version it runs there differs (at module level, "
    assert why + "unguarded: svc.main, svc/main.py:1)" in str(static["reason"])
    checked = _finding(capsys, bed, "lib", "--import-check")
    assert checked["severity"] == "fatal", checked
    _record("degraded-needs-proof-lib", "lib", ref, tgt, static, checked, "fatal", item=2)
    add(SECTION, "2 degraded beside a module-level import of the changed version: risky", 2)


def test_degraded_needs_proof_for_a_file_startup_imports_at_module_level(
    capsys: pytest.CaptureFixture[str], bed: Path
) -> None:
    """The same rule for a differing file: its guarded import that fails is no proof when
    startup imports the file's own module at module level (the target's copy runs)."""
    patched = "try:\n    import svc.never\nexcept ImportError:\n    pass\n"
    for host, text in (("ref", "P = 1\n"), ("tgt", patched)):
        (site_packages(bed / host / "bin" / "python") / "svc" / "other.py").write_text(text)
    _entrypoint(bed, "import svc.other\n")
    assert _real(bed, "ref") == _real(bed, "tgt") == ""
    finding = _finding(capsys, bed, "svc/other.py")
    assert finding["severity"] == "risky", finding
    assert "unguarded: svc.main, svc/main.py:1" in str(finding["reason"])
    # the negative control: nothing at startup imports it, and nothing is claimed of it
    _entrypoint(bed, "import svc.helper\n")
    assert _finding(capsys, bed, "svc/other.py")["severity"] == "benign"
    add(SECTION, "2 degraded needs proof: a differing file", 2)
