"""The CLI end to end on small real venvs: outputs, exit codes, and every kind of bad input."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import make_venv, make_wheel, pip_install, site_packages
from tests.helpers import run_cli as run


@pytest.fixture(scope="module")
def small_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    python = make_venv(root / "venv")
    pip_install(
        python,
        make_wheel(root / "w", "alpha", "1.0", {"alpha/__init__.py": "A = 1\n"}),
        make_wheel(root / "w", "beta", "2.0+local", {"beta.py": "B = 2\n"}),
    )
    return python


@pytest.fixture
def inventory(tmp_path: Path, small_venv: Path) -> Path:
    path = tmp_path / "envsync.toml"
    path.write_text(
        f'[defaults]\nreference = "ref"\nwatch = ["alpha"]\n\n[hosts.ref]\npython = "{small_venv}"\n'
    )
    return path


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_snapshot_of_an_inventory_host(capsys: pytest.CaptureFixture[str], inventory: Path) -> None:
    code, out, err = run(capsys, "--inventory", str(inventory), "snapshot", "ref")
    assert code == 0
    data = json.loads(out)
    assert data["host"] == "ref"
    assert {d["name"]: d["version"] for d in data["distributions"]} == {
        "alpha": "1.0",
        "beta": "2.0+local",
    }
    assert "ref: 2 distributions, 1 watched" in err


def test_inventory_from_environment_and_options_after_the_command(
    capsys: pytest.CaptureFixture[str], inventory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVSYNC_INVENTORY", str(inventory))
    code, out, err = run(capsys, "snapshot", "ref", "-q")
    assert code == 0 and json.loads(out)["host"] == "ref" and err == ""


def test_snapshot_of_several_hosts(
    capsys: pytest.CaptureFixture[str], inventory: Path, tmp_path: Path
) -> None:
    out_file = tmp_path / "fleet.json"
    argv = ["--inventory", str(inventory), "snapshot", "ref", "local", "ref", "-o", str(out_file)]
    code, _, _ = run(capsys, *argv)
    assert code == 0
    doc = json.loads(out_file.read_text())
    assert doc["schema_version"] == 1
    # each host once, in the order first named
    assert [s["host"] for s in doc["snapshots"]] == ["ref", "local"]


def test_lock_defaults_to_the_reference_and_is_byte_identical(
    capsys: pytest.CaptureFixture[str], inventory: Path, tmp_path: Path
) -> None:
    code, first, _ = run(capsys, "--inventory", str(inventory), "lock")
    assert code == 0
    code, second, _ = run(capsys, "--inventory", str(inventory), "lock", "ref")
    assert code == 0 and first == second
    assert 'name = "beta"\nversion = "2.0+local"' in first
    lock = tmp_path / "env.lock"
    lock.write_text(first)
    # a lock stands wherever a host does: it re-emits its facts as a JSON snapshot
    code, out, _ = run(capsys, "snapshot", str(lock))
    assert code == 0
    again = json.loads(out)
    assert again["source"] == "lock" and again["host"] == "ref"
    # and a snapshot file stands there too, and locks to the same bytes
    snap = tmp_path / "ref.json"
    snap.write_text(out)
    code, relocked, _ = run(capsys, "lock", str(snap))
    assert code == 0 and relocked == first


def test_pinned_requirements_file_is_a_partial_reference(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("# pinned\nxgrammar==0.1.32\nSoundFile==0.13.1 ; python_version >= '3.8'\n")
    code, out, _ = run(capsys, "snapshot", str(req))
    assert code == 0
    data = json.loads(out)
    assert data["partial"] is True and data["source"] == "requirements"
    assert {d["name"]: d["version"] for d in data["distributions"]} == {
        "soundfile": "0.13.1",
        "xgrammar": "0.1.32",
    }


def test_lock_without_host_or_reference_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "lock")
    assert (code, out) == (2, "")
    assert "no HOST given and the inventory names no defaults.reference" in err


@pytest.mark.parametrize(
    ("setup", "argv", "code", "message"),
    [
        # inventory
        (
            lambda d: None,
            ["--inventory", "{d}/missing.toml", "snapshot", "local"],
            2,
            "missing.toml: inventory file not found",
        ),
        (
            lambda d: (d / "inv.toml").write_text("[hosts.x\n"),
            ["--inventory", "{d}/inv.toml", "snapshot", "x"],
            2,
            "inv.toml: invalid TOML: .* \\(at line 1, column 9\\)",
        ),
        (
            lambda d: (d / "inv.toml").write_text("[hosts.x]\nssh='h'\n"),
            ["--inventory", "{d}/inv.toml", "snapshot", "x"],
            2,
            "has no 'python'",
        ),
        (lambda d: None, ["snapshot", "ct300"], 2, "unknown host 'ct300'"),
        # python of the host
        (
            lambda d: (d / "inv.toml").write_text("[hosts.x]\npython='{d}/nope/python'\n"),
            ["--inventory", "{d}/inv.toml", "snapshot", "x"],
            3,
            "x: python '.*/nope/python' not found",
        ),
        (
            lambda d: (d / "inv.toml").write_text("[hosts.x]\npython='/bin/echo'\n"),
            ["--inventory", "{d}/inv.toml", "snapshot", "x"],
            3,
            "x: probe output is not JSON",
        ),
        (
            lambda d: (
                (d / "inv.toml").write_text("[hosts.x]\npython='{d}/crash'\n")
                and script(
                    d / "crash",
                    "echo 'Traceback (most recent call last):' >&2; echo 'MemoryError: boom' >&2; exit 1\n",
                )
            ),
            ["--inventory", "{d}/inv.toml", "snapshot", "x"],
            3,
            "x: probe failed with exit code 1: .*MemoryError: boom",
        ),
        (
            lambda d: (
                (d / "inv.toml").write_text("[hosts.x]\npython='{d}/hang'\n")
                and script(d / "hang", "sleep 30\n")
            ),
            ["--inventory", "{d}/inv.toml", "snapshot", "x", "--timeout", "0.5"],
            3,
            "did not finish within 0.5s",
        ),
        (
            lambda d: (
                (d / "inv.toml").write_text("[hosts.x]\npython='{d}/notjson'\n")
                and script(d / "notjson", "cat >/dev/null; echo '{\"schema_version\": 1}'\n")
            ),
            ["--inventory", "{d}/inv.toml", "snapshot", "x"],
            3,
            "probe output is not an envsync snapshot: .*missing key",
        ),
        # files standing for hosts
        (lambda d: None, ["snapshot", "{d}/absent.lock"], 2, "absent.lock: lock file not found"),
        (
            lambda d: (d / "c.lock").write_text("lock-version = [\n"),
            ["snapshot", "{d}/c.lock"],
            2,
            "corrupt lock file",
        ),
        (
            lambda d: (d / "n.lock").write_text('lock-version = "7.1"\n'),
            ["snapshot", "{d}/n.lock"],
            2,
            "lock-version 7.1 is not supported",
        ),
        (
            lambda d: (d / "s.json").write_text("{not json"),
            ["snapshot", "{d}/s.json"],
            2,
            "s.json: not valid JSON",
        ),
        (
            lambda d: (d / "s.json").write_text('{"schema_version": 99}'),
            ["snapshot", "{d}/s.json"],
            2,
            "schema_version 99 is not supported",
        ),
        (
            lambda d: (d / "s.json").write_text("[1, 2]"),
            ["snapshot", "{d}/s.json"],
            2,
            "not an envsync snapshot",
        ),
        (
            lambda d: (d / "r.txt").write_text("xgrammar>=0.1\n"),
            ["snapshot", "{d}/r.txt"],
            2,
            "xgrammar>=0.1 is not pinned",
        ),
        (
            lambda d: (d / "r.txt").write_text("!!!\n"),
            ["snapshot", "{d}/r.txt"],
            2,
            # no line of a file that may be no requirements file at all is echoed
            r"r.txt: line 1 is not a requirement \(not shown",
        ),
        # pip-api reads option lines with argparse, which would print its usage and exit
        # (found by the hostile-input tests)
        (
            lambda d: (d / "r.txt").write_text("-h\n"),
            ["snapshot", "{d}/r.txt"],
            2,
            "r.txt: invalid requirements file: an option line asks for help",
        ),
        (
            lambda d: (d / "r.txt").write_text("xgrammar==0.1.32\n-e\n"),
            ["snapshot", "{d}/r.txt"],
            2,
            "r.txt: invalid requirements file: argument -e/--editable: expected one argument",
        ),
        (
            lambda d: (d / "r.txt").write_text("# nothing\n"),
            ["snapshot", "{d}/r.txt"],
            2,
            "no requirements",
        ),
        (
            lambda d: (d / "weird.bin").write_text("x"),
            ["snapshot", "{d}/weird.bin"],
            2,
            "cannot tell what this file is",
        ),
        # output
        (
            lambda d: None,
            ["snapshot", "local", "-o", "{d}/no/such/dir/out.json"],
            2,
            "out.json: cannot write",
        ),
        (
            lambda d: (d / "adir").mkdir(),
            ["snapshot", "local", "-o", "{d}/adir"],
            2,
            "adir: cannot write",
        ),
        (
            lambda d: (d / "afile").write_text(""),
            ["lock", "local", "-o", "{d}/afile/env.lock"],
            2,
            "env.lock: cannot write",
        ),
    ],
)
def test_bad_input_is_one_line_with_its_exit_code(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    setup: Callable[[Path], object],
    argv: list[str],
    code: int,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    setup(tmp_path)
    for inv in tmp_path.glob("*.toml"):
        inv.write_text(inv.read_text().replace("{d}", str(tmp_path)))
    got, out, err = run(capsys, *(a.replace("{d}", str(tmp_path)) for a in argv))
    assert got == code, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("envsync: ")
    import re

    assert re.search(message, lines[0]), lines[0]
    leftovers = [
        p.name for p in tmp_path.rglob("*") if p.name.startswith(".") and p.name.endswith(".tmp")
    ]
    assert leftovers == []


def test_collection_failure_writes_no_output_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inv = tmp_path / "inv.toml"
    inv.write_text("[hosts.x]\npython = '/bin/false'\n")
    out = tmp_path / "out.json"
    code, _, _ = run(capsys, "--inventory", str(inv), "snapshot", "x", "-o", str(out))
    assert code == 3
    assert not out.exists()
    out.write_text("previous\n")
    code, _, _ = run(capsys, "--inventory", str(inv), "lock", "x", "-o", str(out))
    assert code == 3
    assert out.read_text() == "previous\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_malformed_dist_info_fails_collection_unless_allowed(
    capsys: pytest.CaptureFixture[str], inventory: Path, small_venv: Path
) -> None:
    broken = site_packages(small_venv) / "gamma-1.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName gamma\n")
    try:
        code, out, err = run(capsys, "--inventory", str(inventory), "snapshot", "ref")
        assert (code, out) == (3, "")
        assert "malformed distribution metadata at" in err and "gamma-1.0.dist-info" in err
        assert "--allow-broken" in err
        code, out, _ = run(
            capsys, "--inventory", str(inventory), "snapshot", "ref", "--allow-broken"
        )
        assert code == 0
        (entry,) = json.loads(out)["broken"]
        assert entry["path"].endswith("gamma-1.0.dist-info")
        assert "malformed header line" in entry["reason"]
    finally:
        for f in broken.iterdir():
            f.unlink()
        broken.rmdir()


def test_console_script_and_module_run_without_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}
    for argv in (
        [sys.executable, "-m", "envsync", "snapshot", str(tmp_path / "missing.lock")],
        [str(Path(sys.executable).parent / "envsync"), "snapshot", "no-such-host"],
    ):
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("envsync: ")
    proc = subprocess.run(
        [sys.executable, "-m", "envsync", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.startswith("envsync ")


def test_output_to_a_device_writes_through_it_and_keeps_the_node(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    req = tmp_path / "r.txt"
    req.write_text("xgrammar==0.1.32\n")
    code, _, _ = run(capsys, "lock", str(req), "-o", str(fifo))
    out, _ = reader.communicate(timeout=10)
    assert code == 0
    assert b'name = "xgrammar"' in out
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize(
    "argv",
    [
        ["stop", "local", "--deep"],
        ["stop", "local", "-o", "x"],
        ["rollback", "local", "--timeout", "3"],
        ["deploy", "local", "-o", "x"],
        ["lock", "--jobs", "2"],
        ["diff", "--fail-on", "risky"],
        ["snapshot", "local", "--probe"],
        ["repair", "--format", "json"],
    ],
)
def test_options_only_where_they_mean_something(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    from envsync.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    line = capsys.readouterr().err.splitlines()[0]
    option = next(word for word in argv if word.startswith("-"))
    assert line.startswith(f"envsync {argv[0]}: unknown option {option}"), line


def test_a_multi_host_snapshot_is_spooled_and_written_in_the_order_named(tmp_path: Path) -> None:
    """Snapshots go to a spool file as their hosts answer (in any order); the document
    lists them in the order the hosts were named, byte for byte what json.dumps makes."""
    import tempfile

    from envsync.errors import CollectError
    from envsync.model.codec import from_data, to_data
    from envsync.model.environment import SNAPSHOT_SCHEMA_VERSION, Snapshot
    from envsync.sources.snapshot import SnapshotDocument

    data = json.loads(
        (Path(__file__).parent.parent / "data" / "snapshots" / "ct129.json").read_text()
    )
    snaps = [from_data(Snapshot, {**data, "host": name}, name) for name in ("h0", "h1", "h2", "h3")]
    with tempfile.TemporaryFile() as spool:
        doc = SnapshotDocument(spool)
        doc.add(3, snaps[3])
        doc.errors[2] = ("h2", CollectError('h2: probe said "\\u0000" and {"snapshots": []}'))
        doc.add(0, snaps[0])
        doc.add(1, snaps[1])
        text = "".join(doc.pieces())
    expected = {
        "schema_version": SNAPSHOT_SCHEMA_VERSION,
        "snapshots": [to_data(snaps[i]) for i in (0, 1, 3)],
        "errors": [{"host": "h2", "error": str(doc.errors[2][1])}],
    }
    assert text == json.dumps(expected, indent=2) + "\n"


def test_the_import_check_is_named_for_what_it_does_and_takes_its_old_name_for_a_release(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from envsync.cli.parser import build_parser
    from envsync.collect.importcheck import ImportCheck

    parser = build_parser()

    def import_check(*argv: str) -> ImportCheck:
        args = parser.parse_args(["diff", "a.json", "b.json", *argv])
        return args.build(args).run.args[0].import_check

    assert import_check() == ImportCheck(run=False, timeout=180.0)
    assert import_check("--import-check", "--import-check-timeout", "5") == ImportCheck(
        run=True, timeout=5.0
    )
    assert import_check("--probe", "--probe-timeout", "5") == ImportCheck(run=True, timeout=5.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["diff", "--help"])
    shown = capsys.readouterr().out
    assert "[--import-check] [--import-check-timeout SECONDS]" in shown
    assert "[--probe]" not in shown  # the old names are hidden, and said to be going
    assert "--probe, --probe-timeout: the old names, accepted until the next release" in " ".join(
        shown.split()
    )
