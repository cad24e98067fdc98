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
# The import check's outcome line (the modules it imports may print to stdout too).
IMPORT_CHECK_MARKER = "@@envsync-import-check@@"
# The native query's answer line.
NATIVE_QUERY_MARKER = "@@envsync-native-query@@"
