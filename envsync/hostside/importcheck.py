"""The real-import check: import the service's startup modules here, as startup would.

Ground truth where the host's stack is importable. Each module in turn, in this one
process, stopping at the first failure as startup would; whatever the exception (an
ImportError, a ValueError from a registry, a RuntimeError from an operator registration,
an OSError from the loader), it is reported with its frames and the exceptions that led
to it, so that envsync can tell whose code raised it. The outcome line is marked because
the modules may print to stdout themselves.
"""

from __future__ import annotations

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


def main(args: list[str], digest: str, cache: str | None) -> int:
    import json

    modules = json.loads(args[0])
    outcome = check([str(m) for m in modules])
    sys.stdout.write("\n" + IMPORT_CHECK_MARKER + json.dumps(outcome) + "\n")
    return 0
