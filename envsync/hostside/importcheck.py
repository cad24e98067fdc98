"""The real-import check: import the service's startup modules here, as startup would.

Ground truth where the host's stack is importable. Each module in turn, in this one
process, stopping at the first failure as startup would; the outcome line is marked
because the modules may print to stdout themselves.
"""

from __future__ import annotations

import sys

from .protocol import IMPORT_CHECK_MARKER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def check(modules: list[str]) -> list[dict[str, Any]]:
    """The outcome of importing each module, up to the first that fails."""
    import importlib
    import traceback

    out: list[dict[str, Any]] = []
    for name in modules:
        try:
            importlib.import_module(name)
            out.append({"module": name, "ok": True})
        except BaseException as e:  # whatever startup would die of: the exact exception
            tb = traceback.extract_tb(e.__traceback__)
            last = tb[-1] if tb else None
            out.append(
                {
                    "module": name,
                    "ok": False,
                    "exception": type(e).__name__,
                    "message": str(e).splitlines()[0] if str(e) else "",
                    "file": last.filename if last else None,
                    "line": last.lineno if last else None,
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
