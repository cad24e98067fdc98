"""torch's build facts that only importing it tells: its CUDA arch list, cuDNN and NCCL.

Run alone, in a child interpreter of the probe (`--deep`): its source is the -c program,
so it imports nothing of the package. Prints one JSON object.
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def facts() -> dict[str, Any]:
    import importlib

    torch = importlib.import_module("torch")

    out: dict[str, Any] = {}

    def get(key: str, fn: Callable[[], Any]) -> None:
        try:
            out[key] = fn()
        except Exception as e:  # any failure of torch's is the fact: unavailable, and why
            out[key] = {"unavailable": f"{type(e).__name__}: {e}"}

    def arch() -> list[str]:
        flags = getattr(torch._C, "_cuda_getArchFlags", lambda: None)()
        if flags is None:
            return list(torch.cuda.get_arch_list())
        return flags.split() if isinstance(flags, str) else list(flags)

    def cudnn() -> str | dict[str, str]:
        v = torch.backends.cudnn.version()
        if v is None:
            return {"unavailable": "torch has no cuDNN"}
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else str(v)

    def nccl() -> str:
        v = torch.cuda.nccl.version()
        return ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)

    get("arch_list", arch)
    get("cudnn", cudnn)
    get("nccl", nccl)
    return out


if __name__ == "__main__":
    if sys.path[:1] == [""]:
        sys.path.pop(0)  # a torch.py in the current directory is not torch
    print(json.dumps(facts()))
