"""An apply's installer (its pip, or uv), run so that it can never outlive the apply.

The installer runs in a session and process group of its own, tied to the agent that
started it (PR_SET_PDEATHSIG: a dying agent takes it down) and marked with an environment
variable every process under it inherits; its mark is written to the apply's backup before
it starts, so that a rollback finds and ends whatever of it is still alive before it
changes anything (`quiesce`). A pip started as `python -m pip` runs under an audit hook
that writes, before each write, the path it writes to the backup's `wrote.jsonl`: what the
installer provably wrote, even when it is killed half-way (`written`). The agent's own
writes in an apply (a copy from the reference) go to the same list.
"""

from __future__ import annotations

import json
import os
import signal
import time

from .backups import backup_dir
from .failure import Failure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from ..protocol import RunReply, RunRequest

MARK = "ENVSYNC_INSTALLER"  # its value: the installer's own nonce
TRACE = "ENVSYNC_TRACE"  # the log the audit hook writes to
INSTALLERS = "installers.jsonl"  # in the backup: one line per installer started, and ended
WROTE = "wrote.jsonl"  # in the backup: one JSON string (a path) per line
PR_SET_PDEATHSIG = 1
QUIESCE_SECONDS = 30.0

# Run by the target's interpreter as `python -c TRACER pip ARGS...`: pip itself, every
# path it opens for writing, makes, links or renames to noted first (a note that cannot be
# written stops that write: the installer fails rather than write untraced).
TRACER = r"""
import os, sys
def _envsync_trace():
    import json
    log = os.environ.pop("ENVSYNC_TRACE", "")
    if not log or not hasattr(sys, "addaudithook"):
        return
    import stat
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK
    fd = os.open(log, flags, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError("envsync: the trace is not a regular file: " + log)
    write, fspath, abspath, fsdecode = os.write, os.fspath, os.path.abspath, os.fsdecode
    changing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    def note(path, moved=False):
        if isinstance(path, int):
            return
        path = fspath(path)
        if isinstance(path, bytes):
            path = fsdecode(path)
        line = {"moved": abspath(path)} if moved else abspath(path)
        write(fd, (json.dumps(line) + "\n").encode())
    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            if mode is not None:
                if any(c in mode for c in "wax+"):
                    note(path)
            elif flags & changing:
                note(path)
        elif event == "os.mkdir":
            note(args[0])
        elif event == "os.rename":
            note(args[1], moved=True)
        elif event in ("os.symlink", "os.link"):
            note(args[1])
    sys.addaudithook(hook)
_envsync_trace()
del _envsync_trace
import runpy
del sys.argv[1]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
"""


def traced_argv(argv: list[str]) -> list[str] | None:
    """`python -m pip ARGS` as the traced pip (None: not a pip this can trace)."""
    if len(argv) >= 3 and argv[1:3] == ["-m", "pip"]:
        return [argv[0], "-c", TRACER, "pip", *argv[3:]]
    return None


def append(path: str, lines: Iterable[object]) -> None:
    """JSON lines appended to one of the backup's lists, on disk before this returns."""
    data = "".join(json.dumps(line) + "\n" for line in lines)
    if not data:
        return
    from .paths import open_log

    fd = open_log(path)
    try:
        os.write(fd, data.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def note_writes(where: str | None, paths: Iterable[str]) -> None:
    """The agent's own writes in an apply, noted before they are made."""
    if where:
        append(os.path.join(where, WROTE), list(paths))


def read_lines(path: str) -> list[Any]:
    """The lines of a backup's list (a torn last line, from a kill, is left out)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def written(where: str) -> tuple[set[str], set[str], bool]:
    """The paths this apply's installers and agent noted before writing them, those among
    them they moved something to (a folder moved holds what they moved), and whether that
    is all of them (False: an installer ran that cannot be traced, e.g. uv)."""
    lines = read_lines(os.path.join(where, WROTE))
    moved = {str(p["moved"]) for p in lines if isinstance(p, dict) and "moved" in p}
    paths = {p for p in lines if isinstance(p, str)} | moved
    started = [e for e in read_lines(os.path.join(where, INSTALLERS)) if isinstance(e, dict)]
    tracing = any(isinstance(p, dict) and "tracing" in p for p in lines)
    complete = tracing and all(e.get("traced", True) for e in started if "mark" in e)
    return paths, moved, complete


def start_tracing(where: str) -> None:
    """A new backup's list of writes, begun (a backup without one, of an older envsync,
    traced nothing: its rollback keeps the old rule)."""
    append(os.path.join(where, WROTE), [{"tracing": 1}])


def tie(parent: int) -> Callable[[], None]:
    """What the installer's child runs before exec: die with the agent (Linux's
    PR_SET_PDEATHSIG, through ctypes where it can be loaded), and not start at all when
    the agent is gone already."""
    prctl = None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        prctl = None

    def child() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return child


def run_installer(argv: list[str], where: str | None) -> RunReply:
    """Run a step's command (the installer) to its end; with a backup, marked, traced and
    recorded in it first."""
    import secrets
    import subprocess

    env = dict(os.environ)
    mark = secrets.token_hex(12)
    env[MARK] = mark
    command = argv
    if where is not None:
        traced = traced_argv(argv)
        if traced is not None:
            command = traced
            env[TRACE] = os.path.join(where, WROTE)
        append(os.path.join(where, INSTALLERS), [{"mark": mark, "traced": traced is not None}])
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
            preexec_fn=tie(os.getpid()),
        )
    except OSError as e:
        why = e.strerror or e
        raise Failure("not-found", f"cannot run {argv[0]}: {why}") from None
    out, err = proc.communicate()
    if where is not None:
        append(os.path.join(where, INSTALLERS), [{"ended": mark, "returncode": proc.returncode}])
    return {
        "returncode": proc.returncode,
        "stdout": out[-65536:].decode("utf-8", "replace"),
        "stderr": err[-65536:].decode("utf-8", "replace"),
    }


def op_run(op: RunRequest) -> RunReply:
    """Run a step's command (its pip) here, so that the lock knows it is running; with the
    apply's backup id, as that apply's installer (marked, tied, traced)."""
    where = None
    if op.get("id") is not None:
        where = backup_dir(op["id"])
        if not os.path.isdir(where):
            raise Failure("no-backup", "no backup {} in this environment".format(op["id"]))
    return run_installer([str(a) for a in op["argv"]], where)


def marked(marks: set[str]) -> list[int]:
    """The live processes (zombies are dead) that carry one of these installer marks."""
    wants = [f"{MARK}={m}\0".encode() for m in marks]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = b"\0" + f.read()
        except (OSError, IndexError):
            continue
        if any(b"\0" + want in environ for want in wants):
            found.append(int(entry))
    return sorted(found)


def quiesce(where: str) -> int:
    """Before a rollback changes anything: no installer of this apply is alive (each one
    still running, and everything under it, is killed and waited for); how many were."""
    marks = {
        str(e["mark"])
        for e in read_lines(os.path.join(where, INSTALLERS))
        if isinstance(e, dict) and "mark" in e
    }
    if not marks or not os.path.isdir("/proc"):
        return 0
    killed: set[int] = set()
    deadline = time.time() + QUIESCE_SECONDS
    while True:
        alive = marked(marks)
        if not alive:
            return len(killed)
        if time.time() > deadline:
            name = os.path.basename(where)
            raise Failure(
                "installer-alive",
                f"the installer of {name} is still running (pid {alive[0]}) and does not "
                "end; nothing was restored",
            )
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                continue
        time.sleep(0.02)
