"""The real side of the precision harness: load shared objects for real, record every dlopen.

Run by an environment's own interpreter with a JSON list of {"module": dotted name or
null, "path": file}. Each module is imported (its parents first, as Python does); a file
no import loaded is then opened with ctypes.CDLL (RTLD_NOW). Every native load the process
makes through Python (an extension module's import, a ctypes.CDLL, whoever asks) is
recorded in order: the path, the dlopen flags, whether dlopen succeeded (the object is
mapped after the call) and the loader's message, and which files it mapped. Prints one
JSON document. Stdlib only: it runs inside the environment it measures.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.machinery
import json
import os
import sys
from typing import cast

EVENTS: list[dict[str, object]] = []  # in the order the loads began
OPEN: list[dict[str, object]] = []  # the loads under way (an import inside an extension's init)


def mapped() -> set[str]:
    """The files mapped into this process (as the kernel names them: resolved paths)."""
    out = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                out.add(parts[5].rstrip("\n").replace(" (deleted)", ""))
    return out


def begin(kind: str, name: str | None, path: str, flags: int) -> dict[str, object]:
    """A load that starts now: recorded in order before the loads its module's init makes."""
    event: dict[str, object] = {"kind": kind, "name": name, "path": path, "flags": flags}
    event["before"] = mapped()
    EVENTS.append(event)
    OPEN.append(event)
    return event


def end(event: dict[str, object], error: BaseException | None) -> None:
    """The load's outcome: dlopen worked when the object is mapped after it; the files it
    mapped are those mapped since it began, less what the loads inside it mapped."""
    OPEN.remove(event)
    after = mapped()
    inner: set[str] = set()
    for other in EVENTS[EVENTS.index(event) + 1 :]:
        inner |= set(cast("list[str]", other.get("new", ())))
    before: set[str] = event.pop("before")  # type: ignore[assignment]  # begin() stores the set of mapped files under "before" in the event's dict[str, object]
    event["error"] = None if error is None else str(error)
    event["error_type"] = None if error is None else type(error).__name__
    event["loaded"] = os.path.realpath(str(event["path"])) in after
    event["new"] = sorted(after - before - inner)


def hook_imports() -> None:
    original = importlib.machinery.ExtensionFileLoader.create_module

    def create_module(self, spec):
        event = begin("import", spec.name, spec.origin, sys.getdlopenflags())
        try:
            module = original(self, spec)
        except BaseException as e:
            end(event, e)
            raise
        end(event, None)
        return module

    importlib.machinery.ExtensionFileLoader.create_module = create_module  # type: ignore[method-assign]  # the worker replaces the loader's method to see every extension module's dlopen


def hook_ctypes() -> None:
    original = ctypes.CDLL.__init__

    def init(self, name, mode=ctypes.DEFAULT_MODE, *args, **kwargs):
        if name is None:
            return original(self, name, mode, *args, **kwargs)
        event = begin("ctypes", None, os.fspath(name), mode | os.RTLD_NOW)
        try:
            original(self, name, mode, *args, **kwargs)
        except OSError as e:
            end(event, e)
            raise
        end(event, None)
        return None

    ctypes.CDLL.__init__ = init  # type: ignore[method-assign]  # the worker replaces CDLL.__init__ to see every ctypes dlopen


def main() -> int:
    items = json.loads(sys.argv[1])
    hook_imports()
    hook_ctypes()
    initial = sorted(mapped())
    python_errors = []
    for item in items:
        if item["module"]:
            try:
                importlib.import_module(item["module"])
            except BaseException as e:
                python_errors.append(
                    {"module": item["module"], "error": f"{type(e).__name__}: {e}"}
                )
        if os.path.realpath(item["path"]) not in mapped():
            with contextlib.suppress(OSError):
                ctypes.CDLL(item["path"])
    print(json.dumps({"initial": initial, "events": EVENTS, "python_errors": python_errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
