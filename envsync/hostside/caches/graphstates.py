"""A past state of the environment taken back by its files' content, without a walk.

A graph's cache file names every source the walk read and every folder it searched. When
the environment changes and changes back (a file edited and put back, a repair rolled
back, a package upgraded and the old version reinstalled), the files are the same again
but their stats are not: new inodes, new times. Their graph is the one a past state of
the cache file holds (graphfile.py keeps the last few): each row of that state holds
again, a source by its content (its sha256 as the state recorded it, hashed where its stat
changed), an extension module by its being there (the walk never reads one), a folder by
its listing, an absent path by its absence. Then that state is the
graph, nothing is parsed or walked, and it becomes the cache file again, its rows' new
stats kept, so that the next run only stats them. Where a row changed in the last seconds
the state is taken but not kept (git's racy rule).
"""

from __future__ import annotations

import json
import os
import stat
import time

from ..graph.startup import file_content
from ..shared import racy
from .chunks import load_chunks
from .folder import save_text
from .graphfile import file_stamp, holds, keep_past, past_states
from .store import read_file, remove, touch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

    HashCache = Optional[Dict[str, List[Any]]]

TAKEN: list[str] = []  # the past state taken on this run, if any (what tests look at)


def taken_back(path: str, chunks: str, hashes: HashCache) -> tuple[str, bytes, bool] | None:
    """The header and modules' text of the graph file `path` itself, or of its newest past
    state, where it holds again by content (None: none does), and whether it is the graph
    file again (it is not where a row changed in the last seconds). The graph file itself
    comes first: a package reinstalled as it was (new stats, the same files), or put back
    after a change whose graph was not kept (it was taken in the racy seconds)."""
    del TAKEN[:]
    for past in [path, *past_states(path)]:
        found = _holds_again(past, chunks, hashes)
        if found is not None:
            lines, modules, keep = found
            if keep:
                if past != path:
                    keep_past(path, lines[2])
                save_text(path, "\n".join(lines) + "\n")
                if past != path:
                    remove(past)
            else:
                touch(past)
            TAKEN.append(past)
            return lines[1], modules, keep
    return None


def _holds_again(past: str, chunks: str, hashes: HashCache) -> tuple[list[str], bytes, bool] | None:
    """A past state's five lines (its stamps taken anew), its modules' text, and whether
    it may be kept (no row changed in the last seconds); None where a row does not hold,
    the state is damaged, or its chunks are gone."""
    try:
        lines = read_file(past)[0].decode("utf-8").split("\n")
        stamps, shas = json.loads(lines[0]), json.loads(lines[4])
        index = json.loads(lines[2])
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        remove(past)
        return None
    if not (isinstance(stamps, list) and isinstance(shas, dict) and isinstance(index, list)):
        remove(past)
        return None
    now = time.time_ns()
    keep = True
    try:
        for row in stamps:
            if holds(row, now):
                continue
            sha = shas.get(row[0])
            if len(row) != 2 or row[1] is None or not isinstance(sha, str):
                return None  # a folder whose listing changed, a path that came or went
            st = os.lstat(row[0])
            if not stat.S_ISREG(st.st_mode):
                return None
            if sha and file_content(row[0], hashes)[0] != sha:
                return None  # a source of other content ("": an extension module, there)
            row[1] = file_stamp(row[0])
            if row[1] is None or racy(st.st_mtime_ns, now) or racy(row[1][1], now):
                keep = False
    except (OSError, TypeError, IndexError):
        return None
    modules = load_chunks(chunks, [str(d) for d in index])
    if not modules:
        return None
    lines[0] = json.dumps(stamps, separators=(",", ":"))
    return lines[:5], modules, keep
