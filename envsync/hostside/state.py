"""What envsync keeps for the service on this host, as the probe reports it."""

from __future__ import annotations

import json
import sys

from .shared import StatePaths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def service_state() -> tuple[dict[str, str] | None, dict[str, str] | None]:
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
        crash = {k: str(crash[k]) for k in ("exception", "line", "at") if crash.get(k)}
    return flags, crash
