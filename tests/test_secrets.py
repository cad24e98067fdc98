"""Secrets never reach a snapshot, a lock, a report, a plan or the terminal.

Each path plants real secret values on real hosts (venvs, a service process), runs the
commands that read them, then searches every file they wrote, stdout and stderr for each
value: environment values under names that do not look secret (recognised by shape or as
URL credentials), credentials in direct_url.json and pip configuration, secret-bearing
options of the service command, and secrets the service prints in its log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.figures import add
from tests.helpers import make_venv, make_wheel, pip_install, run_cli, site_packages

HF = "hf_AbCdEfGhIjKlMnOpQrStUvWx"
OPENAI = "sk-proj-0123456789abcdefABCDEF"
GITHUB = "ghp_0123456789abcdefghijABCDEFGHIJ0123"
URL_PASSWORD = "pa55-w0rd-in-a-url"
API_KEY = "Zz9notashape0api0key"  # no known shape: only the option name says it is secret
ADMIN_KEY = "AdminKeyNoShape4242"
LOG_ONLY = "sk-log0123456789abcdefghij"


def leaked(secrets: list[str], roots: list[Path], *texts: str) -> list[str]:
    """Every (secret, where) found in the files under `roots` and in `texts`."""
    found = []
    searched = 0
    for root in roots:
        for path in root.rglob("*") if root.is_dir() else [root]:
            if not path.is_file() or path.suffix in (".pyc", ".whl"):
                continue
            if "site-packages" in path.parts or "bin" in path.parts:
                continue  # the host's own files: where the secrets were planted
            data = path.read_bytes()
            searched += 1
            found += [f"{s} in {path}" for s in secrets if s.encode() in data]
    for i, text in enumerate(texts):
        searched += 1
        found += [f"{s} in output {i}" for s in secrets if s in text]
    add("secrets searched", "values x outputs searched", len(secrets) * searched)
    return found


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two venvs whose environment and metadata hold secrets; the inventory naming them."""
    wheels = tmp_path / "wheels"
    pkg = make_wheel(wheels, "pkg", "1.0", {"pkg/__init__.py": ""})
    pkg2 = make_wheel(wheels, "pkg", "2.0", {"pkg/__init__.py": "X = 2\n"})
    ref, tgt = make_venv(tmp_path / "ref"), make_venv(tmp_path / "tgt")
    pip_install(ref, pkg2)
    pip_install(tgt, pkg)
    for python in (ref, tgt):
        info = next(site_packages(python).glob("pkg-*.dist-info"))
        (info / "direct_url.json").write_text(
            json.dumps(
                {
                    "url": f"https://__token__:{GITHUB}@git.example/pkg.git",
                    "vcs_info": {"vcs": "git", "commit_id": "abc"},
                }
            )
        )
        # pip configuration of the venv: an index URL with credentials
        (python.parent.parent / "pip.conf").write_text(
            f"[global]\nindex-url = https://user:{URL_PASSWORD}@index.example/simple\n"
        )
    monkeypatch.setenv("MY_SETTING", HF)  # a name that does not look secret
    monkeypatch.setenv("MY_OTHER", f"prefix {OPENAI} suffix")
    monkeypatch.setenv("PIP_INDEX_URL", f"https://user:{URL_PASSWORD}@index.example/simple")
    monkeypatch.setenv("HF_TOKEN", HF)
    inv = tmp_path / "envsync.toml"
    command = [
        "{python}",
        str(tmp_path / "service.py"),
        "--port",
        "{port}",
        "--api-key",
        API_KEY,
        f"--admin-api-key={ADMIN_KEY}",
        "--hf-token",
        HF,
    ]
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["pkg"]\n'
        'env = ["MY_*", "PIP_*", "HF_*"]\n'
        f"[service]\ncommand = {json.dumps(command)}\nport = 30499\n"
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    (tmp_path / "service.py").write_text(
        "import sys\n"
        "print(f\"server_args=ServerArgs(model_path='/m', api_key='{sys.argv[sys.argv.index('--api-key') + 1]}', "
        f"admin_api_key='{ADMIN_KEY}', hf_token='{HF}', max_total_tokens=4096)\")\n"
        f"print('Using the index https://user:{URL_PASSWORD}@index.example/simple')\n"
        "sys.stdout.flush()\n"
        f"raise RuntimeError('the hub refused token {LOG_ONLY}')\n"
    )
    return inv


SECRETS = [HF, OPENAI, GITHUB, URL_PASSWORD, API_KEY, ADMIN_KEY, LOG_ONLY]


def test_snapshot_lock_report_and_check_outputs_hold_no_secret(
    capsys: pytest.CaptureFixture[str], hosts: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    inv = str(hosts)
    texts = []
    for argv in (
        ("snapshot", "ref", "tgt", "-o", str(out / "fleet.json")),
        ("snapshot", "tgt", "-o", str(out / "tgt.json")),
        ("lock", "ref", "-o", str(out / "ref.lock")),
        ("diff", "--format", "json", "-o", str(out / "report.json")),
        ("diff", "--format", "markdown"),
        ("diff",),
        (
            "check",
            "--lock",
            str(out / "ref.lock"),
            "tgt",
            "--junit",
            str(out / "junit.xml"),
            "--markdown",
            str(out / "check.md"),
            "--format",
            "json",
            "-o",
            str(out / "check.json"),
        ),
    ):
        code, stdout, stderr = run_cli(capsys, "--inventory", inv, *argv)
        assert code in (0, 1), stderr
        texts += [stdout, stderr]
    snapshot = json.loads((out / "tgt.json").read_text())
    assert snapshot["env"]["MY_SETTING"] == "<redacted>"  # known by its shape
    assert "<redacted>" in json.dumps(snapshot["distributions"])  # direct_url credentials
    report = json.loads((out / "report.json").read_text())
    assert "--api-key" in report["command"] and "<redacted>" in report["command"]
    assert leaked(SECRETS, [out, Path.home()], *texts) == []


def test_plans_and_the_plan_print_hold_no_secret(
    capsys: pytest.CaptureFixture[str], hosts: Path, tmp_path: Path
) -> None:
    plan = tmp_path / "out" / "plan.json"
    plan.parent.mkdir()
    code, stdout, stderr = run_cli(
        capsys, "--inventory", str(hosts), "repair", "--only", "all", "-o", str(plan)
    )
    assert code == 1, stderr
    command = json.loads(plan.read_text())["command"]
    assert command[-5:] == [
        "--api-key",
        "<redacted>",
        "--admin-api-key=<redacted>",
        "--hf-token",
        "<redacted>",
    ]
    assert leaked(SECRETS, [plan.parent], stdout, stderr) == []


def test_deploy_lines_and_the_service_log_hold_no_secret(
    capsys: pytest.CaptureFixture[str], hosts: Path, tmp_path: Path
) -> None:
    code, stdout, stderr = run_cli(
        capsys, "--inventory", str(hosts), "deploy", "tgt", "--deadline", "20"
    )
    assert code == 5, stderr
    assert "CRASHED" in stdout and "RuntimeError: the hub refused token <redacted>" in stdout
    assert "api_key='<redacted>'" in stdout  # the log tail, shown with the secret hidden
    assert "--api-key <redacted>" in stderr  # the "started ..." line
    code, more_out, more_err = run_cli(capsys, "--inventory", str(hosts), "stop", "tgt")
    assert code == 0, more_err
    # the host keeps the service's log (its own file): envsync's outputs are searched
    assert leaked(SECRETS, [tmp_path / "out"], stdout, stderr, more_out, more_err) == []
