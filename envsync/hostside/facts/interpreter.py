"""The interpreter's facts: version, implementation, wheel tags, prefixes, sys.path."""

from __future__ import annotations

import re
import sys

from ..shared import redact_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def interpreter_facts() -> dict[str, Any]:
    import sysconfig

    impl = sys.implementation.name
    short = {"cpython": "cp", "pypy": "pp"}.get(impl, impl)
    interpreter_tag = f"{short}{sys.version_info[0]}{sys.version_info[1]}"
    soabi = sysconfig.get_config_var("SOABI") or ""
    # SOABI is e.g. cpython-311-x86_64-linux-gnu; the wheel ABI tag is cp311 (+ "t" for
    # free-threaded builds, "d" for debug builds).
    abi_tag = interpreter_tag
    match = re.match(r"cpython-(\d+)([a-z]*)", soabi)
    if match:
        abi_tag = "cp" + match.group(1) + match.group(2)
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return {
        "executable": sys.executable,
        "version": "{}.{}.{}".format(*sys.version_info[:3]),
        "implementation": impl,
        "interpreter_tag": interpreter_tag,
        "abi_tag": abi_tag,
        "platform": platform,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "sys_path": [redact_text(p) for p in sys.path],
    }
