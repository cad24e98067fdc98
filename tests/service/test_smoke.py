"""deploy and smoke with real processes and real HTTP: crashed, ready, stalled; systemd mode."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from envsync.runner import CommandResult
from envsync.service import Deployment, deploy, dropin_text, last_exception, smoke
from envsync.sources.inventory import HostSpec, ServiceSpec
from tests.container import Container
from tests.helpers import REPO, make_venv, make_wheel, pip_install
from tests.helpers import run_cli as run
from tests.sshd import SSHD, free_port

DEMO = REPO / "examples" / "demo_server.py"
DATA = Path(__file__).resolve().parent.parent / "data" / "systemd"


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("smoke")
    # A stand-in soundfile, written for the purpose: the demo server only imports it.
    soundfile = make_wheel(
        root / "w", "soundfile", "0.13.1", {"soundfile.py": "__version__ = '0.13.1'\n"}
    )
    good, bad = make_venv(root / "good"), make_venv(root / "bad")
    pip_install(good, soundfile)
    return {"good": good, "bad": bad}


def inventory(
    path: Path, venvs: dict[str, Path], *, extra_args: str = "", ssh: SSHD | None = None
) -> Path:
    command = [
        "{python}",
        str(DEMO),
        "--port",
        "{port}",
        "--grammar-backend",
        "none",
        "--load-seconds",
        "0.2",
        *extra_args.split(),
    ]
    text = (
        f'[defaults]\nreference = "good"\ntarget = "bad"\n'
        f"[service]\ncommand = {json.dumps(command)}\nport = {free_port()}\n"
        f'[hosts.good]\npython = "{venvs["good"]}"\n'
        f'[hosts.bad]\npython = "{venvs["bad"]}"\nservice = {{ port = {free_port()} }}\n'
    )
    if ssh is not None:
        known = path.parent / "known_hosts"
        known.write_text(ssh.host_key_line())
        text += (
            f'[hosts.remote]\nssh = "{ssh.target}"\npython = "{venvs["good"]}"\n'
            f'identity = "{ssh.client_key}"\nknown_hosts = "{known}"\nservice = {{ port = {free_port()} }}\n'
        )
    path.write_text(text)
    return path


def stop(inv: Path, host: str, python: Path) -> None:
    from envsync.runner.agent import Agent
    from envsync.runner.local import LocalRunner

    Agent(HostSpec(name=host, python=str(python)), LocalRunner(host)).call(
        {"op": "stop", "name": "service"}
    )


def test_a_service_that_dies_at_import_gives_crashed_and_its_finding(
    capsys: pytest.CaptureFixture[str], venvs: dict[str, Path], tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", venvs)
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "deploy", "bad", "--deadline", "60")
    assert code == 5, err
    first = out.splitlines()[0]
    assert first.startswith("bad: CRASHED ") and first.endswith(
        "ModuleNotFoundError: No module named 'soundfile'"
    )
    assert float(first.split()[2].rstrip("s")) < 30  # told long before the deadline
    assert "cause (" in out and "soundfile" in out
    assert "next: envsync repair good bad --prefer fix --apply" in out
    assert "log tail:" in out and "Traceback (most recent call last):" in out


def test_a_healthy_service_is_ready_and_generates(
    capsys: pytest.CaptureFixture[str], venvs: dict[str, Path], tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", venvs)
    try:
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", "deploy", "good", "--deadline", "60"
        )
        assert code == 0, out + err
        assert (
            out.startswith("good: ready in ")
            and "3 generations of 64 tokens" in out
            and "tokens/s" in out
        )
        # the running service smoke-tests again without a restart
        code, out, _ = run(
            capsys, "--inventory", str(inv), "-q", "smoke", "good", "--deadline", "30"
        )
        assert code == 0 and "ready" in out
        # a second deploy stops the first instance (the port would be taken otherwise)
        assert (
            run(capsys, "--inventory", str(inv), "-q", "deploy", "good", "--deadline", "60")[0] == 0
        )
    finally:
        stop(inv, "good", venvs["good"])


def test_a_hung_start_is_stalled_at_the_deadline_with_the_log_tail(
    capsys: pytest.CaptureFixture[str], venvs: dict[str, Path], tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", venvs, extra_args="--load-seconds 600")
    try:
        code, out, _ = run(
            capsys, "--inventory", str(inv), "-q", "deploy", "good", "--deadline", "2"
        )
        assert code == 5
        assert out.startswith("good: STALLED: no answer from http://127.0.0.1:")
        assert "Load weight begin" in out
    finally:
        stop(inv, "good", venvs["good"])


def test_deploy_and_smoke_over_ssh(
    capsys: pytest.CaptureFixture[str], venvs: dict[str, Path], tmp_path: Path, sshd_bed: SSHD
) -> None:
    inv = inventory(tmp_path / "inv.toml", venvs, ssh=sshd_bed)
    try:
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", "deploy", "remote", "--deadline", "60"
        )
        assert code == 0, out + err
        assert out.startswith("remote: ready in ")
    finally:
        # over SSH the service's run files are in the SSH user's home, not this test's
        run(capsys, "--inventory", str(inv), "-q", "stop", "remote")


def test_repair_apply_ends_with_deploy_and_smoke(
    capsys: pytest.CaptureFixture[str], venvs: dict[str, Path], tmp_path: Path, wheel_cache: Path
) -> None:
    target = make_venv(tmp_path / "target", with_pip=True)
    inv = inventory(tmp_path / "inv.toml", {**venvs, "bad": target})
    wheels = venvs["good"].parent.parent / "w"
    inv.write_text(inv.read_text() + f'pip_options = ["--no-index", "--find-links", "{wheels}"]\n')
    try:
        code, out, err = run(
            capsys,
            "--inventory",
            str(inv),
            "-q",
            "repair",
            "--prefer",
            "fix",
            "--apply",
            "--deadline",
            "60",
        )
        assert code == 0, out + err
        assert "bad: ready in " in out, out + err
        assert run(capsys, "--inventory", str(inv), "-q", "rollback", "bad")[0] == 0
        code, out, _ = run(
            capsys,
            "--inventory",
            str(inv),
            "-q",
            "repair",
            "--prefer",
            "fix",
            "--apply",
            "--no-deploy",
        )
        assert code == 0 and out == ""
    finally:
        stop(inv, "bad", target)


def _inside(container: Container, needle: str) -> list[int]:
    """PIDs (as seen from here) of processes running `needle` in the container's namespaces."""
    ns = os.readlink(f"/proc/{container.pid}/ns/pid")
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if needle.encode() in (proc / "cmdline").read_bytes() and (
                os.readlink(proc / "ns" / "pid") == ns
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_deploy_smoke_and_stop_of_a_process_inside_a_container(
    capsys: pytest.CaptureFixture[str],
    venvs: dict[str, Path],
    tmp_path: Path,
    containers: Callable[..., Container],
) -> None:
    good = containers(venvs["good"].parent.parent, mounts={"/opt/app": DEMO.parent})
    bad = containers(venvs["bad"].parent.parent, mounts={"/opt/app": DEMO.parent})
    port = free_port()
    # The service answers on 127.0.0.2 only: not at this host's address, 127.0.0.1.
    command = ["{python}", "/opt/app/demo_server.py", "--port", "{port}", "--host", "127.0.0.2"]
    command += ["--grammar-backend", "none", "--load-seconds", "0.2"]
    inv = tmp_path / "inv.toml"
    text = (
        f"[service]\ncommand = {json.dumps(command)}\nport = {port}\n"
        f'[hosts.pod]\nexec = {json.dumps(good.exec_prefix)}\npython = "/opt/venv/bin/python"\n'
        f'[hosts.bad-pod]\nexec = {json.dumps(bad.exec_prefix)}\npython = "/opt/venv/bin/python"\n'
    )
    inv.write_text(text)
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "deploy", "pod", "--deadline", "3")
    assert code == 5
    assert out.startswith(f"pod: STALLED: no answer from http://127.0.0.1:{port}/health in 3s")
    assert "set health_url in the service table" in out
    assert "Uvicorn running on http://127.0.0.2" in out  # its log, read through the prefix
    inv.write_text(
        text.replace(
            f"port = {port}\n", f'port = {port}\nhealth_url = "http://127.0.0.2:{port}/health"\n'
        )
    )
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "deploy", "pod", "--deadline", "60")
    assert code == 0, out + err
    assert out.startswith("pod: ready in ") and "3 generations of 64 tokens" in out
    running = _inside(good, "/opt/app/demo_server.py")
    assert len(running) == 1  # the second deploy stopped the first; it runs inside
    assert run(capsys, "--inventory", str(inv), "-q", "smoke", "pod", "--deadline", "30")[0] == 0
    code, _, err = run(capsys, "--inventory", str(inv), "stop", "pod")
    assert code == 0 and err.startswith("pod: stopped process ")
    assert _inside(good, "/opt/app/demo_server.py") == []
    # a crash inside is told from its log, read through the prefix
    code, out, _ = run(
        capsys, "--inventory", str(inv), "-q", "deploy", "bad-pod", "--deadline", "60"
    )
    assert code == 5
    assert out.splitlines()[0].endswith("ModuleNotFoundError: No module named 'soundfile'")


# ---------------------------------------------------------------------------------------
# systemd mode, through the runner seam with recorded systemctl/journalctl behaviour


class RecordedSystemd:
    """A Runner that replays recorded systemctl/journalctl output and keeps every call."""

    def __init__(self, states: Sequence[str], journal: str) -> None:
        self.host = "gpu"
        self.calls: list[list[str]] = []
        self.ops: list[dict[str, object]] = []
        self.states = list(states)
        self.journal = journal

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        argv = list(argv)
        out = b""
        if argv[1:2] == ["-c"]:  # the envsync agent
            self.ops.append(json.loads(argv[3]))
            out = b'{"backup": null}\n'
        elif argv[:2] == ["systemctl", "show"]:
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            out = (DATA / f"show-{state}.txt").read_bytes()
        elif argv[0] == "journalctl":
            out = (DATA / self.journal).read_bytes()
        self.calls.append(argv)
        return CommandResult(argv=tuple(argv), returncode=0, stdout=out, stderr=b"", duration_s=0.0)


SERVICE = ServiceSpec(
    command=(
        "{python}",
        "-m",
        "sglang.launch_server",
        "--port",
        "{port}",
        "--model-path",
        "/models/m 1",
    ),
    port=30001,
    unit="sglang-dflash.service",
    env={"CUDA_VISIBLE_DEVICES": "1"},
)
HOST = HostSpec(name="gpu", python="/opt/venv_sglang211/bin/python")


def test_systemd_deploy_writes_a_drop_in_and_restarts() -> None:
    runner = RecordedSystemd(["active"], "journal-ready.txt")
    deployment = deploy(HOST, runner, SERVICE, {"--grammar-backend": "none"})
    (op,) = runner.ops
    assert op["op"] == "write-dropin"
    assert op["path"] == "/etc/systemd/system/sglang-dflash.service.d/envsync.conf"
    assert op["text"] == (DATA / "envsync.conf").read_text()
    assert [c for c in runner.calls if c[0] == "systemctl"] == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "restart", "sglang-dflash.service"],
    ]
    assert deployment.mode == "systemd" and deployment.command[-2:] == ("--grammar-backend", "none")


def test_systemd_crash_is_read_from_the_unit_and_its_journal() -> None:
    runner = RecordedSystemd(["activating", "failed"], "journal-crash.txt")
    deployment = Deployment(
        host="gpu",
        mode="systemd",
        command=(),
        name="sglang-dflash.service",
        url="http://127.0.0.1:9",
        health="/health",
        since="2026-11-28 21:14:03",
    )
    verdict = smoke(HOST, runner, deployment, deadline=30, sleep=lambda s: None)
    assert verdict.kind == "crashed"
    assert (
        verdict.exception
        == "ImportError: cannot import name 'StructuralTag' from 'xgrammar' (/opt/venv_sglang211/lib/python3.11/site-packages/xgrammar/__init__.py)"
    )
    journal_calls = [c for c in runner.calls if c[0] == "journalctl"]
    assert journal_calls[0] == [
        "journalctl",
        "-u",
        "sglang-dflash.service",
        "-o",
        "cat",
        "--no-pager",
        "--since",
        "2026-11-28 21:14:03",
    ]


def test_systemd_quoting_is_systemds_own() -> None:
    text = dropin_text(["/opt/v/bin/python", 'a "b"', "50%", "$(x)"], {"A": "1 2"})
    assert 'ExecStart="/opt/v/bin/python" "a \\"b\\"" "50%%" "$(x)"' in text
    assert 'Environment="A=1 2"' in text


@pytest.mark.parametrize(
    ("log", "exception"),
    [
        (
            "Traceback (most recent call last):\n  File \"x\", line 1\nModuleNotFoundError: No module named 'soundfile'\n",
            "ModuleNotFoundError: No module named 'soundfile'",
        ),
        (
            "[2026-11-28 TP0] Scheduler hit an exception: Traceback (most recent call last):\n  File \"s.py\"\n[2026-11-28 TP0] ImportError: cannot import name 'X' from 'y'\nReceived sigquit from a child process.\n",
            "ImportError: cannot import name 'X' from 'y'",
        ),
        ("all good\n", None),
    ],
)
def test_last_exception_of_a_traceback(log: str, exception: str | None) -> None:
    assert last_exception(log) == exception


def test_a_command_that_cannot_start_is_one_line_and_exit_5(
    capsys: pytest.CaptureFixture[str], venvs: dict[str, Path], tmp_path: Path
) -> None:
    inv = tmp_path / "inv.toml"
    inv.write_text(
        '[service]\ncommand = ["/nonexistent/sglang-server", "--port", "{port}"]\n'
        f'port = {free_port()}\n[hosts.good]\npython = "{venvs["good"]}"\n'
    )
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "deploy", "good")
    assert code == 5  # the service did not start: not "an apply failed and was rolled back"
    assert err == (
        "envsync: good: start: cannot start /nonexistent/sglang-server: No such file or directory\n"
    )
    assert "Traceback" not in out + err


def test_agent_failures_are_decided_by_their_caller(venvs: dict[str, Path]) -> None:
    from envsync.errors import AgentError, ApplyError, DeployError, RollbackError
    from envsync.repair.transaction import rollback
    from envsync.runner.local import LocalRunner
    from envsync.service import stop

    spec = HostSpec(name="good", python=str(venvs["good"]))
    with pytest.raises(RollbackError) as rolled:
        rollback(spec, LocalRunner("good"))
    assert rolled.value.exit_code == 4 and isinstance(rolled.value.__cause__, AgentError)
    assert rolled.value.__cause__.kind == "no-backup"
    broken = HostSpec(name="good", python="/bin/false")  # the agent cannot run at all
    with pytest.raises(DeployError) as failed:
        stop(broken, LocalRunner("good"), ServiceSpec(command=("x",), port=1))
    assert failed.value.exit_code == 5
    assert not isinstance(failed.value, ApplyError)
