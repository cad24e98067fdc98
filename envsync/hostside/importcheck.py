"""The real-import check: import the service's startup modules here, as startup would.

Ground truth where the host's stack is importable. Each module in turn, in this one
process, stopping at the first failure as startup would; whatever the exception (an
ImportError, a ValueError from a registry, a RuntimeError from an operator registration,
an OSError from the loader), it is reported with its frames and the exceptions that led
to it, so that envsync can tell whose code raised it.

The outcome travels on a channel of its own, whatever the imported code does to stdout:
before anything is imported, the process's stdout is kept on a descriptor of its own and
descriptor 1 is pointed at stderr, so that what the modules print (`print`, a logging
stream that took over `sys.stdout`, a child process, a `dup2` onto descriptor 1) lands
on stderr; the one outcome line is written to the kept descriptor, after a marker and
the run's nonce (read from stdin, never on the command line), which the imported code
cannot know: a line it forges is not the answer.
"""

from __future__ import annotations

import os
import sys

from .protocol import IMPORT_CHECK_MARKER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A traceback deeper than this keeps its innermost frames: where it was raised.
MAX_FRAMES = 80
MAX_CHAIN = 8
MAX_MESSAGE = 500


def _name(e: BaseException) -> str:
    kind = type(e)
    module = kind.__module__
    if module in ("builtins", "__main__"):
        return kind.__qualname__
    return module + "." + kind.__qualname__


def _message(e: BaseException) -> str:
    try:
        text = str(e)
    except Exception:  # a broken __str__ must not hide the exception itself
        text = ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[0][:MAX_MESSAGE] if lines else ""


def _frames(e: BaseException) -> list[dict[str, Any]]:
    import traceback

    out = []
    for frame in traceback.extract_tb(e.__traceback__)[-MAX_FRAMES:]:
        out.append(
            {
                "file": frame.filename,
                "line": frame.lineno,
                "function": frame.name,
                "code": (frame.line or "").strip()[:MAX_MESSAGE] or None,
            }
        )
    return out


def _chain(e: BaseException) -> list[dict[str, Any]]:
    """The exceptions that led to `e`, as Python prints them above it: each one's
    `__cause__`, else its `__context__` unless `raise ... from None` suppressed it."""
    out: list[dict[str, Any]] = []
    seen = {id(e)}
    current: BaseException | None = e
    while current is not None and len(out) < MAX_CHAIN:
        nxt = current.__cause__
        if nxt is None and not current.__suppress_context__:
            nxt = current.__context__
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        out.append({"exception": _name(nxt), "message": _message(nxt), "frames": _frames(nxt)})
        current = nxt
    return out


def check(modules: list[str]) -> list[dict[str, Any]]:
    """The outcome of importing each module, up to the first that fails."""
    import importlib

    out: list[dict[str, Any]] = []
    for name in modules:
        try:
            importlib.import_module(name)
            out.append({"module": name, "ok": True})
        except BaseException as e:  # whatever startup would die of: the exact exception
            frames = _frames(e)
            last = frames[-1] if frames else None
            out.append(
                {
                    "module": name,
                    "ok": False,
                    "exception": _name(e),
                    "message": _message(e),
                    "file": last["file"] if last else None,
                    "line": last["line"] if last else None,
                    "frames": frames,
                    "chain": _chain(e),
                }
            )
            break
    return out


def own_channel() -> int:
    """A descriptor of this process's stdout that only this program writes to: descriptor
    1 (and so `sys.stdout`, and every child's stdout) is pointed at stderr from here on.
    Where there is no stderr to point it at, descriptor 1 stays: the nonce still tells
    the answer from what the modules print."""
    import contextlib

    sys.stdout.flush()
    channel = os.dup(1)  # not inherited by the children the modules may start
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    return channel


def answer(channel: int, line: str) -> None:
    """Write `line` whole on `channel`, on a line of its own."""
    data = ("\n" + line + "\n").encode("utf-8")
    while data:
        data = data[os.write(channel, data) :]


def main(args: list[str], digest: str, cache: str | None) -> int:
    import json

    channel = own_channel()
    nonce = sys.stdin.buffer.readline().decode("ascii", "replace").strip()
    modules = json.loads(args[0])
    outcome = check([str(m) for m in modules])
    answer(channel, IMPORT_CHECK_MARKER + nonce + " " + json.dumps(outcome))
    return 0
