"""The reachability harness: benign is shown, fatal is real, on real SGLang and vLLM startups.

For each engine version (a real venv: the engine's wheel and its requirements as a real
install resolved them, torch's CPU build beside them) and each way it starts (`vllm serve`,
`python -m MODULE`), the startup really runs on this CPU machine as far as it goes, and
every distribution with a module in `sys.modules` or a shared object mapped is recorded.
Then envsync rates a version difference in every distribution of the venv (tests/corpus/
reach.py). The harness fails on a false benign (a distribution that loaded, rated benign)
and on a false fatal (a fatal that the real startup did not die of), and prints its
figures: distributions checked, false benign, false fatal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.cli import main
from envsync.model.findings import Finding
from tests.corpus.reach import Engine, Entry, build, loaded, snapshot, startup_of, verdicts
from tests.corpus.venvs import VENVS
from tests.figures import put
from tests.helpers import REPO, fetch, pip_install

pytestmark = pytest.mark.slow


VLLM_SERVE = Entry(
    kind="script", target="vllm.entrypoints.cli.main:main", args=("serve", "--help"), console="vllm"
)
VLLM_MODULE = Entry(kind="module", target="vllm.entrypoints.openai.api_server", args=("--help",))
SGLANG = Entry(kind="module", target="sglang.launch_server", args=("--help",))

ENGINES = (
    # vLLM 0.10.2: the console script's parent package imports the benchmark subcommands
    # (cli/__init__.py:3), main() imports the rest; its startup stops on CPU at the device
    # check, after every import (research: vllm-startup.md section 6).
    Engine(
        id="vllm-0.10.2",
        requirement="vllm==0.10.2",
        pins="vllm-0.10.2.txt",
        entries=(VLLM_SERVE, VLLM_MODULE),
    ),
    # vLLM 0.8.5.post1: an eager vllm/__init__.py; --help parses and exits 0 on CPU.
    Engine(
        id="vllm-0.8.5.post1",
        requirement="vllm==0.8.5.post1",
        pins="vllm-0.8.5.post1.txt",
        entries=(VLLM_MODULE,),
    ),
    # SGLang 0.5.13 and 0.5.12: sglang/__init__.py runs _apply_hf_patches() at import.
    Engine(
        id="sglang-0.5.13",
        requirement="sglang==0.5.13",
        pins="sglang-0.5.13.txt",
        entries=(SGLANG,),
    ),
    Engine(
        id="sglang-0.5.12",
        requirement="sglang==0.5.12",
        pins="sglang-0.5.12.txt",
        entries=(SGLANG,),
    ),
)

FIGURES: dict[str, int] = {"checked": 0, "false benign": 0, "false fatal": 0, "benign": 0}


@pytest.fixture(scope="module")
def venvs() -> Path:
    VENVS.mkdir(parents=True, exist_ok=True)
    return VENVS


@pytest.mark.parametrize(
    ("engine", "entry"),
    [(e, x) for e in ENGINES for x in e.entries],
    ids=lambda v: v.id if isinstance(v, Engine) else v.kind,
)
def test_what_startup_loads_is_never_benign_and_fatal_is_real(
    engine: Engine, entry: Entry, venvs: Path, tmp_path: Path
) -> None:
    python = build(venvs, engine)
    # the real startup, with the machine's own home (no envsync cache, nothing of HOME)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    run = loaded(python, entry.kind, entry.target, entry.args, tmp_path, env)
    startup, root, main = startup_of(entry.kind, entry.target, entry.command)
    snap = snapshot(python, startup, root, main)
    assert snap.startup is not None
    if entry.kind == "script":  # the console script's module, as it resolved on the host
        startup = replace(startup, entrypoint=snap.startup.resolved[root].partition(":")[0])
    found = verdicts(snap, startup)
    checked = sorted(d for d in run.distributions if d in found)
    false_benign = [d for d in checked if found[d].severity == "benign"]
    fatal = {d: f for d, f in found.items() if f.severity == "fatal"}
    # A fatal must be what really stopped this startup: its exception names the module.
    real = run.exception or ""
    false_fatal = [
        d for d, f in fatal.items() if run.outcome != "exception" or not _same_failure(f, real)
    ]
    benign = sorted(d for d, f in found.items() if f.severity == "benign")
    FIGURES["checked"] += len(checked)
    FIGURES["false benign"] += len(false_benign)
    FIGURES["false fatal"] += len(false_fatal)
    FIGURES["benign"] += len(benign)
    print(
        f"\n{engine.id} `{entry.shown}`: {run.outcome} {real[:120]}; {run.modules} modules, "
        f"{len(run.distributions)} distributions loaded, {len(checked)} checked; envsync "
        f"benign on {len(benign)} of {len(found)} ({', '.join(benign)}); false benign "
        f"{false_benign}; false fatal {false_fatal}"
    )
    assert len(checked) >= 10, run  # the startup got somewhere
    assert [d for d in run.distributions if d not in found] == []  # every one was rated
    assert not false_benign, {d: found[d].reason for d in false_benign}
    assert not false_fatal, {d: fatal[d].reason for d in false_fatal}


@pytest.fixture(scope="module")
def actionfind(venvs: Path, tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    """Case C3: vLLM 0.10.2's venv (the reference) and a copy of it (hard links) with the
    openai that vLLM 0.10.0 pinned, 1.90.0, which lacks `ActionFind` (the target)."""
    ref = build(venvs, ENGINES[0]).parent.parent
    tgt = tmp_path_factory.mktemp("actionfind") / "tgt"
    shutil.copytree(ref, tgt, copy_function=os.link, symlinks=True)
    for script in (tgt / "bin").iterdir():  # its console scripts run its own python
        if script.is_file() and not script.is_symlink() and script.name.startswith("vllm"):
            lines = script.read_text().splitlines(keepends=True)
            script.unlink()  # a new file: the reference's stays as it is
            script.write_text(f"#!{tgt / 'bin' / 'python'}\n" + "".join(lines[1:]))
            script.chmod(0o755)
    pip_install(tgt / "bin" / "python", fetch(wheel_cache, "openai==1.90.0"))
    return tgt


def test_vllm_serve_and_the_module_get_the_same_verdicts(
    actionfind: Path, venvs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`vllm serve` and `python -m vllm.entrypoints.openai.api_server` reach
    vllm/entrypoints/harmony_utils.py:14 through different chains; the same pair gets the
    same culprit, statement and severity on both, and both really die there."""
    ref = venvs / ENGINES[0].id / "bin" / "python"
    tgt = actionfind / "bin" / "python"
    site = tgt.parent.parent / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    harmony = site / "site-packages" / "vllm" / "entrypoints" / "harmony_utils.py"
    assert (
        harmony.read_text()
        .splitlines()[13]
        .startswith("from openai.types.responses.response_function_web_search import (")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    seen: dict[str, dict[str, str]] = {}
    for entry, command in (
        (VLLM_SERVE, ["vllm", "serve", "/m"]),
        (VLLM_MODULE, ["{python}", "-m", VLLM_MODULE.target, "--model", "/m"]),
    ):
        run = loaded(tgt, entry.kind, entry.target, entry.args, tmp_path, env)
        assert run.outcome == "exception" and "'ActionFind'" in (run.exception or ""), run
        inv = tmp_path / f"{entry.kind}.toml"
        inv.write_text(
            f'[defaults]\nreference = "ref"\ntarget = "tgt"\n'
            f"[service]\ncommand = {json.dumps(command)}\n"
            f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
        )
        capsys.readouterr()
        assert main(["--inventory", str(inv), "-q", "diff", "--format", "json"]) == 1
        findings = json.loads(capsys.readouterr().out)["findings"]
        culprit = next(f for f in findings if f["subject"] == "openai")
        assert culprit["severity"] == "fatal", culprit["reason"]
        first = culprit["evidence"][0]
        assert first["file"].endswith("vllm/entrypoints/harmony_utils.py"), first
        assert first["line"] in (14, 15), first
        assert "ActionFind" in culprit["reason"], culprit["reason"]
        seen[entry.kind] = {f["subject"]: f["severity"] for f in findings}
    assert seen["script"] == seen["module"]


def _same_failure(finding: Finding, exception: str) -> bool:
    """Whether a fatal finding is about what a real startup died of: a name the exception
    quotes ("No module named 'orjson'", "cannot import name 'X'") is in its reason."""
    quoted = set(re.findall(r"'([^']+)'", exception))
    words = set(re.findall(r"[A-Za-z_][\w.]*", finding.reason))
    return bool(quoted & words)


def test_the_figures() -> None:
    """The harness's figures, printed and kept with the run's reliability figures."""
    if not FIGURES["checked"]:
        pytest.skip("the harness did not run")
    section = "reachability harness (real startups on CPU)"
    for key in ("checked", "false benign", "false fatal", "benign"):
        put(section, f"distributions {key}" if key in ("checked", "benign") else key, FIGURES[key])
    print(
        f"\nreachability harness: {FIGURES['checked']} distributions checked, "
        f"{FIGURES['false benign']} false benign, {FIGURES['false fatal']} false fatal "
        f"({FIGURES['benign']} differences rated benign)"
    )
    assert FIGURES["false benign"] == 0 and FIGURES["false fatal"] == 0
    assert REPO.exists()
