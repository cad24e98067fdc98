"""The host's pip as envsync's locks need it: the wheel tags it accepts, its default index,
and `pip config list` (configuration files and PIP_* variables alike).

Run with the host's own interpreter and its own pip (pip's internals are what decides
there); one JSON object on stdout, `error` set when pip cannot tell.
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def pip_facts() -> dict[str, Any]:
    out: dict[str, Any] = {"tags": [], "default": None, "config": [], "error": None}
    try:
        import subprocess

        from pip._internal.models.index import PyPI
        from pip._vendor.packaging.tags import sys_tags

        out["tags"] = [str(t) for t in sys_tags()]
        out["default"] = PyPI.simple_url
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
        )
        out["config"] = listed.stdout.splitlines()
    except Exception as e:  # whatever pip raises: the host cannot tell, and why
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def main(args: list[str], digest: str, cache: str | None) -> int:
    sys.stdout.write(json.dumps(pip_facts()))
    return 0
