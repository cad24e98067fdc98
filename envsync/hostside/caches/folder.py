"""The probe's caches on the host: file hashes, import facts, startup graphs, native verdicts.

Its only writes, so that a second run skips ast and hashing. They live in the cache
folder (boot.cache_base) and are keyed by what makes them valid: file hashes by stat (one
file per environment), parsed facts by content hash and the code that parses them (so an
envsync upgrade that leaves the parser alone keeps them), graphs by everything that shapes
them. Best effort: a read-only home just means no cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

from ..shared import env_key
from .store import read_file, write_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# The host side's modules that the facts store's entries are made by (the parser and what
# it imports, the text search of mentions.py, the packs' marks of share.py, the entries'
# own format): the store is keyed by their code alone (tests/hostside/test_caches.py
# checks that the list holds everything they import).
FACTS_CODE = (
    "caches/mentions",
    "caches/share",
    "caches/store",
    "facts/files",
    "graph/analyse",
    "graph/answers",
    "graph/astutil",
    "graph/calls",
    "graph/compilable",
    "graph/lazy",
    "graph/parallel",
    "graph/versionchecks",
    "shared",
)
# The modules that parsed ELF files are made by (native/elf.py and what it reads with, the
# entries' codec and format): the ELF store is keyed by their code alone.
ELF_CODE = (
    "caches/store",
    "facts/files",
    "native/binary",
    "native/codec",
    "native/dynsym",
    "native/elf",
    "shared",
)
_FACTS_DIGEST: dict[tuple[str, tuple[str, ...]], str] = {}


def facts_digest(digest: str, code: tuple[str, ...] = FACTS_CODE) -> str:
    """The digest of `code`'s sources, as they run (`digest`, the whole host side's, where
    they cannot be read)."""
    found = _FACTS_DIGEST.get((digest, code))
    if found is None:
        found = _code_digest(code) or digest
        _FACTS_DIGEST[(digest, code)] = found
    return found


def _code_digest(modules: tuple[str, ...]) -> str | None:
    code = hashlib.sha256(b"facts v1\0")
    for name in modules:
        text = _source(name)
        if text is None:
            return None
        code.update(name.encode() + b"\0" + text + b"\0")
    return code.hexdigest()[:16]


def _source(name: str) -> bytes | None:
    """The source of the host side's module `name` ("graph/analyse") as it runs: from the
    loader that serves the package from memory (boot.py: the copy on the host's disk may be
    removed while a probe runs), else from its file beside this one's."""
    spec = globals().get("__spec__")
    if spec is not None and not spec.has_location and spec.loader is not None:
        package = __name__.rsplit(".", 2)[0]
        try:
            text = spec.loader.get_source(package + "." + name.replace("/", "."))
        except ImportError:
            return None
        return text.encode("utf-8") if isinstance(text, str) else None
    source = globals().get("__file__")
    if not source:
        return None
    here = os.path.dirname(os.path.dirname(os.path.abspath(source)))  # the host side's root
    try:
        with open(os.path.join(here, *name.split("/")) + ".py", "rb") as f:
            return f.read()
    except OSError:
        return None


def cache_path(base: str | None, kind: str, digest: str) -> str | None:
    """Where the cache of `kind` lives in the folder `base` (None: caching is off).

    What the probe keeps is only as good as the code that made it: keyed by the host
    side's digest (parsed facts by their own code's: facts_digest), so that another
    envsync version on the host never reads it.
    """
    if not base:
        return None
    if kind == "hashes":
        # One file per environment: a probe loads the hashes of its own files only.
        return os.path.join(base, f"hashes-v1-{env_key(sys.prefix)}.json")
    if kind == "native":  # the native layer's verdicts, per environment and host side
        return os.path.join(base, f"native-{digest}-{env_key(sys.prefix)}.json")
    if kind == "chunks":  # the graphs' modules text, in chunks by digest (chunks.py)
        return os.path.join(base, f"chunks-{digest}")
    if kind == "graph":  # one file per graph key (%s), written whole, read line by line
        return os.path.join(base, f"graph-{digest}-%s.json")
    if kind == "elves":  # parsed ELF files by their stamp (native/cache.py's ElfStore)
        return os.path.join(base, f"elves-{facts_digest(digest, ELF_CODE)}")
    # parsed facts: a folder of entries by content (store.py)
    py = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return os.path.join(base, f"facts-{facts_digest(digest)}-{py}")


def load_cache(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        data = json.loads(read_file(path)[0].decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_cache(path: str, data: dict[str, Any]) -> None:
    save_text(path, json.dumps(data, separators=(",", ":")))


def save_text(path: str, text: str) -> None:
    """Write a cache file whole (through a temporary file), or not at all."""
    write_file(path, text.encode("utf-8"))
