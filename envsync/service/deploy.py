"""Deploy the service (systemd drop-in or a plain process) and smoke-test it, failing fast.

The smoke test watches three things in one loop: the process (or unit) state, its log and
the HTTP health endpoint. A process that died gives a verdict within a poll of dying, with
the last exception of its traceback; a healthy one is asked for real generations.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from envsync import redact
from envsync.errors import AgentError, DeployError
from envsync.model.environment import Crash, Frame, Raised
from envsync.model.inventory import DEFAULT_DEADLINE, HostSpec, ServiceSpec, parse_target
from envsync.model.launch import effective_command
from envsync.runner import Runner
from envsync.runner.agent import Agent

POLL_SECONDS = 0.2
# Most crashes come in the first moments: the first polls come sooner (20, 40, 80 ms ...).
FIRST_POLL_SECONDS = 0.02
PROCESS_NAME = "service"  # the run files' name of a plain-process service
EXCEPTION = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?::\s*(?P<message>.*))?$"
)


@contextmanager
def _agent(spec: HostSpec, runner: Runner, lock: str | None = None) -> Iterator[Agent]:
    """The host's agent; its failure is the service's (exit 5), not an apply's."""
    try:
        yield Agent(spec, runner, lock=lock)
    except AgentError as e:
        raise DeployError(e.message) from e


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    host: str
    mode: str  # process | systemd
    command: tuple[str, ...]
    name: str  # the unit, or the run files' name
    url: str  # base URL of the HTTP API
    health: str
    pid: int | None = None
    started: float = 0.0  # time.time() on the envsync machine
    since: str | None = None  # systemd: journal cursor time


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    kind: str  # ready | crashed | stalled | not-running
    seconds: float  # from the start of the watch to the verdict
    exception: str | None = None  # "ImportError: cannot import name ..."
    frame: str | None = None  # the traceback's last frame
    # crashed: the traceback's exception with its frames, then the ones that led to it
    raised: tuple[Raised, ...] = ()
    log_tail: str = ""
    tokens_per_s: float | None = None
    completion_tokens: int = 0
    detail: str = ""


def endpoints(spec: HostSpec, service: ServiceSpec) -> tuple[str, str]:
    """The service's API base URL and health path, as reached from this machine.

    The inventory's `health_url` when set (a container's published port, a Kubernetes
    service); else the service's port at the SSH host's name, or on this machine.
    """
    if service.health_url:
        parts = urlsplit(service.health_url)
        return f"{parts.scheme}://{parts.netloc}", parts.path or service.health
    host = parse_target(spec.ssh)[1] if spec.ssh else "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{service.port}", service.health


def dropin_text(command: Sequence[str], env: Mapping[str, str], workdir: str | None = None) -> str:
    """A systemd drop-in that replaces the unit's ExecStart and adds its environment."""

    def quote(arg: str) -> str:
        # systemd's own quoting: double quotes, backslash escapes; % doubled.
        return '"' + arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'

    lines = [
        "# Written by envsync deploy: the effective command of this host.",
        "[Service]",
        "ExecStart=",
        "ExecStart=" + " ".join(quote(a) for a in command),
    ]
    lines += [f"Environment={quote(f'{k}={v}')}" for k, v in sorted(env.items())]
    if workdir:
        lines.append(f"WorkingDirectory={quote(workdir)}")
    return "\n".join(lines) + "\n"


def deploy(
    spec: HostSpec,
    runner: Runner,
    service: ServiceSpec,
    flags: Mapping[str, str] | None,
    *,
    lock: str | None = None,
) -> Deployment:
    if not service.command:
        raise DeployError(
            f"{spec.name}: no service command in the inventory", tip="set [service] command"
        )
    if not service.port:
        raise DeployError(
            f"{spec.name}: no service port in the inventory", tip="set [service] port"
        )
    command = effective_command(service, spec, flags)
    if service.unit:
        unit = service.unit
        with _agent(spec, runner, lock) as agent:
            agent.write_dropin(
                f"/etc/systemd/system/{unit}.d/envsync.conf",
                dropin_text(command, service.env, service.workdir),
            )
        since = time.strftime("%Y-%m-%d %H:%M:%S")
        for argv in (["systemctl", "daemon-reload"], ["systemctl", "restart", unit]):
            result = runner.run(argv, timeout=120)
            if result.returncode != 0:
                raise DeployError(
                    f"{spec.name}: {shlex.join(argv)} failed: {result.stderr_tail(2)}"
                )
        return _deployment(spec, service, command, since=since)
    with _agent(spec, runner, lock) as agent:
        started = agent.start(
            name=PROCESS_NAME,
            argv=command,
            env=service.env,
            cwd=service.workdir,
            port=service.port,
        )
    return _deployment(spec, service, command, pid=started.pid)


def _deployment(
    spec: HostSpec, service: ServiceSpec, command: tuple[str, ...], **extra: Any
) -> Deployment:
    url, health = endpoints(spec, service)
    return Deployment(
        host=spec.name,
        mode="systemd" if service.unit else "process",
        command=command,
        name=service.unit or PROCESS_NAME,
        url=url,
        health=health,
        started=time.time(),
        **extra,
    )


def keep_crash(spec: HostSpec, runner: Runner, crash: Crash | None) -> None:
    """Keep on the host the crash the smoke test saw (None: forget it, the service is up)."""
    with _agent(spec, runner) as agent:
        agent.set_crash(crash)


def stop(spec: HostSpec, runner: Runner, service: ServiceSpec, *, lock: str | None = None) -> str:
    """Stop the service: its unit, or the process envsync started."""
    if service.unit:
        result = runner.run(["systemctl", "stop", service.unit], timeout=120)
        if result.returncode != 0:
            raise DeployError(
                f"{spec.name}: systemctl stop {service.unit} failed: {result.stderr_tail(2)}"
            )
        return f"unit {service.unit}"
    with _agent(spec, runner, lock) as agent:
        stopped = agent.stop(PROCESS_NAME)
    return f"process {stopped}" if stopped else "nothing (not running)"


def attach(spec: HostSpec, service: ServiceSpec, flags: Mapping[str, str] | None) -> Deployment:
    """The running service, for a smoke test without a (re)start."""
    return _deployment(spec, service, effective_command(service, spec, flags))


_TRACEBACK = "Traceback (most recent call last):"
# The lines Python prints between the tracebacks of a chain (`__cause__`, `__context__`).
_CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# A log line's prefix: "[2026-12-01 10:00:00] ", vLLM's "(EngineCore_0 pid=12) ".
_PREFIX = re.compile(r"^(?:\[[^\]]*\]\s*|\([\w.-]+ pid=\d+\)\s*)+")
_FRAME = re.compile(r'^File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+))?$')


def _lines(log: str) -> list[str]:
    return [_PREFIX.sub("", line.rstrip()) for line in log.splitlines()]


def _last_traceback(log: str) -> list[str]:
    """The lines of the log's last traceback (log prefixes removed), or none."""
    lines = _lines(log)
    start = max((i for i, line in enumerate(lines) if _TRACEBACK in line), default=None)
    if start is None:
        return []
    return lines[start + 1 :]


def _raised(block: list[str]) -> Raised | None:
    """One traceback's lines (after its header) as the exception it ends with."""
    frames: list[Frame] = []
    exception = None
    for i, raw in enumerate(block):
        line = raw.strip()
        match = _FRAME.match(line)
        if match:
            code = block[i + 1].strip() if i + 1 < len(block) else ""
            if not code or _FRAME.match(code) or EXCEPTION.match(code) or set(code) <= set("^~ "):
                code = ""
            frames.append(
                Frame(
                    file=match["file"],
                    line=int(match["line"]),
                    function=match["function"],
                    code=_shown(code),
                )
            )
        elif EXCEPTION.match(line):
            exception = EXCEPTION.match(line)
    if exception is None:
        return None
    return Raised(
        exception=exception["type"],
        message=_shown(exception["message"] or "") or "",
        frames=tuple(frames),
    )


def crash_chain(log: str) -> tuple[Raised, ...]:
    """The log's last traceback as a chain: the exception it ended with, then the one
    Python printed above it as its cause or context, and so on (innermost last)."""
    lines = _lines(log)
    starts = [i for i, line in enumerate(lines) if _TRACEBACK in line]
    chain: list[Raised] = []
    end = len(lines)
    for start in reversed(starts):
        raised = _raised(lines[start + 1 : end])
        if raised is None:
            break
        chain.append(raised)
        before = [ln.strip() for ln in lines[max(0, start - 3) : start] if ln.strip()]
        if not before or before[-1] not in _CHAINED:
            break  # the first of its chain
        end = start
    return tuple(chain)


def last_exception(log: str) -> str | None:
    """The exception a traceback in the log ended with ("ImportError: cannot import ...")."""
    found = None
    for line in _last_traceback(log):
        if EXCEPTION.match(line.strip()):
            found = line.strip()
    return found


def last_frame(log: str) -> str | None:
    """The traceback's last frame: `File "x.py", line 5, in <module>: import y`."""
    lines = _last_traceback(log)
    frames = [i for i, line in enumerate(lines) if line.strip().startswith('File "')]
    if not frames:
        return None
    i = frames[-1]
    code = lines[i + 1].strip() if i + 1 < len(lines) else ""
    shown = lines[i].strip()
    return f"{shown}: {code}" if code and not EXCEPTION.match(code) else shown


def _http(
    url: str, body: Mapping[str, object] | None = None, timeout: float = 2.0
) -> tuple[int, bytes]:
    import urllib.error  # with http.client: milliseconds every command would pay
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (urllib.error.URLError, OSError, TimeoutError):
        return 0, b""


class _Watch:
    """Process/unit state and new log lines, through the host's runner."""

    def __init__(self, spec: HostSpec, runner: Runner, deployment: Deployment) -> None:
        self.spec, self.runner, self.deployment = spec, runner, deployment
        self.offset = 0
        self.log = ""

    def poll(self) -> bool:
        """Read what is new; return whether the service is still alive."""
        d = self.deployment
        if d.mode == "process":
            with _agent(self.spec, self.runner) as agent:
                state = agent.watch(d.name, self.offset)
            self.offset = state.offset
            self.log += state.log
            return state.alive
        show = self.runner.run(
            ["systemctl", "show", d.name, "--property=ActiveState,SubState,MainPID,ExecMainStatus"],
            timeout=30,
        )
        props = dict(
            line.split("=", 1) for line in show.stdout.decode().splitlines() if "=" in line
        )
        argv = ["journalctl", "-u", d.name, "-o", "cat", "--no-pager"]
        if d.since:
            argv += ["--since", d.since]
        journal = self.runner.run(argv, timeout=30)
        self.log = journal.stdout.decode("utf-8", "replace")
        return props.get("ActiveState") in ("active", "activating", "reloading") and props.get(
            "SubState"
        ) not in ("failed", "exited", "dead")


def smoke(
    spec: HostSpec,
    runner: Runner,
    deployment: Deployment,
    *,
    deadline: float = DEFAULT_DEADLINE,
    requests: int = 3,
    max_new_tokens: int = 64,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    attached: bool = False,
) -> Verdict:
    """Watch until ready, crashed or the deadline; a ready service must generate.

    `attached`: the service was not (re)started for this test; one that is not running
    then is "not-running", not a crash seen at its start.
    """
    watch = _Watch(spec, runner, deployment)
    started = clock()
    first = True
    polls = 0
    waiting = ""
    while True:
        alive = watch.poll()
        elapsed = clock() - started
        if not alive and first and attached:
            return Verdict(
                kind="not-running",
                seconds=elapsed,
                log_tail=_tail(watch.log),
                detail="the service is not running",
            )
        first = False
        if not alive:
            return Verdict(
                kind="crashed",
                seconds=elapsed,
                exception=_shown(last_exception(watch.log)),
                frame=_shown(last_frame(watch.log)),
                raised=crash_chain(watch.log),
                log_tail=_tail(watch.log),
                detail="the service's process is gone",
            )
        status, _ = _http(deployment.url + deployment.health, timeout=1.0)
        if status == 200:
            verdict = _generate(deployment, elapsed, requests, max_new_tokens)
            if verdict is not None:
                return verdict
            # Healthy, but generation answers 503: still loading (not a crash) until the
            # deadline says it is taking too long.
            waiting = "healthy, but /generate answered 503 (not ready yet)"
        if elapsed >= deadline:
            detail = f"no answer from {deployment.url}{deployment.health} in {deadline:g}s"
            if waiting:
                detail = f"{waiting} at the deadline, {deadline:g}s"
            if (spec.exec or spec.jump) and not (spec.service and spec.service.health_url):
                detail += (
                    " (behind an exec prefix or a jump host the port may not be reachable "
                    "at that address from here: set health_url in the service table)"
                )
            return Verdict(
                kind="stalled", seconds=elapsed, log_tail=_tail(watch.log), detail=detail
            )
        sleep(min(POLL_SECONDS, FIRST_POLL_SECONDS * 2**polls))
        polls += 1


def _shown(line: str | None) -> str | None:
    """A line of the log as envsync shows and keeps it: a secret in it is hidden."""
    return redact.text(line) if line else None


def _tail(log: str) -> str:
    """The log's last lines as envsync shows them: a secret the service printed is hidden."""
    return redact.text("\n".join(log.splitlines()[-25:]))


NOT_READY = 503  # the service is up and says it cannot serve yet (loading, warming up)


def _generate(
    deployment: Deployment, elapsed: float, requests: int, max_new_tokens: int
) -> Verdict | None:
    """Real generations; None when the first says the service is not ready yet (503)."""
    tokens, seconds = 0, 0.0
    for i in range(requests):
        body = {
            "text": f"envsync smoke test {i}: say something",
            "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0},
        }
        began = time.perf_counter()
        status, data = _http(deployment.url + "/generate", body, timeout=120)
        took = time.perf_counter() - began
        try:
            answer = json.loads(data) if status == 200 else None
            count = int(answer["meta_info"]["completion_tokens"]) if answer else 0
        except (ValueError, KeyError, TypeError):
            answer, count = None, 0
        if answer is None and status == NOT_READY and i == 0:
            return None
        if answer is None:
            return Verdict(
                kind="crashed",
                seconds=elapsed,
                detail=f"healthy, but /generate answered {status or 'nothing'}",
            )
        tokens += count
        seconds += took
    return Verdict(
        kind="ready",
        seconds=elapsed,
        tokens_per_s=tokens / seconds if seconds else None,
        completion_tokens=tokens,
        detail=f"{requests} generations of {max_new_tokens} tokens",
    )
