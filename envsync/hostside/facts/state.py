"""What envsync keeps for the service on this host, as the probe reports it."""

from __future__ import annotations

import json
import sys

from ..shared import StatePaths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def service_state() -> tuple[dict[str, str] | None, dict[str, Any] | None]:
    """The launch flags of `repair`, and the crash the smoke test last saw (until the
    service next comes up ready)."""
    try:
        with open(StatePaths(sys.prefix).service, "rb") as f:
            data: Any = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    flags = data.get("flags")
    flags = {str(k): str(v) for k, v in flags.items()} if isinstance(flags, dict) else None
    crash = data.get("crash")
    if not isinstance(crash, dict) or not isinstance(crash.get("exception"), str):
        crash = None
    else:
        kept: dict[str, Any] = {
            k: str(crash[k]) for k in ("exception", "line", "at") if crash.get(k)
        }
        kept["frames"] = _frames(crash.get("frames"))
        chain = crash.get("chain")
        kept["chain"] = [
            {
                "exception": str(r["exception"]),
                "message": str(r.get("message") or ""),
                "frames": _frames(r.get("frames")),
            }
            for r in (chain if isinstance(chain, list) else [])
            if isinstance(r, dict) and isinstance(r.get("exception"), str)
        ]
        crash = kept
    return flags, crash


def _frames(value: Any) -> list[dict[str, Any]]:
    """A kept traceback's frames, as far as they are well formed (the file is ours, but
    a snapshot reader must never fail on it)."""
    out = []
    for frame in value if isinstance(value, list) else []:
        if not isinstance(frame, dict) or not isinstance(frame.get("file"), str):
            continue
        line = frame.get("line")
        out.append(
            {
                "file": frame["file"],
                "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
                "function": frame["function"] if isinstance(frame.get("function"), str) else None,
                "code": frame["code"] if isinstance(frame.get("code"), str) else None,
            }
        )
    return out
