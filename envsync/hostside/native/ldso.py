"""The facts of a host's dynamic loader: its system folders, hwcaps subfolders, $LIB, $PLATFORM.

From the loader's own word where it gives it (`ld.so --help`, glibc 2.33+, run with
`ldso_help`), else from the strings compiled into it (its system folders) and the machine.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from collections.abc import Sequence

DEFAULT_CACHE = "/etc/ld.so.cache"
HELP_TIMEOUT = 10
# A run of NUL-terminated absolute folders ending in "/", as glibc's SYSTEM_DIRS string is
# compiled into ld.so ("/lib/x86_64-linux-gnu/\0/usr/lib/x86_64-linux-gnu/\0/lib/\0...").
_SYSTEM_DIRS = re.compile(rb"(?:/[A-Za-z0-9_./+-]*lib[A-Za-z0-9_./+-]*/\x00){2,}")
_VERSION = re.compile(r"version (\d+)\.(\d+)")


@dataclass(frozen=True)
class LoaderFacts:
    """How one ld.so searches: what `search` needs besides the objects themselves."""

    interpreter: str  # the loader's path (the program's PT_INTERP)
    system_dirs: tuple[str, ...]  # the default folders, in order, without a trailing "/"
    lib: str  # what $LIB expands to, e.g. "lib/x86_64-linux-gnu" or "lib64"
    platform: str  # what $PLATFORM expands to (AT_PLATFORM), e.g. "x86_64"
    hwcaps: tuple[str, ...] = ()  # glibc-hwcaps subfolders this CPU supports, best first
    legacy: tuple[str, ...] = ()  # legacy hwcaps subfolders (glibc < 2.37), best first
    cache: str = DEFAULT_CACHE
    glibc: tuple[int, int] | None = None
    source: str = "ld.so --help"  # or "ld.so's strings": then the subfolders are a guess

    @property
    def modelled(self) -> str | None:
        """Why this loader is not the one modelled here (None: it is glibc's)."""
        if os.path.basename(self.interpreter).startswith("ld-musl"):
            return f"{self.interpreter} is musl's loader, whose search is not modelled"
        return None

    def subdirs(self) -> tuple[str, ...]:
        """What ld.so tries inside every search folder, in order ("" is the folder itself)."""
        return (
            tuple(f"glibc-hwcaps/{name}/" for name in self.hwcaps)
            + tuple(f"{name}/" for name in self.legacy)
            + ("",)
        )


def ldso_help(interpreter: str) -> tuple[str | None, str | None]:
    """The output of `INTERPRETER --help` and `--version` (None: it could not be run)."""
    return _run(interpreter, "--help"), _run(interpreter, "--version")


def _run(interpreter: str, flag: str) -> str | None:
    try:
        proc = subprocess.run(
            [interpreter, flag],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=HELP_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


def loader_facts(
    interpreter: str, help_text: str | None, version_text: str | None, machine: str
) -> LoaderFacts:
    """The facts of the loader at `interpreter`, from its --help when it says them."""
    binary = _read_quietly(interpreter)
    glibc = _glibc_version(version_text)
    if help_text and "Shared library search path:" in help_text:
        dirs, cache, hwcaps, legacy, platform = _parse_help(help_text)
        return LoaderFacts(
            interpreter=interpreter,
            system_dirs=dirs,
            lib=_lib_token(dirs, binary),
            platform=platform or machine,
            hwcaps=hwcaps,
            legacy=legacy,
            cache=cache or DEFAULT_CACHE,
            glibc=glibc,
        )
    dirs = _strings_dirs(binary)
    return LoaderFacts(
        interpreter=interpreter,
        system_dirs=dirs,
        lib=_lib_token(dirs, binary),
        platform=at_platform() or machine,
        legacy=_legacy_subdirs(["tls", machine]) if glibc is None or glibc < (2, 37) else (),
        glibc=glibc,
        source="ld.so's strings",
    )


def at_platform() -> str | None:
    """The kernel's AT_PLATFORM for this process ("haswell", "x86_64"): what ld.so expands
    $PLATFORM to (None: not to be read here)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        getauxval = libc.getauxval
        getauxval.restype = ctypes.c_ulong
        getauxval.argtypes = [ctypes.c_ulong]
        address = getauxval(15)  # AT_PLATFORM
        if not address:
            return None
        value = ctypes.string_at(address)
    except (OSError, AttributeError, ValueError):
        return None
    kernel = value.decode("ascii", "replace") or None
    return _glibc_platform(kernel)


# glibc's own platform on x86-64 (sysdeps/x86/cpu-features.c, init_cpu_features): on an
# Intel CPU, "xeon_phi" with AVX512F, CD, ER and PF, else "haswell" with AVX2, BMI1, BMI2,
# LZCNT, MOVBE and POPCNT: it replaces the kernel's AT_PLATFORM in $PLATFORM and the legacy
# subfolders (ld.so --help says "haswell (AT_PLATFORM; ...)").
XEON_PHI = {"avx512f", "avx512cd", "avx512er", "avx512pf"}
HASWELL = {"avx2", "bmi1", "bmi2", "abm", "movbe", "popcnt"}  # abm: LZCNT in /proc/cpuinfo


def _glibc_platform(kernel: str | None) -> str | None:
    if kernel != "x86_64":
        return kernel
    try:
        with open("/proc/cpuinfo", "rb") as f:
            text = f.read(1 << 16).decode("ascii", "replace")
    except OSError:
        return kernel
    vendor = flags = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = value
    found = set(flags.split())
    if vendor != "GenuineIntel":
        return kernel
    if found >= XEON_PHI:
        return "xeon_phi"
    if found >= HASWELL:
        return "haswell"
    return kernel


def _read_quietly(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(8 << 20)
    except OSError:
        return b""


def _glibc_version(text: str | None) -> tuple[int, int] | None:
    match = _VERSION.search(text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _parse_help(
    text: str,
) -> tuple[tuple[str, ...], str | None, tuple[str, ...], tuple[str, ...], str | None]:
    """(system folders, cache path, glibc-hwcaps, legacy subfolders, AT_PLATFORM)."""
    dirs: list[str] = []
    hwcaps: list[str] = []
    legacy: list[tuple[str, bool]] = []
    cache = platform = None
    part = ""
    for line in text.splitlines():
        if line and not line.startswith(" "):
            part = line
            continue
        item = line.strip()
        if part.startswith("Shared library search path"):
            if item.startswith("(libraries located via "):
                cache = item[len("(libraries located via ") : -1]
            elif item.endswith("(system search path)"):
                dirs.append(item[: -len("(system search path)")].strip().rstrip("/"))
        elif part.startswith("Subdirectories of glibc-hwcaps") and "searched" in item:
            hwcaps.append(item.split()[0])
        elif part.startswith("Legacy HWCAP") and item:
            name = item.split()[0]
            if "AT_PLATFORM" in item:
                platform = name
            legacy.append((name, "searched" in item))
    return tuple(dirs), cache, tuple(hwcaps), _legacy_from_help(legacy, platform), platform


def _legacy_from_help(listed: Sequence[tuple[str, bool]], platform: str | None) -> tuple[str, ...]:
    """The legacy subfolders glibc 2.36 tries: every combination of "tls", the platform and
    the searched hwcap names, in that order, longest first (as LD_DEBUG=libs shows)."""
    names = [name for name, searched in listed if searched]
    if not names:
        return ()
    parts = ["tls"] if "tls" in names else []
    if platform is not None and platform in names:
        parts.append(platform)
    rest = [n for n in names if n != "tls"]
    if platform is not None and platform in rest:
        rest.remove(platform)
    # in the order --help lists them (tls/haswell/avx512_1/x86_64 where it lists avx512_1
    # before x86_64, as LD_DEBUG=libs shows on such a CPU)
    return _legacy_subdirs(parts + rest)


def _legacy_subdirs(parts: Sequence[str]) -> tuple[str, ...]:
    """Every non-empty combination of `parts` (kept in order), the fullest first: the
    binary count down over them, the first part the highest bit."""
    out = []
    count = len(parts)
    for mask in range((1 << count) - 1, 0, -1):
        chosen = [parts[i] for i in range(count) if mask & (1 << (count - 1 - i))]
        out.append("/".join(chosen))
    return tuple(out)


def _strings_dirs(binary: bytes) -> tuple[str, ...]:
    """The system folders compiled into ld.so, else the usual ones of its class."""
    match = _SYSTEM_DIRS.search(binary)
    if match:
        parts = match.group(0).split(b"\0")
        return tuple(p.decode("utf-8", "replace").rstrip("/") for p in parts if p)
    multiarch = [d for d in ("/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu") if os.path.isdir(d)]
    if multiarch:
        return (multiarch[0], "/usr" + multiarch[0], "/lib", "/usr/lib")
    return ("/lib64", "/usr/lib64")


def _lib_token(dirs: Sequence[str], binary: bytes) -> str:
    """What $LIB expands to: the first system folder, as ld.so spells it among its strings
    ("lib/x86_64-linux-gnu" on Debian, "lib64" on Fedora, "lib" on Arch)."""
    if not dirs:
        return "lib"
    first = dirs[0].strip("/")
    for candidate in (first, first.rsplit("/", 1)[-1]):
        if b"\0" + candidate.encode() + b"\0" in binary:
            return candidate
    return first.rsplit("/", 1)[-1]
