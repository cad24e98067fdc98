"""Facts of the machine around the environment: torch's build, GPUs and driver, the
system, selected environment variables, and the installers the interpreter can run."""

from __future__ import annotations

import json
import os
import re
import sys

from ..shared import redact_env
from .files import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..graph.finder import ModuleFinder

NVIDIA_SMI_TIMEOUT = 20
DEEP_TIMEOUT = 180
TORCH_KEYS = {"__version__": "version", "cuda": "cuda", "git_version": "git_version", "hip": "hip"}
GPU_QUERY = "index,name,compute_cap,driver_version,memory.total"
CUDA_VERSION = re.compile(r"CUDA Version:\s*([0-9.]+)")


def torch_facts(paths: list[str], deep: bool) -> dict[str, Any] | None:
    """torch's version, CUDA and git version from torch/version.py, without importing it."""
    import ast

    from ..graph.astutil import assignments

    for location in paths:
        version_py = os.path.join(location or ".", "torch", "version.py")
        if location and os.path.isfile(version_py):
            break
    else:
        return None
    try:
        tree = ast.parse(read_text(version_py))
    except (OSError, SyntaxError) as e:
        return {"unavailable": f"cannot read {version_py}: {e}"}
    facts: dict[str, Any] = {"location": location}
    for target, value in assignments(tree):
        if target in TORCH_KEYS:
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                continue
            if literal is None or isinstance(literal, str):
                facts[TORCH_KEYS[target]] = literal
    if "version" not in facts:
        return {"unavailable": f"{version_py} has no __version__"}
    if deep:
        facts.update(torch_deep())
    return facts


def torch_deep() -> dict[str, Any]:
    """torchdeep.py's facts, from a child interpreter that imports torch."""
    import subprocess

    from . import torchdeep

    source = getattr(torchdeep.__loader__, "get_source")(torchdeep.__name__)  # noqa: B009
    try:
        proc = subprocess.run(
            [sys.executable, "-c", source],
            capture_output=True,
            timeout=DEEP_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        why = {"unavailable": f"importing torch took over {DEEP_TIMEOUT}s"}
        return {"arch_list": why, "cudnn": why, "nccl": why}
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        why = {"unavailable": f"import torch failed: {tail[0]}"}
        return {"arch_list": why, "cudnn": why, "nccl": why}
    out = json.loads(proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    return out if isinstance(out, dict) else {}


def parse_gpu_csv(text: str) -> list[dict[str, Any]]:
    """nvidia-smi's --query-gpu CSV (noheader, nounits): one dict per GPU."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 5:
            raise ValueError(f"unexpected nvidia-smi line {line!r}")

        def value(cell: str) -> str | None:
            return None if cell in ("", "[N/A]", "N/A", "[Not Supported]") else cell

        memory = value(cells[4])
        gpus.append(
            {
                "index": int(cells[0]),
                "name": cells[1],
                "compute_capability": value(cells[2]),
                "driver_version": value(cells[3]),
                "memory_mib": int(float(memory)) if memory else None,
            }
        )
    return gpus


def parse_cuda_version(text: str) -> str | None:
    """The highest CUDA version the driver supports, from nvidia-smi's banner."""
    match = CUDA_VERSION.search(text)
    return match.group(1) if match else None


def run_tool(argv: list[str]) -> str:
    import subprocess

    try:
        proc = subprocess.run(argv, capture_output=True, timeout=NVIDIA_SMI_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{argv[0]} did not answer within {NVIDIA_SMI_TIMEOUT}s") from None
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {err[0] if err else 'no output'}")
    return proc.stdout.decode("utf-8", "replace")


def which(name: str) -> str | None:
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(directory or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def gpu_facts() -> dict[str, Any]:
    smi = which("nvidia-smi")
    if not smi:
        return {"unavailable": "nvidia-smi not found on PATH"}
    try:
        gpus = parse_gpu_csv(
            run_tool([smi, "--query-gpu=" + GPU_QUERY, "--format=csv,noheader,nounits"])
        )
        cuda = parse_cuda_version(run_tool([smi]))
    except (OSError, RuntimeError, ValueError) as e:
        return {"unavailable": str(e)}
    drivers = sorted({g["driver_version"] for g in gpus if g["driver_version"]})
    return {
        "gpus": gpus,
        "driver_version": drivers[0] if len(drivers) == 1 else (", ".join(drivers) or None),
        "cuda_driver_version": cuda,
    }


def os_release() -> str | None:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = read_text(path)
        except OSError:
            continue
        fields = {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                fields[key.strip()] = value.strip().strip("\"'")
        return fields.get("PRETTY_NAME") or fields.get("NAME") or "unknown"
    return None


def glibc_version() -> str | None:
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        return None
    return found.split()[-1] if found else None


def system_facts() -> dict[str, Any]:
    uname = os.uname()
    return {
        "os": os_release() or (f"{uname.sysname} {uname.release}"),
        "kernel": uname.release,
        "machine": uname.machine,
        "glibc": glibc_version(),
        "hostname": uname.nodename,
        "machine_id": machine_id(),
    }


MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def machine_id() -> str | None:
    """Which machine this is, as an app-specific digest of its id (systemd's advice: the id
    itself is not to be shown), from the first of MACHINE_ID_FILES that holds one; None
    where none can be read (a minimal container): the host is then known by its address."""
    import hashlib
    import hmac

    for path in MACHINE_ID_FILES:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                raw = os.read(fd, 256).strip()
            finally:
                os.close(fd)
        except OSError:
            continue
        if raw:
            return hmac.new(raw, b"envsync host identity", hashlib.sha256).hexdigest()[:16]
    return None


def installer_facts(finder: ModuleFinder) -> dict[str, Any]:
    """Whether the interpreter can run pip, and where uv is: how envsync may install here."""
    found = finder.find("pip")
    uv = which("uv")
    if uv is None:  # `pip install uv` puts it beside the interpreter, maybe not on PATH
        beside = os.path.join(os.path.dirname(sys.executable), "uv")
        uv = beside if os.access(beside, os.X_OK) else None
    return {"pip": found[1] if found and found[1] else None, "uv": uv}


def env_facts(patterns: list[str]) -> dict[str, str]:
    import fnmatch

    out = {}
    for name in sorted(os.environ):
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            out[name] = redact_env(name, os.environ[name])
    return out
