"""Secrets never reach a snapshot, a lock, a report, a plan or the terminal.

Each path plants real secret values on real hosts (venvs, a service process), runs the
commands that read them, then searches every file they wrote, stdout and stderr for each
value: environment values under names that do not look secret (recognised by shape or as
URL credentials), credentials in direct_url.json and pip configuration, secret-bearing
options of the service command, and secrets the service prints in its log.
"""

from __future__ import annotations

import json
import os
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


# -- credentials holding `@`, *_PASS* names, HTTP headers ------------------------------------

AT_PASSWORD = "pa@ssW0rd-9x"  # a password with an `@` in it: the authority ends at the last
DB_PASS = "hunter2-db-pass"  # under SGLANG_DB_PASS: known by its name only
BEARER = "sekritBearer0123"  # no known shape: known by the header that carries it
COOKIE = "c00kieValue42"


@pytest.fixture
def headers_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    wheels = tmp_path / "wheels"
    pkg = make_wheel(wheels, "pkg", "1.0", {"pkg/__init__.py": ""})
    ref, tgt = make_venv(tmp_path / "ref"), make_venv(tmp_path / "tgt")
    pip_install(ref, pkg)
    pip_install(tgt, pkg)
    url = f"https://bob:{AT_PASSWORD}@index.example/simple"
    for python in (ref, tgt):
        (python.parent.parent / "pip.conf").write_text(f"[global]\nindex-url = {url}\n")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", url)
    monkeypatch.setenv("SGLANG_DB_PASS", DB_PASS)
    monkeypatch.setenv("SGLANG_DB_PASSWD", DB_PASS)
    monkeypatch.setenv("MY_APP_SECRET_X", DB_PASS)
    service = tmp_path / "service.py"
    service.write_text(
        "import sys\n"
        f"print('GET /v1/models headers: Authorization: Bearer {BEARER}')\n"
        f"print('upstream set Cookie: session={COOKIE}; Path=/')\n"
        "sys.stdout.flush()\n"
        f"raise PermissionError('401 for Authorization: Bearer {BEARER}')\n"
    )
    inv = tmp_path / "envsync.toml"
    command = json.dumps(["{python}", str(service), "--port", "{port}"])
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["pkg"]\n'
        'env = ["PIP_*", "SGLANG_*", "MY_*"]\n'
        f"[service]\ncommand = {command}\nport = 30498\n"
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    return inv


def test_passwords_with_at_pass_names_and_headers_are_redacted_everywhere(
    capsys: pytest.CaptureFixture[str], headers_host: Path, tmp_path: Path
) -> None:
    from tests.helpers import state_dir

    out = tmp_path / "out"
    out.mkdir()
    inv = str(headers_host)
    texts = []
    for argv in (
        ("snapshot", "tgt", "-o", str(out / "tgt.json")),
        ("lock", "ref", "-o", str(out / "ref.lock")),
        ("diff", "--format", "markdown"),
        ("deploy", "tgt", "--deadline", "20"),
        ("diff",),  # the kept crash, as ground truth
    ):
        code, stdout, stderr = run_cli(capsys, "--inventory", inv, *argv)
        assert code in (0, 1, 5), stderr
        texts += [stdout, stderr]
    snapshot = json.loads((out / "tgt.json").read_text())
    assert snapshot["env"]["SGLANG_DB_PASS"] == "<redacted>"
    assert snapshot["env"]["SGLANG_DB_PASSWD"] == "<redacted>"
    assert "Authorization: <redacted>" in "".join(texts)
    tgt_state = state_dir(Path(snapshot["interpreter"]["executable"]))
    crash = json.loads((tgt_state / "service.json").read_text())["crash"]
    assert "Bearer" not in crash["exception"] or "<redacted>" in crash["exception"]
    secrets = [AT_PASSWORD, "ssW0rd-9x", DB_PASS, BEARER, COOKIE]
    # the host keeps the service's own log (run/): what envsync wrote and kept is searched
    kept = [tgt_state / "service.json", tgt_state / "backups"]
    assert leaked(secrets, [out, *kept, Path.home()], *texts) == []
    add("secrets searched", "credentials with @, *_PASS* names, Authorization/Cookie headers")


# -- requirement includes -----------------------------------------------------------------------


def test_an_include_outside_the_requirements_folder_is_refused_unread(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    foreign = tmp_path / "elsewhere" / "secret.txt"
    foreign.parent.mkdir()
    foreign.write_text("root:$6$SHADOWLINE0123$abcdef:19000:0:99999:7:::\n")
    folder = tmp_path / "reqs"
    folder.mkdir()
    cases = {
        "shadow.txt": "xgrammar==0.1.32\n-r /etc/shadow\n",
        "planted.txt": f"xgrammar==0.1.32\n--requirement {foreign}\n",
        "up.txt": "xgrammar==0.1.32\n-c ../elsewhere/secret.txt\n",
        "nested.txt": "xgrammar==0.1.32\n-r inner.txt\n",
        "inner.txt": f"soundfile==0.13.1\n-r{foreign}\n",
        "itself.txt": "root:$6$SHADOWLINE0123$abcdef:19000:0:99999:7:::\n",
    }
    for name, text in cases.items():
        (folder / name).write_text(text)
    for name in ("shadow.txt", "planted.txt", "up.txt", "nested.txt", "itself.txt"):
        code, out, err = run_cli(capsys, "diff", str(folder / name), str(folder / name))
        assert code == 2, (name, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, lines
        assert "SHADOWLINE" not in err and "SHADOWLINE" not in out
        if name != "itself.txt":
            assert "outside" in lines[0] and "nothing of it was read" in lines[0], lines[0]
        add("hostile input", "requirement includes outside the file's folder refused")


# -- control characters and markup from a host ----------------------------------------------------


def test_escape_sequences_and_markup_from_a_host_never_reach_a_terminal_or_a_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    ref, tgt = make_venv(tmp_path / "ref"), make_venv(tmp_path / "tgt")
    pip_install(ref, make_wheel(wheels, "pkg", "2.0", {"pkg/__init__.py": ""}))
    pip_install(tgt, make_wheel(wheels, "pkg", "1.0", {"pkg/__init__.py": ""}))
    meta = next(site_packages(tgt).glob("pkg-1.0.dist-info")) / "METADATA"
    hostile = "1.0\x1b[8m hidden [/bold] [link=http://x]y\x9b2J\u202e\r tail"
    meta.write_text(meta.read_text().replace("Version: 1.0", f"Version: {hostile}"))
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    outputs = []
    for fmt in ("table", "markdown", "html", "junit"):
        code, out, err = run_cli(capsys, "--inventory", str(inv), "diff", "--format", fmt)
        assert code == 1, err
        outputs += [out, err]
        shown = "\\x1b[8m" if fmt == "table" else "\\x1b[8m hidden [/bold] [link=http://x]y\\x9b2J"
        assert shown in out, (fmt, out)  # the table folds it over lines
    code, out, err = run_cli(capsys, "--inventory", str(inv), "repair", "--only", "all")
    outputs += [out, err]
    for text in outputs:
        assert not any(c in text for c in "\x1b\r\x9b\u202e"), repr(text[:300])
    add("hostile input", "escape sequences and markup in METADATA, shown inert")


# -- links inside a watched package ---------------------------------------------------------------


def test_a_link_in_a_watched_package_is_recorded_as_a_link_never_followed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import hashlib

    secret = tmp_path / "outside" / "shadow"
    secret.parent.mkdir()
    secret.write_text("root:$6$LINKEDSECRET$xyz:19000::::::\n")
    python = make_venv(tmp_path / "venv")
    pip_install(python, make_wheel(tmp_path / "w", "pkg", "1.0", {"pkg/__init__.py": ""}))
    package = site_packages(python) / "pkg"
    (package / "leak.py").symlink_to(secret)
    (package / "shadow.py").symlink_to("/etc/shadow")
    (package / "tree").symlink_to(secret.parent, target_is_directory=True)
    os.mkfifo(package / "pipe.py")  # never opened: it would block the probe
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[defaults]\nwatch = ["pkg"]\n[hosts.h]\npython = "{python}"\n')
    code, out, err = run_cli(capsys, "--inventory", str(inv), "snapshot", "h")
    assert code == 0, err
    files = next(d for d in json.loads(out)["distributions"] if d["name"] == "pkg")["files"]
    assert files["pkg/leak.py"] == f"symlink:{secret}"
    assert files["pkg/shadow.py"] == "symlink:/etc/shadow"
    assert files["pkg/tree"] == f"symlink:{secret.parent}"
    assert files["pkg/pipe.py"] == "skipped: a FIFO"
    assert not [k for k in files if k.startswith("pkg/tree/")]  # never entered
    assert hashlib.sha256(secret.read_bytes()).hexdigest() not in out
    assert "LINKEDSECRET" not in out + err
    add("hostile input", "links and a FIFO in a watched package")
