"""The exec runner's argv and its reading of a prefix's failures (a fake of the seam below).

The integration tests, on real namespaces, are in test_exec_container.py.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from envsync.errors import CommandNotFound, CommandTimeout, ExecError
from envsync.runner import CommandResult, make_runner
from envsync.runner.exec import READY, ExecRunner, exec_argv
from envsync.runner.local import LocalRunner
from envsync.runner.ssh import SSHRunner, remote_command
from envsync.service import endpoints
from envsync.sources.inventory import HostSpec, ServiceSpec

DOCKER = ("docker", "exec", "-i", "sglang")
KUBECTL = ("kubectl", "exec", "-i", "-n", "inference", "pod/sglang-0", "-c", "server", "--")
SRUN = ("srun", "-w", "gpu7", "--")
PYTHON = "/opt/venv/bin/python"


@dataclass
class Inner:
    """Records what it is asked to run; answers the ready check, then `answer`."""

    host: str = "pod"
    calls: list[tuple[tuple[str, ...], bytes | None, float]] = field(default_factory=list)
    ready: CommandResult | Exception | None = None
    answer: bytes = b'{"ok": 1}'

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        argv = tuple(argv)
        self.calls.append((argv, input, timeout))
        if len(self.calls) == 1:
            if isinstance(self.ready, Exception):
                raise self.ready
            if self.ready is not None:
                return self.ready
            return result(argv, 0, stdout=READY.encode())
        return result(argv, 0, stdout=self.answer)


def result(
    argv: Sequence[str], code: int, *, stdout: bytes = b"", stderr: str = ""
) -> CommandResult:
    return CommandResult(
        argv=tuple(argv), returncode=code, stdout=stdout, stderr=stderr.encode(), duration_s=0.1
    )


def host(prefix: Sequence[str], ssh: str | None = None) -> HostSpec:
    return HostSpec(name="pod", python=PYTHON, exec=tuple(prefix), ssh=ssh)


@pytest.mark.parametrize("prefix", [DOCKER, KUBECTL, SRUN, ("podman", "exec", "-i", "c1")])
def test_every_command_is_the_prefix_then_envsyncs_argv_with_stdin(prefix: tuple[str, ...]) -> None:
    inner = Inner()
    runner = ExecRunner(host(prefix), inner)
    probe = [PYTHON, "-c", "import sys; exec(sys.stdin.read())", '{"watch": ["a b"]}']
    out = runner.run(probe, input=b"print(1)", timeout=30)
    assert out.stdout == b'{"ok": 1}'
    runner.run([PYTHON, "-m", "pip", "install", "x==1"], timeout=60)
    (check, _, check_timeout), (first, stdin, timeout), (second, _, _) = inner.calls
    assert check[: len(prefix)] == prefix and check[len(prefix) :][:2] == (PYTHON, "-c")
    assert check_timeout == 30  # the prefix gets the command's own time to answer
    assert first == (*prefix, *probe) and (stdin, timeout) == (b"print(1)", 30)
    assert second == (*prefix, PYTHON, "-m", "pip", "install", "x==1")


def test_the_argv_for_docker_kubectl_and_srun() -> None:
    argv = [PYTHON, "-c", "print(1)"]
    assert exec_argv(DOCKER, argv) == ("docker", "exec", "-i", "sglang", PYTHON, "-c", "print(1)")
    assert exec_argv(KUBECTL, argv) == (
        *("kubectl", "exec", "-i", "-n", "inference", "pod/sglang-0", "-c", "server", "--"),
        *(PYTHON, "-c", "print(1)"),
    )
    assert exec_argv(SRUN, argv) == ("srun", "-w", "gpu7", "--", PYTHON, "-c", "print(1)")


def test_exec_over_ssh_quotes_every_word_for_the_remote_shell() -> None:
    hostile = ["/opt/we ird/bin/python", "-c", "print('$(touch PWNED)'); `x`; a\"b", "{'k': 1}"]
    prefix = ("docker", "exec", "-i", "my container;rm -rf /")
    line = remote_command(exec_argv(prefix, hostile))
    assert line == (
        "docker exec -i 'my container;rm -rf /' '/opt/we ird/bin/python' -c "
        "'print('\"'\"'$(touch PWNED)'\"'\"'); `x`; a\"b' '{'\"'\"'k'\"'\"': 1}'"
    )
    assert shlex.split(line) == [*prefix, *hostile]  # the remote shell gets exactly the words


def test_make_runner_picks_one_runner_per_kind_of_host() -> None:
    assert isinstance(make_runner(HostSpec(name="a", python="p")), LocalRunner)
    assert isinstance(make_runner(HostSpec(name="a", python="p", ssh="root@h")), SSHRunner)
    inside = make_runner(host(DOCKER))
    assert isinstance(inside, ExecRunner) and isinstance(inside.inner, LocalRunner)
    remote = make_runner(host(DOCKER, ssh="root@h:2222"), connect_timeout=3)
    assert isinstance(remote, ExecRunner) and isinstance(remote.inner, SSHRunner)
    assert remote.inner.connect_timeout == 3 and remote.inner._conn is None  # not yet connected


def test_the_prefix_is_checked_once() -> None:
    inner = Inner()
    runner = ExecRunner(host(DOCKER), inner)
    for _ in range(3):
        runner.run(["true"], timeout=5)
    assert len(inner.calls) == 4


# The prefixes' own words when they fail (docker 27, podman 5, kubectl 1.30, Slurm 23).
FAILURES = [
    ("gone", 1, "Error response from daemon: No such container: sglang"),
    ("gone", 1, "Error response from daemon: container 4f2a is not running"),
    (
        "gone",
        125,
        "Error: can only create exec sessions on running containers: container state improper",
    ),
    ("gone", 1, 'Error from server (NotFound): pods "sglang-0" not found'),
    (
        "gone",
        1,
        "error: cannot exec into a container in a completed pod; current phase is Succeeded",
    ),
    ("gone", 1, "srun: error: Unable to allocate resources: Invalid node name specified"),
    ("gone", 1, "nsenter: cannot open /proc/4242/ns/mnt: No such file or directory"),
    (
        "denied",
        1,
        "permission denied while trying to connect to the Docker daemon socket at "
        'unix:///var/run/docker.sock: Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.45/containers"',
    ),
    (
        "denied",
        1,
        'Error from server (Forbidden): pods "sglang-0" is forbidden: User "ci" cannot create '
        'resource "pods/exec" in API group "" in the namespace "inference"',
    ),
    ("denied", 1, "srun: error: Unable to allocate resources: Access/permission denied"),
    ("missing", 127, "bash: line 1: docker: command not found"),
    ("missing", 127, "sh: 1: docker: not found"),
    (
        "python",
        127,
        "OCI runtime exec failed: exec failed: unable to start container process: exec: "
        f'"{PYTHON}": stat {PYTHON}: no such file or directory: unknown',
    ),
    ("python", 127, f"nsenter: failed to execute {PYTHON}: No such file or directory"),
    ("other", 2, "docker: 'exce' is not a docker command."),
]
EXPECTED = {
    "gone": "the container, pod or node of `docker exec -i sglang` is not running or does not exist: ",
    "denied": "permission denied running `docker exec -i sglang` on this machine: ",
    "missing": "`docker`, the program of hosts.pod.exec, is not installed on this machine: ",
    "python": f"python {PYTHON!r} cannot be run inside `docker exec -i sglang`: ",
    "other": "`docker exec -i sglang` could not run the interpreter inside (exit code 2): ",
}


@pytest.mark.parametrize(("kind", "code", "stderr"), FAILURES)
def test_each_failure_of_the_prefix_has_its_own_message_with_its_words(
    kind: str, code: int, stderr: str
) -> None:
    inner = Inner(ready=result(DOCKER, code, stderr=f"some earlier line\n{stderr}\n"))
    with pytest.raises(ExecError) as info:
        ExecRunner(host(DOCKER), inner).run(["true"], timeout=5)
    assert info.value.exit_code == 3
    assert info.value.message == f"pod: {EXPECTED[kind]}some earlier line | {stderr}"
    assert len(inner.calls) == 1  # nothing else was tried


def test_a_missing_program_on_this_machine_and_a_hanging_prefix() -> None:
    inner = Inner(ready=CommandNotFound("pod: docker does not exist"))
    with pytest.raises(ExecError) as info:
        ExecRunner(host(DOCKER), inner).run(["true"], timeout=5)
    assert str(info.value) == (
        "pod: `docker`, the program of hosts.pod.exec, is not installed on this machine "
        "(Tip: install docker there, or give its full path in exec)"
    )
    hung = CommandTimeout(
        "pod: srun did not finish", stderr=b"srun: job 81 queued and waiting for resources\n"
    )
    with pytest.raises(ExecError) as info:
        ExecRunner(host(SRUN, ssh="root@login"), Inner(ready=hung)).run(["true"], timeout=7)
    assert info.value.message == (
        "pod: `srun -w gpu7 --` did not reach the interpreter inside within 7s (the container, "
        "pod or allocation may be stuck or queued): srun: job 81 queued and waiting for resources"
    )
    assert info.value.tip is not None and "raise --timeout" in info.value.tip


def test_a_command_that_fails_inside_is_its_own_result_not_the_prefixs() -> None:
    class Failing(Inner):
        def run(self, argv, *, input=None, timeout):
            out = super().run(argv, input=input, timeout=timeout)
            if len(self.calls) > 1:
                return result(argv, 1, stderr="No such container: in the program's own words")
            return out

    out = ExecRunner(host(DOCKER), Failing()).run(["python", "-c", "x"], timeout=5)
    assert out.returncode == 1  # the caller reads it as that command's failure


@pytest.mark.parametrize(
    ("spec", "service", "expected"),
    [
        (
            HostSpec(name="a", python="p"),
            ServiceSpec(port=30001),
            ("http://127.0.0.1:30001", "/health"),
        ),
        (
            HostSpec(name="a", python="p", ssh="root@gpu7:22"),
            ServiceSpec(port=30001),
            ("http://gpu7:30001", "/health"),
        ),
        (
            host(KUBECTL),
            ServiceSpec(port=30000, health_url="http://sglang.inference.svc:8080/healthz"),
            ("http://sglang.inference.svc:8080", "/healthz"),
        ),
        (
            host(DOCKER),
            ServiceSpec(port=30000, health="/health", health_url="https://127.0.0.1:40000"),
            ("https://127.0.0.1:40000", "/health"),
        ),
    ],
)
def test_the_service_is_asked_where_the_inventory_says(
    spec: HostSpec, service: ServiceSpec, expected: tuple[str, str]
) -> None:
    assert endpoints(spec, service) == expected


def test_a_command_that_hangs_inside_is_named_with_its_prefix() -> None:
    class Hanging(Inner):
        def run(self, argv, *, input=None, timeout):
            out = super().run(argv, input=input, timeout=timeout)
            if len(self.calls) > 1:
                raise CommandTimeout("pod: docker did not finish", stderr=b"loading\n")
            return out

    with pytest.raises(CommandTimeout) as info:
        ExecRunner(host(DOCKER), Hanging()).run([PYTHON, "-c", "x"], timeout=5)
    assert info.value.message == (
        f"pod: {PYTHON} did not finish within 5s inside `docker exec -i sglang`"
    )
    assert info.value.stderr == b"loading\n"
