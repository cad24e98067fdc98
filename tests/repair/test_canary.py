"""Canary repairs of a fleet on real hosts: one plan per class, batches, a batch that fails
for real (pip finds no wheel on one host) stops the rollout and is rolled back.

Four target venvs (with pip) lack soundfile, which the service (examples/demo_server.py)
imports at startup; the reference has it. Every target installs it from a wheel folder
(`pip_options`); t3's service port is held by another process, so that its deploy fails
for real after its pin: its batch stops the rollout.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO, make_venv, make_wheel, pip_install, site_packages
from tests.helpers import run_cli as run
from tests.sshd import free_port

pytestmark = pytest.mark.slow
DEMO = REPO / "examples" / "demo_server.py"
TARGETS = ("t1", "t2", "t3", "t4")


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict[str, Path]]:
    wheels = tmp_path / "wheels"
    soundfile = make_wheel(wheels, "soundfile", "0.13.1", {"soundfile.py": "V = '0.13.1'\n"})
    out = {"ref": make_venv(tmp_path / "ref")}
    pip_install(out["ref"], soundfile)
    for name in TARGETS:
        out[name] = make_venv(tmp_path / name, with_pip=True)
    command = [
        "{python}", str(DEMO), "--port", "{port}", "--grammar-backend", "none",
        "--load-seconds", "0.2",
    ]  # fmt: skip
    text = (
        '[defaults]\nreference = "ref"\nwatch = []\nenv = ["ENVSYNC_TEST_NONE"]\n'
        f"[service]\ncommand = {json.dumps(command)}\nport = {free_port()}\n"
        f'[hosts.ref]\npython = "{out["ref"]}"\n'
        '[groups.fleet]\nhosts = "t[1-4]"\n'
    )
    busy = socket.socket()  # another process's port: t3's service cannot start
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    for name in TARGETS:
        port = busy.getsockname()[1] if name == "t3" else free_port()
        text += (
            f'[hosts.{name}]\npython = "{out[name]}"\nservice = {{ port = {port} }}\n'
            f'pip_options = ["--isolated", "--no-index", "--find-links", "{wheels}"]\n'
        )
    (tmp_path / "envsync.toml").write_text(text)
    out["inventory"] = tmp_path / "envsync.toml"
    yield out
    busy.close()


def has_soundfile(python: Path) -> bool:
    return (site_packages(python) / "soundfile.py").exists()


def test_a_failing_batch_stops_the_rollout_and_is_rolled_back(
    capsys: pytest.CaptureFixture[str], fleet: dict[str, Path]
) -> None:
    inv = str(fleet["inventory"])
    # Without --apply: one plan for the class of four hosts, nothing changes.
    code, out, _ = run(capsys, "--inventory", inv, "-q", "repair", "ref", "fleet")
    assert code == 1
    assert "class t[1-4] (4 host(s)): 1 step(s)" in out and "pin soundfile==0.13.1" in out
    assert not any(has_soundfile(fleet[t]) for t in TARGETS)
    try:
        code, out, err = run(
            capsys, "--inventory", inv, "repair", "ref", "fleet", "--apply", "--batch", "1,2",
            "--deadline", "60", "--prefer", "fix",
        )  # fmt: skip
        assert code == 4, out + err
        assert "batch 1/3 t1:" in out and "batch 2/3 t[2-3]:" in out and "batch 3/3" not in out
        assert "  t1: changed: 1 step(s)" in out and "ready in" in out
        assert "  t3: failed: 1 step(s)" in out and "already in use" in out
        assert "  t2: rolled-back: " in out
        assert "stopped at batch 2 of 3" in out
        assert "changed: t1; rolled-back: t2; failed: t3; not-run: t4" in out
        assert "batch 2/3: 1 host(s) failed (--max-fail 0)" in err
        # for real: t1 has soundfile; t2 and t3 had it and are rolled back; t4 never had it
        assert has_soundfile(fleet["t1"])
        assert not any(has_soundfile(fleet[t]) for t in ("t2", "t3", "t4"))
        # the rollout goes on past a failure the batch may take (--max-fail 1): t2 and t4
        code, out, _ = run(
            capsys, "--inventory", inv, "-q", "repair", "ref", "t[2-4]", "--apply",
            "--batch", "3", "--max-fail", "1", "--deadline", "60", "--prefer", "fix",
        )  # fmt: skip
        assert code == 4  # a host failed, though the rollout did not stop
        assert "stopped" not in out and "changed: t[2,4]; failed: t3" in out
        assert has_soundfile(fleet["t2"]) and has_soundfile(fleet["t4"])
        assert not has_soundfile(fleet["t3"])
    finally:
        for name in TARGETS:
            run(capsys, "--inventory", inv, "-q", "stop", name)


def test_batches_are_ansibles_serial() -> None:
    from envsync.repair.canary import allowed_failures, batches, parse_sizes

    hosts = [f"gpu{i:03d}" for i in range(1, 101)]
    sizes = parse_sizes(["1,10%,100%"])
    assert [len(b) for b in batches(hosts, sizes)] == [1, 10, 89]
    assert [len(b) for b in batches(hosts[:7], parse_sizes(["2"]))] == [2, 2, 2, 1]
    assert [len(b) for b in batches(hosts[:3], parse_sizes(["1", "50%"]))] == [1, 1, 1]
    assert allowed_failures("0", 10) == 0 and allowed_failures("25%", 10) == 2
    from envsync.errors import InputError

    with pytest.raises(InputError, match=r"--batch '0': not a host count"):
        parse_sizes(["1,0"])
    with pytest.raises(InputError, match=r"--max-fail 'x'"):
        allowed_failures("x", 3)
