"""The agent's program: one operation per run, dispatched by its name (protocol.OPS).

argv carries one JSON object {"op": NAME, ...}, with {"lock": token} when the operation
runs under the target's lock; binary payloads (tar archives) travel on stdin and stdout.
"""

from __future__ import annotations

import json
import sys
import time

from .. import protocol
from .backup import op_backup, op_backups, op_journal, op_remove_dist
from .failure import Failure
from .installer import op_run
from .mutex import Busy, busy_files, note_backup, op_hold, op_locked, op_unlock
from .restore import op_restore
from .service import op_set_service, op_start, op_stop, op_watch, op_write_dropin
from .transfer import op_pack, op_unpack, op_write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    # Each handler takes its operation's protocol.NameRequest and answers its NameReply;
    # the table is read with the name the JSON carried, so it holds them as one type.
    Handler = Callable[[Any], Mapping[str, object]]

# The operations that answer one JSON object (pack answers its archive, unpack reads one).
HANDLERS: dict[str, Handler] = {
    protocol.BACKUP: op_backup,
    protocol.JOURNAL: op_journal,
    protocol.RESTORE: op_restore,
    protocol.BACKUPS: op_backups,
    protocol.REMOVE_DIST: op_remove_dist,
    protocol.SET_SERVICE: op_set_service,
    protocol.WRITE: op_write,
    protocol.START: op_start,
    protocol.STOP: op_stop,
    protocol.WATCH: op_watch,
    protocol.WRITE_DROPIN: op_write_dropin,
    protocol.RUN: op_run,
    protocol.LOCKED: op_locked,
    protocol.HOLD: op_hold,
    protocol.UNLOCK: op_unlock,
}


def main(args: list[str], digest: str, cache: str | None) -> int:
    try:
        return run(json.loads(args[0]))
    except Failure as e:
        sys.stderr.write(
            protocol.ERROR_MARKER + json.dumps({"kind": e.kind, "message": e.message}) + "\n"
        )
        return 2


def run(op: dict[str, Any]) -> int:
    name = op.pop("op")
    token = op.pop("lock", None)
    if token is None:
        return dispatch(name, op)
    with Busy(token) as busy:
        if name == protocol.RESTORE:
            while busy_files(but=busy.path):  # an interrupted step of this command
                time.sleep(0.2)
        code = dispatch(name, op, token)
    return code


def dispatch(name: str, op: Any, token: str | None = None) -> int:
    """Run operation `name` on `op`, the JSON object argv carried: each handler reads it as
    its protocol.NameRequest."""
    if name == protocol.PACK:
        out = sys.stdout.buffer
        out.write(op_pack(op))
        out.flush()
        return 0
    result: Mapping[str, object]
    if name == protocol.UNPACK:
        result = op_unpack(op, sys.stdin.buffer.read())
    elif name in HANDLERS:
        result = HANDLERS[name](op)
        if name == protocol.BACKUP and token:
            note_backup(token, str(result["backup"]))
    else:
        raise Failure("bad-input", f"no operation {name!r}")
    sys.stdout.write(json.dumps(result) + "\n")
    return 0
