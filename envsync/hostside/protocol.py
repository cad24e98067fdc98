"""The contract between envsync and the host-side programs: their names, operations, markers.

envsync builds each command from these names and reads each answer by these markers; the
programs dispatch on them (the agent's table in agent/ops.py is keyed by OPS).
"""

from __future__ import annotations

# The programs the bootstrap runs: modules of the package, each with a main(args, digest,
# cache folder).
COLLECT = "collect"  # the probe: the facts of a snapshot
AGENT = "agent.ops"  # the agent: one operation that changes the host
IMPORT_CHECK = "importcheck"  # the real-import check of the startup modules
PIP_CONFIG = "pipconfig"  # the host pip's wheel tags and index configuration
NATIVE_QUERY = "nativequery"  # which of the host's files define some symbols
REACH = "reach"  # reachability by demand: how surely startup runs some modules
FOLLOW = "follow"  # calls made at import, followed across modules toward some imports

# The agent's operations: argv carries one JSON object {"op": NAME, ...}; archives travel
# on stdin (unpack) and stdout (pack); the answer is one JSON object on stdout's last line.
BACKUP = "backup"  # {id, dists: [names], files: [abs paths]}: save what a plan will change
JOURNAL = "journal"  # {id, event, state?}: append to the backup's journal
RESTORE = "restore"  # {id | "latest", force?}: every path back as the record says it was
BACKUPS = "backups"  # {}: this environment's backups, their states
PACK = "pack"  # {root, files} | {dist} | {paths: {key: abs}}: a tar of files (with sha256)
UNPACK = "unpack"  # {root, remove} | {paths, remove} + a tar on stdin: write, then verify
REMOVE_DIST = "remove-dist"  # {name, id}: uninstall its own files, as backup id recorded
SET_SERVICE = "set-service"  # {flags} | {crash}: keep the service's flags, its last crash
WRITE = "write"  # {path, text}: a file of envsync's own, atomically, in the backup folder
START = "start"  # {name, argv, env, cwd, port}: the service as a plain process
STOP = "stop"  # {name, grace?}
WATCH = "watch"  # {name, offset}: alive, and its log since offset
WRITE_DROPIN = "write-dropin"  # {path, text}: a systemd drop-in (the previous one kept)
RUN = "run"  # {argv}: a command (pip) as a step, so that the lock knows it runs
HOLD = "hold"  # {token, who, wait}: take the lock, keep it while the client is alive
LOCKED = "locked"  # {token}: has that hold taken it
UNLOCK = "unlock"  # {token}: release it
OPS = (
    BACKUP,
    JOURNAL,
    RESTORE,
    BACKUPS,
    PACK,
    UNPACK,
    REMOVE_DIST,
    SET_SERVICE,
    WRITE,
    START,
    STOP,
    WATCH,
    WRITE_DROPIN,
    RUN,
    HOLD,
    LOCKED,
    UNLOCK,
)
# Not done under the lock an operation may carry: the lock's own, and reads.
UNLOCKED_OPS = frozenset([HOLD, LOCKED, UNLOCK, PACK, WATCH, BACKUPS])

# A failure the agent foresees: this marker and {"kind", "message"} on stderr's last
# line, exit code 2.
ERROR_MARKER = "@@envsync-agent-error@@"
# The import check's outcome line: this marker, the run's nonce (the first line of the
# program's stdin) and a space, then the outcome, on a stdout that only the program writes.
IMPORT_CHECK_MARKER = "@@envsync-import-check@@"
# The native query's answer line.
NATIVE_QUERY_MARKER = "@@envsync-native-query@@"
REACH_MARKER = "@@envsync-reach@@"
FOLLOW_MARKER = "@@envsync-follow@@"

# The wire's types, for the type checker only (they cost nothing on the host): for each
# operation NAME, NameRequest (argv's object less "op" and "lock") and NameReply (its
# answer). tests/hostside/test_wire.py checks that every operation has both, and that the agent's
# handlers and envsync's client (runner/agent.py) are written against them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, TypedDict

    class Claim(TypedDict):
        dist: str
        message: str

    class _BackupRequestOptional(TypedDict, total=False):
        summary: str

    class BackupRequest(_BackupRequestOptional):
        id: str
        dists: list[str]
        files: list[str]

    class BackupReply(TypedDict):
        backup: str  # the backup's folder
        saved: int
        notes: list[str]
        claims: list[Claim]

    class _JournalRequestOptional(TypedDict, total=False):
        state: str

    class JournalRequest(_JournalRequestOptional):
        id: str
        event: str

    class JournalReply(TypedDict):
        pass

    class RestoreRequest(TypedDict, total=False):
        id: str  # a backup's id, or "latest"
        force: bool

    class RestoreReply(TypedDict):
        backup: str
        dists: list[str]
        already: bool
        changed: int
        found: list[str]

    class BackupsRequest(TypedDict):
        pass

    class BackupEntry(TypedDict, total=False):
        id: str
        created: str
        state: str  # applying | applied | restoring | rolled-back | old | damaged
        summary: str
        dists: list[str]
        files: int

    class BackupsReply(TypedDict):
        backups: list[BackupEntry]

    class PackRequest(TypedDict, total=False):
        root: str
        files: list[str]
        dist: str
        paths: dict[str, str]  # key -> absolute path

    PackReply = bytes  # a tar of the files on stdout, not JSON

    class UnpackRequest(TypedDict, total=False):
        root: str
        paths: dict[str, str]
        remove: list[str]
        id: str | None

    class UnpackReply(TypedDict):
        written: list[str]

    class RemoveDistRequest(TypedDict):
        name: str
        id: str

    class RemoveDistReply(TypedDict):
        removed: int

    class SetServiceRequest(TypedDict, total=False):
        flags: dict[str, str] | None  # None: forget them
        crash: dict[str, object] | None  # model.Crash as data

    class SetServiceReply(TypedDict):
        pass

    class WriteRequest(TypedDict):
        path: str
        text: str

    class WriteReply(TypedDict):
        pass

    class _StartRequestOptional(TypedDict, total=False):
        env: dict[str, str]
        cwd: str | None
        port: int | None

    class StartRequest(_StartRequestOptional):
        name: str
        argv: list[str]

    class StartReply(TypedDict):
        pid: int
        log: str
        started: float

    class _StopRequestOptional(TypedDict, total=False):
        grace: float

    class StopRequest(_StopRequestOptional):
        name: str

    class StopReply(TypedDict):
        stopped: int | None  # the pid it had

    class _WatchRequestOptional(TypedDict, total=False):
        offset: int

    class WatchRequest(_WatchRequestOptional):
        name: str

    class WatchReply(TypedDict):
        pid: int | None
        alive: bool
        processes: list[int]
        log: str
        offset: int

    class WriteDropinRequest(TypedDict):
        path: str
        text: str

    class WriteDropinReply(TypedDict):
        backup: str | None  # where the previous drop-in was kept

    class _RunRequestOptional(TypedDict, total=False):
        id: str | None

    class RunRequest(_RunRequestOptional):
        argv: list[str]

    class RunReply(TypedDict):
        returncode: int
        stdout: str
        stderr: str

    class Holder(TypedDict, total=False):
        host: str | None
        pid: int | None
        command: str | None
        since: str | None
        damaged: bool

    class _HoldRequestOptional(TypedDict, total=False):
        wait: float

    class HoldRequest(_HoldRequestOptional):
        token: str
        who: Holder

    class HoldReply(TypedDict, total=False):
        acquired: bool  # False: refused, with who, busy and waited
        who: Holder
        busy: list[int]
        waited: float
        held: bool  # the hold ended: released by its command (True) or its command gone

    class LockedRequest(TypedDict):
        token: str

    class LockedReply(TypedDict):
        ours: bool
        stale: Holder | None  # the holder of a stale lock it took over

    class _UnlockRequestOptional(TypedDict, total=False):
        why: str

    class UnlockRequest(_UnlockRequestOptional):
        token: str

    class UnlockReply(TypedDict):
        released: bool

    class AgentError(TypedDict):  # after ERROR_MARKER on stderr's last line
        kind: str
        message: str

    # The native query (nativequery.py): argv's object, and the answer after its marker.
    class NativeQueryRequest(TypedDict):
        files: list[str]  # the lookup scope, in order
        symbols: list[str]

    NativeQueryAnswer = Dict[str, str]  # symbol -> the first of files that defines it

    # The probe's document (collect.py): the facts of a snapshot, one part a key. What is
    # inside a part is the snapshot model's (envsync/model/environment.py, decoded by
    # envsync/model/codec.py).
    # protocol.py stays a leaf: the host's own classes in a part are named, not imported.
    Part = Dict[str, Any]  # one part's facts, as envsync's model decodes them

    class _ProbeFactsLater(TypedDict, total=False):
        native: Part | None  # judged from the startup graph, once it is read
        service_flags: dict[str, str] | None
        crash: Part | None
        packs: object  # share.Share: the facts envsync may give back; sent as its header
        duration_s: float

    class ProbeFacts(_ProbeFactsLater):
        schema_version: int
        host: str
        source: str  # "probe"
        collected_at: str
        interpreter: Part
        distributions: list[Part]
        broken: list[dict[str, str]]  # metadata folders that could not be read
        watch: list[str]
        torch: Part | None
        nccl: Part | None
        gpu: Part
        system: Part
        env: dict[str, str]
        startup: object  # graphcache.RawJSON | None: the graph, its modules on a line apart
        installers: Part
        model: Part | None
