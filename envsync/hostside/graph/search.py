"""Which source files of the environment hold some words: the text search reachability by
demand (demand.py) starts from, before any file is parsed.

A file that imports a module names it in its text, so the files holding a word are a
superset of its importers. GNU grep lists the files where the host has it (-R: linked
folders too, as the import system follows them; -F: the words as they are); otherwise
Python reads every file. Either way only the files listed are read again, to tell which
of the words each holds. A file that cannot be read is kept by name (`unreadable`): the
caller never takes it for "no importer".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from ..facts.files import MODULE_BOUND, read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Iterable, List, Sequence

    Hits = Dict[str, List[str]]  # word -> the files that hold it, sorted


def holds(data: bytes, word: str, whole: bool) -> bool:
    """Whether `data` holds `word` (`whole`: with no letter, digit or underscore either
    side, as `grep -w` reads a word)."""
    needle = word.encode()
    if not whole:
        return needle in data
    start = data.find(needle)
    while start >= 0:
        end = start + len(needle)
        if (start == 0 or not _word(data[start - 1])) and (
            end == len(data) or not _word(data[end])
        ):
            return True
        start = data.find(needle, start + 1)
    return False


def _word(byte: int) -> bool:
    return byte == 95 or 48 <= byte <= 57 or 65 <= byte <= 90 or 97 <= byte <= 122


class Search:
    """The `.py` files under `folders` (the environment's import folders, the standard
    library's left out), searched for words."""

    def __init__(self, folders: Iterable[str], use_grep: bool = True) -> None:
        self.folders = sorted({os.path.abspath(f) for f in folders if os.path.isdir(f)})
        self.grep = shutil.which("grep") if use_grep else None
        self.read = 0  # files read to tell which words each holds
        self.runs = 0  # searches of the folders
        self.seconds = 0.0  # spent searching
        self.unreadable: set[str] = set()

    def __call__(self, words: Iterable[str], folders: Sequence[str]) -> Hits:
        """The files under `folders` (a `.py` file: itself) that hold each word, as a word
        of its own (as names are written)."""
        wanted = sorted({w for w in words if w})
        hits: Hits = {w: [] for w in wanted}
        where = sorted({os.path.abspath(f) for f in folders})
        where = [f for f in where if os.path.isdir(f) or (f.endswith(".py") and os.path.isfile(f))]
        if not wanted or not where:
            return hits
        self.runs += 1
        started = time.time()
        listed = self._grep(wanted, where) if self.grep else None
        files = sorted(listed) if listed is not None else self._walk(where)
        for path in files:
            try:
                data = read_bytes(path, MODULE_BOUND)
            except OSError:
                self.unreadable.add(path)
                continue
            self.read += 1
            for word in wanted:
                if holds(data, word, True):
                    hits[word].append(path)
        self.seconds += time.time() - started
        return hits

    def _grep(self, words: list[str], folders: list[str]) -> set[str] | None:
        """The files holding any of `words`, as grep lists them (None: grep could not
        read them all; Python reads them then, and knows which it could not). In the C
        locale: a word's letters are holds()'s, and grep reads bytes as bytes."""
        argv = [str(self.grep), "-RlFw", "--include=*.py", "--null"]
        for word in words:
            argv += ["-e", word]
        try:
            done = subprocess.run(
                [*argv, "--", *folders],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=dict(os.environ, LC_ALL="C"),
                check=False,
            )
        except OSError:
            return None
        if done.returncode not in (0, 1):
            return None
        return {p.decode("utf-8", "surrogateescape") for p in done.stdout.split(b"\0") if p}

    def _walk(self, folders: list[str]) -> list[str]:
        out = []
        for folder in folders:
            if not os.path.isdir(folder):  # a file of its own
                out.append(folder)
                continue
            seen: set[tuple[int, int]] = set()  # each folder's own walk: a link back up
            for dirpath, dirnames, filenames in os.walk(
                folder, followlinks=True, onerror=lambda e: self.unreadable.add(str(e.filename))
            ):
                try:
                    st = os.stat(dirpath)
                except OSError:
                    self.unreadable.add(dirpath)
                    continue
                if (st.st_dev, st.st_ino) in seen:  # read once
                    dirnames[:] = []
                    continue
                seen.add((st.st_dev, st.st_ino))
                dirnames.sort()
                out += [os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".py")]
        return out
