"""The host side shipped as one bundle: its sources, their digest, the command that runs them.

Every run on a host is one command, `python -c GUARD ARGS... HEADER BOOT`, with the bundle
framed first on stdin and the program's payload after it (envsync/hostside/boot.py reads
them). Nothing is installed on the host: the bootstrap keeps the bundle in a cache folder
keyed by its digest, so that the host's compiled bytecode is reused, or runs it from
memory where it must not write.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from envsync import hostside
from envsync.errors import CollectError
from envsync.hostside.boot import GUARD, frame
from envsync.runner.base import CommandResult
from envsync.seal import secret


@dataclass(frozen=True, slots=True, kw_only=True)
class Bundle:
    digest: str  # of the sources: it keys the host's copy and its caches of parsed facts
    blob: bytes  # zlib-compressed JSON {path inside the package: source}
    boot: str  # the bootstrap's source, run by GUARD


@cache
def bundle() -> Bundle:
    """The host side as it is shipped (deterministic: the same sources, the same bytes)."""
    root = Path(hostside.__file__).parent
    files = {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*.py"))
    }
    text = json.dumps(files, sort_keys=True, separators=(",", ":")).encode()
    return Bundle(
        digest=hashlib.sha256(text).hexdigest()[:16],
        blob=zlib.compress(text, 1),  # the fastest level: 1.5 ms here, 9 takes 20 times that
        boot=files["boot.py"],
    )


def host_argv(
    python: str, program: str, args: Sequence[str] = (), *, cache_dir: str | None = None
) -> list[str]:
    """The command that runs `program` (hostside.protocol's names) with the host's own
    interpreter; `cache_dir` is the host's cache folder (None: its default, "": none, and
    then nothing at all is written for the bundle)."""
    shipped = bundle()
    header = {"program": program, "digest": shipped.digest, "cache": cache_dir}
    head = json.dumps(header, separators=(",", ":"))
    return [python, "-c", GUARD, *args, head, shipped.boot]


def host_key() -> str | None:
    """The key a run hands the host side to seal the host's caches with: derived from
    this machine's own (envsync/seal.py), so it is never on the host's disk, and an entry
    edited or forged there is never used (None: no key here, and hosts keep nothing)."""
    key = secret()
    if key is None:
        return None
    return hmac.new(key, b"envsync host caches", hashlib.sha256).hexdigest()


def host_input(payload: bytes = b"", *, sealed: bool = True) -> bytes:
    """What the command reads on stdin: the bundle and the run's key (`sealed`: the host
    keeps caches; without, envsync makes no key either), then the program's payload (stdin,
    never the command line: other users of the host can read that)."""
    return frame(bundle().blob, host_key() if sealed else None) + payload


def marked(result: CommandResult, marker: str, host: str, what: str) -> str:
    """The text after `marker` on the last stdout line that starts with it (a program's
    answer: what it imports may print too); CollectError naming `host` and `what` ("the
    import check") when the program died before answering."""
    text = result.stdout.decode("utf-8", "replace")
    line = next((ln for ln in reversed(text.splitlines()) if ln.startswith(marker)), None)
    if line is None:
        raise CollectError(
            f"{host}: {what} died (exit {result.returncode}): {result.stderr_tail() or 'no output'}"
        )
    return line[len(marker) :]
