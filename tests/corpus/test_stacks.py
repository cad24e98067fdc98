"""Replay of public drift failures on whole vLLM stacks (tests/corpus/cases.py STACKS).

For each case: the wheels say what must happen (the statement whose import fails and the
frame that raises, at the file and line the case names); a real start of each entry (the
console script's function, or `-m` through runpy) decides the truth: the target dies of
the case's exception, the reference gets as far as a CPU allows; then envsync's verdict on
the culprit, statically and with --import-check, for each entry.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envsync.cli import main
from tests.corpus import table
from tests.corpus.cases import STACKS, Case, Entry
from tests.corpus.conftest import pip_check
from tests.corpus.stacks import build_all

pytestmark = pytest.mark.slow

# Start the service as its entry would, in this process, up to where a CPU stops it; the
# outcome (the exception, its frames, its causes) as one JSON line.
START = r"""
import json, runpy, sys, traceback
kind, target, *args = sys.argv[1:]
def frames(e):
    return [[f.filename, f.lineno] for f in traceback.extract_tb(e.__traceback__)]
try:
    if kind == "script":
        module, _, function = target.partition(":")
        sys.argv = [module.rpartition(".")[2], *args]
        getattr(__import__(module, fromlist=[function]), function)()
    else:
        sys.argv = [target, *args]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    out = {"stop": "exit 0"}
except SystemExit as e:
    out = {"stop": "exit %s" % (e.code or 0)}
except BaseException as e:
    chain, cause = [], e.__cause__ or e.__context__
    while cause is not None and len(chain) < 5:
        chain.append({"text": "%s: %s" % (type(cause).__name__, cause), "frames": frames(cause)})
        cause = cause.__cause__ or cause.__context__
    out = {"stop": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""),
           "type": type(e).__name__, "frames": frames(e), "chain": chain}
sys.stdout.flush()
print("\n@@" + json.dumps(out))
"""


def start(python: Path, run: tuple[str, ...]) -> dict:
    out = subprocess.run(
        [str(python), "-c", START, *run],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("@@")]
    assert line, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(line[-1][2:])


@pytest.fixture(scope="module")
def stacks(wheel_cache: Path) -> dict[str, Path]:
    return build_all(STACKS, wheel_cache)


def line_of(path: Path, number: int) -> str:
    return path.read_text().splitlines()[number - 1].strip()


def site(root: Path) -> Path:
    return next((root / "lib").glob("python3*/site-packages"))


def diff(pair: Path, entry: Entry, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    inv = pair / f"envsync-{entry.run[0]}.toml"
    # the served model: a Llama (only its module is a model module vLLM imports)
    model = pair / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    command = [str(model) if word == "/models/m" else word for word in entry.command]
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["vllm"]\n'
        f"[service]\ncommand = {json.dumps(command)}\n"
        f'[hosts.ref]\npython = "{pair / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{pair / "tgt" / "bin" / "python"}"\n'
    )
    capsys.readouterr()
    assert main(["--inventory", str(inv), "-q", "diff", "--format", "json", *args]) == 1
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("case", STACKS, ids=lambda c: c.id)
def test_the_wheels_say_what_must_happen(case: Case, stacks: dict[str, Path]) -> None:
    pair = stacks[case.id]
    ref, tgt = site(pair / "ref"), site(pair / "tgt")
    for file, number, text in case.source_facts:
        assert text in line_of(tgt / file, number), (file, number)
    r = case.raising
    assert r is not None
    assert line_of(tgt / r.file, r.line) == r.statement
    assert line_of(tgt / r.raised_in, r.raised_line) == r.raised_statement
    if r.cause_in:
        assert line_of(tgt / r.cause_in, r.cause_line) == r.cause_statement
    b = case.breaking
    if b is not None:
        from tests.corpus.test_replay import binds

        assert binds(ref / b.defined_in, b.name) and not binds(tgt / b.defined_in, b.name)
    # the pair differs in the culprit only
    listed = {p.name for p in ref.iterdir()} ^ {p.name for p in tgt.iterdir()}
    assert {n.partition("-")[0].lower() for n in listed if n.endswith(".dist-info")} <= {
        case.culprit
    }
    flagged = [ln for ln in pip_check(pair / "tgt" / "bin" / "python") if case.culprit in ln]
    assert bool(flagged) == case.pip_check_flags_culprit, flagged


@pytest.mark.parametrize(
    ("case", "entry"),
    [(c, e) for c in STACKS for e in c.entries],
    ids=[f"{c.id}-{e.run[0]}" for c in STACKS for e in c.entries],
)
def test_a_real_start_decides_then_envsync(
    case: Case, entry: Entry, stacks: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pair = stacks[case.id]
    r = case.raising
    assert r is not None
    # the truth: the target dies of the case's exception, raised where the wheels say
    theirs = start(pair / "ref" / "bin" / "python", entry.run)
    ours = start(pair / "tgt" / "bin" / "python", entry.run)
    assert theirs["stop"].startswith(case.cpu_stop), theirs
    assert ours["type"] == r.exception and r.message in ours["stop"], ours
    assert any(f.endswith(r.raised_in) and n == r.raised_line for f, n in ours["frames"]), ours
    assert any(f.endswith(r.file) and n == r.line for f, n in ours["frames"]), ours
    if r.cause:
        (cause,) = [c for c in ours["chain"] if r.cause in c["text"]]
        assert any(f.endswith(r.cause_in) for f, _ in cause["frames"]), cause
    # envsync without the import check: the culprit's verdict read from the code alone
    static = diff(pair, entry, capsys)
    culprit = {f["subject"]: f for f in static["findings"]}[case.culprit]
    assert culprit["severity"] == entry.static, culprit["reason"]
    static_severity = culprit["severity"]
    b = case.breaking
    if b is not None and entry.static == "fatal":
        assert f"({b.file}:{b.line})" in culprit["reason"], culprit["reason"]
        assert f"defines {b.name} ({b.defined_in})" in culprit["reason"], culprit["reason"]
    # then with the import check (the probe's caches warm): fatal, with the exception's
    # text and frame
    probed = diff(pair, entry, capsys, "--import-check")
    culprit = {f["subject"]: f for f in probed["findings"]}[case.culprit]
    assert culprit["severity"] == case.expected, culprit
    evidence = culprit["evidence"][0]
    assert evidence["source"] == "import-check" and r.message in evidence["detail"], evidence
    assert "the same modules import cleanly on the reference" in evidence["context"], evidence
    if entry.static != "fatal":  # the import check decided it
        assert culprit["decided_by"] == "import-check", culprit
        assert r.message in culprit["reason"], culprit["reason"]
        assert "on the reference ref they import cleanly" in culprit["reason"], culprit["reason"]
    others = [f for f in probed["findings"] if f["subject"] != case.culprit]
    assert all(f["severity"] != "fatal" for f in others), others
    table.record(
        case.id if len(case.entries) == 1 else f"{case.id} ({entry.run[0]})",
        report=case.report,
        culprit=case.culprit,
        reference=f"starts, as far as a CPU goes: {theirs['stop']}",
        target=table.outcome(ours["stop"]),
        static=static_severity,
        import_check=culprit["severity"],
        expected=case.expected,
        test=table.current_test(),
    )
