"""The agent's client: one method per operation of the host-side agent, typed replies.

Each call is one command on the host through its runner (envsync/runner/bundle.py): the
operation as JSON in argv, archives on stdin (unpack) and stdout (pack), the answer as one
JSON object on stdout's last line. A failure the agent foresees comes back as AgentError
with its kind (the agent's own word); one it did not foresee with kind "crashed".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from envsync.errors import AgentError
from envsync.hostside import protocol
from envsync.model.codec import to_data
from envsync.model.environment import Crash
from envsync.model.inventory import HostSpec
from envsync.runner import CommandResult, Runner
from envsync.runner.bundle import host_argv, host_input

AGENT_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """A RECORD line of `dist` over another distribution's files: pip is never run on it."""

    dist: str  # normalized
    message: str  # which line, which folder, whose files


@dataclass(frozen=True, slots=True, kw_only=True)
class Backup:
    path: str  # the backup's folder on the host
    saved: int  # files saved in it
    notes: tuple[str, ...] = ()  # RECORD lines it ignored (a folder, a path outside)
    # RECORD lines that claim another distribution's files (pip would remove them)
    claims: tuple[Claim, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Restored:
    backup: str
    dists: tuple[str, ...]
    already: bool = False  # it was rolled back before: nothing was restored again
    changed: int = 0  # paths put back, removed or made again
    found: tuple[str, ...] = ()  # what appeared that the apply did not write: kept


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupInfo:
    """One backup of an environment, as `rollback --list` shows it."""

    ident: str
    created: str = ""
    state: str = ""  # applying | applied | restoring | rolled-back | old | damaged
    summary: str = ""  # the steps of the apply it was made for
    dists: tuple[str, ...] = ()
    files: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Unpacked:
    written: tuple[str, ...]  # the archive's names, each checked against its sha256


@dataclass(frozen=True, slots=True, kw_only=True)
class Started:
    pid: int
    log: str  # the service's log file on the host
    started: float  # time.time() on the host


@dataclass(frozen=True, slots=True, kw_only=True)
class Watched:
    pid: int | None
    alive: bool
    log: str  # what the service logged since the offset asked for
    offset: int  # where the next watch goes on


@dataclass(frozen=True, slots=True, kw_only=True)
class Ran:
    returncode: int
    stdout: str  # the last 64 KiB of each
    stderr: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Holder:
    """Who holds (or held) a target's lock, as its command said when it took it."""

    host: str | None = None
    pid: int | None = None
    command: str | None = None
    since: str | None = None
    damaged: bool = False  # the lock file was unreadable: nobody alive held it

    @classmethod
    def of(cls, data: object) -> Holder:
        if not isinstance(data, Mapping) or not data or data.get("damaged"):
            return cls(damaged=True)

        def text(key: str) -> str | None:
            value = data.get(key)
            return str(value) if value is not None else None

        pid = data.get("pid")
        return cls(
            host=text("host"),
            pid=pid if isinstance(pid, int) else None,
            command=text("command"),
            since=text("since"),
        )

    def data(self) -> protocol.Holder:
        return {"host": self.host, "pid": self.pid, "command": self.command, "since": self.since}


@dataclass(frozen=True, slots=True, kw_only=True)
class LockState:
    ours: bool  # the hold of this token has taken the lock
    stale: Holder | None  # the holder of the stale lock it took over, if it took one


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldRefused:
    """Another command holds the lock (after waiting as long as asked)."""

    who: Holder
    busy: tuple[int, ...]  # its agent processes still running a step
    waited: float


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldEnded:
    """The hold ended: released by its command (held), or its command was gone."""

    held: bool


def _last_words(result: CommandResult) -> str:
    """What a failed agent run said last, on one line: the exception a traceback ended
    with, or how the process ended."""
    lines = [ln.strip() for ln in result.stderr.decode("utf-8", "replace").splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(("File ", "Traceback ", "^", "~"))]
    if lines:
        return lines[-1]
    if result.returncode < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-result.returncode).name}"
        except ValueError:
            return f"killed by signal {-result.returncode}"
    return f"exit code {result.returncode}, no output"


class Agent:
    """The agent on one host, through that host's runner.

    With `lock` (the token of the target's lock, envsync/runner/mutex.py) every operation
    checks that this command still holds the lock and counts as running under it.
    """

    def __init__(self, spec: HostSpec, runner: Runner, *, lock: str | None = None) -> None:
        self.spec = spec
        self.runner = runner
        self.lock = lock

    # -- the operations -------------------------------------------------------------------
    # Each builds its protocol.NameRequest and reads its protocol.NameReply (the agent's
    # own answer, so typed as its reply; each value is still converted, for a broken host).

    def backup(
        self, ident: str, *, dists: Sequence[str], files: Sequence[str], summary: str = ""
    ) -> Backup:
        """Record (and save) what a plan will change: distributions by name, files by
        absolute path."""
        request: protocol.BackupRequest = {
            "id": ident,
            "dists": list(dists),
            "files": list(files),
            "summary": summary,
        }
        answer = cast("protocol.BackupReply", self._send(protocol.BACKUP, request))
        return Backup(
            path=str(answer["backup"]),
            saved=int(answer["saved"]),
            notes=tuple(str(n) for n in answer.get("notes") or ()),
            claims=tuple(
                Claim(dist=str(c.get("dist")), message=str(c.get("message")))
                for c in answer.get("claims") or ()
                if isinstance(c, dict)
            ),
        )

    def journal(self, ident: str, event: str, *, state: str | None = None) -> None:
        request: protocol.JournalRequest = {"id": ident, "event": event}
        if state is not None:
            request["state"] = state
        self._send(protocol.JOURNAL, request)

    def restore(self, ident: str = "latest", *, force: bool = False) -> Restored:
        """Put back what backup `ident` recorded ("latest": the newest apply not rolled
        back); refused when a path changed since the apply, unless `force`."""
        request: protocol.RestoreRequest = {"id": ident, "force": force}
        answer = cast("protocol.RestoreReply", self._send(protocol.RESTORE, request))
        return Restored(
            backup=str(answer["backup"]),
            dists=tuple(str(d) for d in answer.get("dists", [])),
            already=bool(answer.get("already")),
            changed=int(answer.get("changed") or 0),
            found=tuple(str(f) for f in answer.get("found") or ()),
        )

    def backups(self) -> tuple[BackupInfo, ...]:
        request: protocol.BackupsRequest = {}
        answer = cast("protocol.BackupsReply", self._send(protocol.BACKUPS, request))
        out = []
        for item in answer.get("backups") or []:
            if not isinstance(item, dict):
                continue
            dists = item.get("dists")
            out.append(
                BackupInfo(
                    ident=str(item.get("id")),
                    created=str(item.get("created") or ""),
                    state=str(item.get("state") or ""),
                    summary=str(item.get("summary") or ""),
                    dists=tuple(str(d) for d in dists) if isinstance(dists, list) else (),
                    files=int(item.get("files") or 0),
                )
            )
        return tuple(out)

    def pack_dist(self, dist: str) -> bytes:
        """A tar of an installed distribution's files (per its RECORD)."""
        request: protocol.PackRequest = {"root": "", "dist": dist}
        return self._send_raw(protocol.PACK, request).stdout

    def pack_paths(self, paths: Mapping[str, str]) -> bytes:
        """A tar of files named by key: {key: absolute path here}."""
        request: protocol.PackRequest = {"paths": dict(paths)}
        return self._send_raw(protocol.PACK, request).stdout

    def unpack(self, root: str, archive: bytes, *, ident: str | None = None) -> Unpacked:
        """Write an archive's files under `root` (a package directory; "purelib"); with
        the apply's backup `ident`, noted there as the apply's writes first."""
        request: protocol.UnpackRequest = {"root": root, "id": ident}
        return self._unpacked(
            cast("protocol.UnpackReply", self._send(protocol.UNPACK, request, archive))
        )

    def unpack_paths(
        self,
        paths: Mapping[str, str],
        archive: bytes,
        *,
        remove: Sequence[str] = (),
        ident: str | None = None,
    ) -> Unpacked:
        """Write each archived key to its own path; delete `remove` (absolute paths)."""
        request: protocol.UnpackRequest = {
            "paths": dict(paths),
            "remove": list(remove),
            "id": ident,
        }
        return self._unpacked(
            cast("protocol.UnpackReply", self._send(protocol.UNPACK, request, archive))
        )

    def remove_dist(self, name: str, ident: str) -> int:
        """Uninstall a distribution's own files, as backup `ident` recorded them; how many
        were removed."""
        request: protocol.RemoveDistRequest = {"name": name, "id": ident}
        answer = cast("protocol.RemoveDistReply", self._send(protocol.REMOVE_DIST, request))
        return int(answer["removed"])

    def set_flags(self, flags: Mapping[str, str]) -> None:
        """Keep the service's launch flags on the host."""
        request: protocol.SetServiceRequest = {"flags": dict(flags)}
        self._send(protocol.SET_SERVICE, request)

    def set_crash(self, crash: Crash | None) -> None:
        """Keep the crash the smoke test saw (None: forget it, the service came up)."""
        request: protocol.SetServiceRequest = {"crash": to_data(crash) if crash else None}
        self._send(protocol.SET_SERVICE, request)

    def write(self, path: str, text: str) -> None:
        """A file of envsync's own, in this environment's backup folder."""
        request: protocol.WriteRequest = {"path": path, "text": text}
        self._send(protocol.WRITE, request)

    def start(
        self,
        *,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str | None,
        port: int | None,
    ) -> Started:
        """(Re)start the service as a plain process in its own session, logging to a file."""
        request: protocol.StartRequest = {
            "name": name,
            "argv": list(argv),
            "env": dict(env),
            "cwd": cwd,
            "port": port,
        }
        answer = cast("protocol.StartReply", self._send(protocol.START, request))
        return Started(
            pid=int(answer["pid"]), log=str(answer["log"]), started=float(answer["started"])
        )

    def stop(self, name: str) -> int | None:
        """Stop the plain-process service `name`: the pid it had (None: it was not running)."""
        request: protocol.StopRequest = {"name": name}
        answer = cast("protocol.StopReply", self._send(protocol.STOP, request))
        stopped = answer.get("stopped")
        return stopped if isinstance(stopped, int) else None

    def watch(self, name: str, offset: int) -> Watched:
        request: protocol.WatchRequest = {"name": name, "offset": offset}
        answer = cast("protocol.WatchReply", self._send(protocol.WATCH, request))
        pid = answer.get("pid")
        return Watched(
            pid=pid if isinstance(pid, int) else None,
            alive=bool(answer["alive"]),
            log=str(answer["log"]),
            offset=int(answer["offset"]),
        )

    def write_dropin(self, path: str, text: str) -> str | None:
        """Write a systemd drop-in; where the previous one was kept (None: there was none)."""
        request: protocol.WriteDropinRequest = {"path": path, "text": text}
        answer = cast("protocol.WriteDropinReply", self._send(protocol.WRITE_DROPIN, request))
        saved = answer.get("backup")
        return str(saved) if saved is not None else None

    def run(
        self, argv: Sequence[str], *, ident: str | None = None, timeout: float = AGENT_TIMEOUT
    ) -> Ran:
        """Run a command (a step's pip) through the agent, so that the lock knows it runs;
        with the apply's backup `ident`, as its installer: in a process group tied to the
        agent, recorded in the backup, its writes traced there."""
        request: protocol.RunRequest = {"argv": list(argv), "id": ident}
        answer = cast("protocol.RunReply", self._send(protocol.RUN, request, timeout=timeout))
        return Ran(
            returncode=int(answer["returncode"]),
            stdout=str(answer["stdout"]),
            stderr=str(answer["stderr"]),
        )

    def hold(
        self, token: str, who: Holder, *, wait: float, timeout: float
    ) -> HoldRefused | HoldEnded:
        """Take the target's lock and keep it while this command lives (this call returns
        when the lock is released, or at once when another holds it)."""
        request: protocol.HoldRequest = {"token": token, "who": who.data(), "wait": wait}
        out = self._send_raw(protocol.HOLD, request, timeout=timeout).stdout
        # A heartbeat of dots while it holds, then its answer.
        lines = out.decode("utf-8", "replace").strip().strip(".").splitlines()
        answer = cast("protocol.HoldReply", self._answer(protocol.HOLD, lines[-1:]))
        if answer.get("acquired") is False:
            busy = answer.get("busy") or []
            return HoldRefused(
                who=Holder.of(answer.get("who")),
                busy=tuple(int(p) for p in busy),
                waited=float(answer.get("waited") or 0),
            )
        return HoldEnded(held=bool(answer.get("held")))

    def locked(self, token: str) -> LockState:
        request: protocol.LockedRequest = {"token": token}
        answer = cast("protocol.LockedReply", self._send(protocol.LOCKED, request))
        stale = answer.get("stale")
        return LockState(
            ours=bool(answer.get("ours")), stale=Holder.of(stale) if stale is not None else None
        )

    def unlock(self, token: str) -> bool:
        """Release the lock (an apply under it that did not finish is undone first)."""
        request: protocol.UnlockRequest = {"token": token}
        answer = cast("protocol.UnlockReply", self._send(protocol.UNLOCK, request))
        return bool(answer.get("released"))

    # -- the wire -------------------------------------------------------------------------

    def _send(
        self,
        name: str,
        request: Mapping[str, object],
        payload: bytes | None = None,
        *,
        timeout: float = AGENT_TIMEOUT,
    ) -> dict[str, object]:
        """Operation `name` with its protocol.NameRequest; its JSON answer."""
        return self.call({"op": name, **request}, payload, timeout=timeout)

    def _send_raw(
        self, name: str, request: Mapping[str, object], *, timeout: float = AGENT_TIMEOUT
    ) -> CommandResult:
        """Operation `name` with its request, answered on stdout as it is (pack, hold)."""
        return self.raw({"op": name, **request}, timeout=timeout)

    def argv(self, op: Mapping[str, object]) -> list[str]:
        if self.lock is not None and op["op"] not in protocol.UNLOCKED_OPS:
            op = {**op, "lock": self.lock}
        return host_argv(self.spec.python, protocol.AGENT, [json.dumps(op)])

    def raw(
        self,
        op: Mapping[str, object],
        payload: bytes | None = None,
        *,
        timeout: float = AGENT_TIMEOUT,
    ) -> CommandResult:
        """Run one operation as it is (crafted ones too); its result, or AgentError."""
        result = self.runner.run(self.argv(op), input=host_input(payload or b""), timeout=timeout)
        if result.returncode != 0:
            text = result.stderr.decode("utf-8", "replace")
            marked = next(
                (ln for ln in reversed(text.splitlines()) if ln.startswith(protocol.ERROR_MARKER)),
                None,
            )
            if marked is not None:
                try:
                    error = json.loads(marked[len(protocol.ERROR_MARKER) :])
                    kind, message = str(error["kind"]), str(error["message"])
                    raise AgentError(f"{self.spec.name}: {op['op']}: {message}", kind=kind)
                except (ValueError, KeyError, TypeError):
                    pass
            raise AgentError(
                f"{self.spec.name}: {op['op']}: the host agent failed: {_last_words(result)}",
                kind="crashed",
                tip=f"check the host with `envsync snapshot {self.spec.name}`; a failure "
                "that repeats is a bug of envsync's: report it with this line",
            )
        return result

    def call(
        self,
        op: Mapping[str, object],
        payload: bytes | None = None,
        *,
        timeout: float = AGENT_TIMEOUT,
    ) -> dict[str, object]:
        """One operation as it is (crafted ones too) and its JSON answer."""
        stdout = self.raw(op, payload, timeout=timeout).stdout
        lines = stdout.decode("utf-8", "replace").strip().splitlines()
        return self._answer(str(op["op"]), lines[-1:])

    def _answer(self, name: str, last: list[str]) -> dict[str, object]:
        answer: object
        try:
            answer = json.loads(last[0]) if last else {}
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            raise AgentError(
                f"{self.spec.name}: {name}: the agent answered no JSON object", kind="crashed"
            )
        return answer

    @staticmethod
    def _unpacked(answer: protocol.UnpackReply) -> Unpacked:
        return Unpacked(written=tuple(str(w) for w in answer.get("written", [])))
