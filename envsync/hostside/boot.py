"""The bootstrap of the host-side programs: load the bundle, then run one program of it.

envsync runs `python -c GUARD ARGS... HEADER BOOT` on a host: one command, nothing
installed, the program's own arguments where they stand when it runs alone. stdin
carries the bundle (the host side, zlib-compressed JSON {relative path: source}), framed
by `frame`, then the program's own payload (an archive to unpack). GUARD, in syntax old
interpreters parse too, refuses a Python older than 3.8 in one line, drops the current
directory that -c puts first on sys.path, and runs BOOT: this file.

BOOT writes the bundle once to a folder keyed by its digest (the cache folder's
`host-DIGEST/`, written to a temporary folder and renamed, so that concurrent first runs
are safe), compiles it there once per interpreter, and reads the copy whole (its sources
and this interpreter's bytecode) before anything of it runs: the package is imported from
what was read, so that the compiled bytecode is reused on later runs, and a copy removed
while the program runs (`envsync cache clear`, a prune, another run that found it damaged)
takes nothing from it: what it imports later is in memory. Where it must not or cannot
write (no cache asked, a read-only home) it imports the package from the bundle's sources.

Nothing cached runs unchecked: the folders are made 0700 whatever the umask; a folder not
owned by this user, or writable by others, is never imported from (the package runs from
memory); every file of the copy is checked as it is read: its sources against the
digest that names it, nothing beside them (a `.so` or another file), and in `__pycache__`
only bytecode checked against those sources by their hash (PEP 552), not by their times.
A copy that differs (a module deleted, one planted, a bytecode file by time) is rewritten
from the bundle on stdin, with one note on stderr. (Bytecode forged with its source's hash
can only be written by this user, who can change what runs anyway.) HEADER is a JSON
object: the program to run (a module of the package), the bundle's digest, and the cache
folder (null: the default, "": none).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import BinaryIO

# The package's name on hosts: nothing there can clash with it.
PACKAGE = "envsync_host"
GUARD = (
    "import sys;sys.version_info<(3,8)and sys.exit("
    "'envsync: the host side needs Python 3.8 or newer, this is '+sys.version.split()[0]);"
    "sys.path[:1]==['']and sys.path.pop(0);"
    "exec(compile(sys.argv.pop(),'<envsync-boot>','exec'),{'__name__':'__main__'})"
)


def cache_base(option: str | None) -> str | None:
    """The folder of envsync's caches on this host: `option` when given ("": none), else
    $XDG_CACHE_HOME/envsync or ~/.cache/envsync."""
    if option is None:
        home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(home, "envsync")
    return option or None


def frame(blob: bytes, key: str | None = None) -> bytes:
    """The bundle as it travels first on stdin: its length (and the key this run seals
    the host's caches with, when envsync has one) on a line, then its bytes."""
    return (b"%d %s\n" % (len(blob), key.encode()) if key else b"%d\n" % len(blob)) + blob


def read_frame(stream: BinaryIO) -> tuple[bytes, bytes | None]:
    """The bundle framed at the head of `stream`, and the run's key for sealing caches
    (None: none given, nothing is kept); what follows is the program's payload."""
    words = stream.readline().split()
    size = int(words[0]) if words and words[0].isdigit() else -1
    key = words[1] if len(words) == 2 and len(words[1]) >= 32 else None
    blob = stream.read(size) if size >= 0 else b""
    if size < 0 or len(blob) != size:
        sys.exit("envsync: the host-side bundle did not arrive whole on stdin")
    return blob, key


def sources(blob: bytes, digest: str) -> dict[str, str]:
    """{relative path: source} of the bundle, checked against its digest."""
    import hashlib
    import json
    import zlib

    try:
        text = zlib.decompress(blob)
    except zlib.error:
        text = b""
    if hashlib.sha256(text).hexdigest()[: len(digest)] != digest:
        sys.exit("envsync: the host-side bundle arrived damaged (its digest differs)")
    files = json.loads(text.decode("utf-8"))
    return {str(k): str(v) for k, v in files.items()}


def ready(folder: str) -> bool:
    """Whether a cache folder holds the package (a folder is only ever renamed in whole)."""
    return os.path.isfile(os.path.join(folder, PACKAGE, "__init__.py"))


def note(message: str) -> None:
    sys.stderr.write("envsync: " + message + "\n")


def private(path: str) -> bool:
    """Whether a folder is this user's and no one else may write to it (a link is not)."""
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == os.geteuid()
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def make_base(base: str) -> bool:
    """The cache folder, made 0700 whatever the umask; False where it cannot be trusted
    (another user's, writable by others) or made (a read-only home)."""
    old = os.umask(0o077)
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
    except OSError:
        return False
    finally:
        os.umask(old)
    if not private(base):
        note(
            base + " is not this user's, or others may write to it: no cache is used "
            "(make it this user's and 0700, or remove it)"
        )
        return False
    return True


def owned(path: str) -> bytes:
    """A file of the copy: its bytes, opened without following a link or waiting on a
    FIFO; OSError unless it is a regular file of this user's that no one else may write (a
    hard link to another's file shows its owner)."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file: " + path)
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise OSError("not this user's alone: " + path)
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def held(folder: str, digest: str) -> tuple[dict[str, str], dict[str, bytes]] | None:
    """The copy in `folder`, read whole: its sources and this interpreter's bytecode of
    them ({relative path of the source: bytecode}), if it is the bundle that `digest`
    names and nothing else in it can run; None where it is not. The folder holds the
    package alone; every folder private; every file a regular file of this user's; outside
    `__pycache__` the sources alone (a `.so` beside a module, which Python would import in
    its place, or any other file, is refused), of that digest; in `__pycache__` this
    package's bytecode alone, of the sources beside it, and this interpreter's checked
    against its source's hash (PEP 552): a bytecode file by time, which Python would run
    in place of a source whose time and size it matches, or one of another source, is
    refused. What runs is what was read and checked here, never the folder again."""
    import hashlib
    import json

    root = os.path.join(folder, PACKAGE)
    if not (private(folder) and private(root)):
        return None
    files: dict[str, str] = {}
    compiled: list[tuple[str, str]] = []  # (bytecode file, the source's relative path)
    try:
        if os.listdir(folder) != [PACKAGE]:
            return None
        for dirpath, dirnames, names in os.walk(root):
            if not all(private(os.path.join(dirpath, d)) for d in dirnames):
                return None  # another's, writable by others, or a link
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            if os.path.basename(dirpath) == "__pycache__":
                if dirnames:
                    return None
                above = os.path.dirname(rel_dir)
                for name in names:
                    parts = name.split(".")
                    if (
                        len(parts) not in (3, 4)
                        or parts[-1] != "pyc"
                        or (len(parts) == 4 and parts[2] not in ("opt-1", "opt-2"))
                    ):
                        # a name the import system never loads (a concurrent first run's
                        # bytecode being written: py_compile's NAME.TAG.pyc.ID): no code
                        continue
                    source = (above + "/" if above else "") + parts[0] + ".py"
                    compiled.append((os.path.join(dirpath, name), source))
                continue
            for name in names:
                if not name.endswith(".py"):
                    return None
                rel = name if rel_dir == "." else rel_dir + "/" + name
                files[rel] = owned(os.path.join(dirpath, name)).decode("utf-8")
        text = json.dumps(files, sort_keys=True, separators=(",", ":")).encode()
        if hashlib.sha256(text).hexdigest()[: len(digest)] != digest:
            return None
        code: dict[str, bytes] = {}
        for path, source in compiled:
            if source not in files:
                return None
            data = bytecode_of(path, files[source].encode("utf-8"))
            if data is None:
                return None
            if data and os.path.basename(path) == bytecode_name(source):
                code[source] = data  # the one this interpreter would import
        return files, code
    except (OSError, ValueError):
        return None


def bytecode_name(source: str) -> str:
    """The name of this interpreter's bytecode file of `source` (at its optimization)."""
    opt = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    name = source.rsplit("/", 1)[-1][: -len(".py")]
    return f"{name}.{sys.implementation.cache_tag}{opt}.pyc"


def bytecode_of(path: str, source: bytes) -> bytes | None:
    """The bytecode in `path`, whole, if it may stand for `source`: another interpreter's
    is that interpreter's to check (this one never reads it: b""); this interpreter's must
    be checked against the source's hash, and be of this source (else None)."""
    from importlib.util import MAGIC_NUMBER, source_hash

    tag = sys.implementation.cache_tag
    if tag is None or os.path.basename(path).split(".")[1] != tag:
        return b""
    data = owned(path)
    flags = int.from_bytes(data[4:8], "little")
    if (
        len(data) > 16
        and data[:4] == MAGIC_NUMBER
        and flags == 0b11
        and data[8:16] == source_hash(source)
    ):
        return data
    return None


def discard(folder: str) -> None:
    """Move a copy that is not the bundle aside and remove it (another run may be using
    it: the rename is atomic, the removal of the moved folder is not needed to go on)."""
    import shutil

    aside = folder + "." + str(os.getpid()) + ".damaged"
    try:
        os.rename(folder, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def write(folder: str, files: dict[str, str]) -> bool:
    """Write the package to its cache folder once, 0700 whatever the umask; False where
    this home is read-only."""
    # Not shared.temp_name: this runs before the package exists. A folder, renamed whole.
    partial = f"{folder}.{os.getpid()}.part"
    old = os.umask(0o077)
    try:
        for rel, text in sorted(files.items()):
            path = os.path.join(partial, PACKAGE, rel)
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        os.rename(partial, folder)
    except OSError:
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
        return ready(folder)  # another first run renamed its folder first
    finally:
        os.umask(old)
    return True


def sweep(base: str) -> None:
    """Remove what runs that were killed left in the cache folder: partial copies and
    copies moved aside (`host-*.PID.part`, `.damaged`) of processes no longer alive, and
    temporary files (`*.envsync-PID.tmp`) older than an hour."""
    import shutil
    import time

    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        parts = name.rsplit(".", 2)
        path = os.path.join(base, name)
        if len(parts) == 3 and parts[2] in ("part", "damaged") and parts[1].isdigit():
            if parts[2] == "damaged" or not alive(int(parts[1])):
                shutil.rmtree(path, ignore_errors=True)
        elif name.endswith(".tmp") and ".envsync-" in name:
            try:
                if time.time() - os.lstat(path).st_mtime > 3600:
                    os.unlink(path)
            except OSError:
                pass


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def compiled(code: dict[str, bytes]) -> bool:
    """Whether this interpreter's bytecode of the package is in its copy (`code`: held's)."""
    return sys.implementation.cache_tag is None or "__init__.py" in code  # its __init__ last


def compile_all(folder: str) -> None:
    """Compile every module of the package for this interpreter, once: bytecode that is
    there is read even where Python writes none (PYTHONDONTWRITEBYTECODE, common in
    containers). The package's __init__ last: its bytecode says that all is there."""
    import py_compile

    root = os.path.join(folder, PACKAGE)
    paths = []
    for dirpath, _, names in os.walk(root):
        paths += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".py")]
    init = os.path.join(root, "__init__.py")
    for path in sorted(paths, key=lambda p: p == init):
        try:
            # Checked against the source's hash, which held() checks, not its time.
            py_compile.compile(
                path, doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
            )
        except (OSError, py_compile.PyCompileError):
            return  # a read-only copy: the sources alone still run


def from_memory(
    files: dict[str, str], code: dict[str, bytes] | None = None, folder: str | None = None
) -> None:
    """Import the package from what is in memory: its sources, and the bytecode of them
    read from its copy in `folder` (held's), so that nothing of it is read from the folder
    again (a copy removed while the program runs takes nothing from it)."""
    import marshal
    from importlib.abc import Loader, MetaPathFinder
    from importlib.machinery import ModuleSpec

    compiled = code or {}

    def origin(rel: str) -> str:
        return os.path.join(folder, PACKAGE, rel) if folder else "<envsync>/" + rel

    class Bundle(MetaPathFinder, Loader):
        """Finds and loads the package's modules in the bundle; after every other finder,
        so that it is never asked for anything else first."""

        def key(self, name: str) -> tuple[str, bool] | None:
            if name != PACKAGE and not name.startswith(PACKAGE + "."):
                return None
            rel = name[len(PACKAGE) + 1 :].replace(".", "/")
            init = rel + "/__init__.py" if rel else "__init__.py"
            if init in files:
                return init, True
            if rel + ".py" in files:
                return rel + ".py", False
            return None

        def find_spec(
            self, fullname: str, path: object = None, target: object = None
        ) -> ModuleSpec | None:
            found = self.key(fullname)
            if found is None:
                return None
            return ModuleSpec(fullname, self, origin=origin(found[0]), is_package=found[1])

        def exec_module(self, module: ModuleType) -> None:
            found = self.key(module.__name__)
            if found is None:
                raise ImportError(f"{module.__name__} is not in the bundle")
            data = compiled.get(found[0])
            if data is not None:  # checked against the source's hash (held)
                exec(marshal.loads(data[16:]), module.__dict__)
            else:
                exec(compile(files[found[0]], origin(found[0]), "exec"), module.__dict__)

        def get_source(self, fullname: str) -> str | None:
            found = self.key(fullname)
            return files[found[0]] if found else None

    sys.meta_path.append(Bundle())
    __import__(PACKAGE)


def main() -> int:
    import json

    head = json.loads(sys.argv.pop())  # the program sees its own arguments only
    digest = str(head["digest"])
    base = cache_base(head.get("cache"))
    blob, key = read_frame(sys.stdin.buffer)
    if base and not make_base(base):
        base = None  # neither its copy of the host side nor any cache: nothing read there
    folder = os.path.join(base, "host-" + digest) if base else None
    copy = held(folder, digest) if folder is not None and ready(folder) else None
    if folder is not None and copy is None and ready(folder):  # not one that just went
        note(folder + " is not the bundle its name says (damaged, or changed): rewritten")
        discard(folder)
    if copy is None:  # else the warm path: nothing decompressed
        if folder is not None:
            sweep(os.path.dirname(folder))
        files = sources(blob, digest)
        if folder is not None and write(folder, files):
            copy = held(folder, digest)
        if copy is None:
            folder = None
            from_memory(files)
    if folder is not None and copy is not None:
        if not compiled(copy[1]):
            old = os.umask(0o077)  # its __pycache__ folders: private too
            try:
                compile_all(folder)
            finally:
                os.umask(old)
            copy = held(folder, digest) or copy  # its bytecode, read and checked
        from_memory(copy[0], copy[1], folder)
    if key is not None:  # the run's key: the caches' files are sealed with it
        __import__(PACKAGE + ".shared")
        vars(sys.modules[PACKAGE + ".shared"])["KEY"] = key
    name = PACKAGE + "." + str(head["program"])
    __import__(name)
    return int(sys.modules[name].main(sys.argv[1:], digest, base if key else None))


if __name__ == "__main__":
    sys.exit(main())
