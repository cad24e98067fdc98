"""Reachability by demand (graph/demand.py): how surely startup runs each module asked
about, answered from the module up, parsing only the files that name it.

Its one argument is a JSON object: {"roots": [[MODULE, CONTEXT], ...] (envsync's roots
under the launch flags, in order), "launch": [...] (the roots as the probe's options give
them: "console:NAME", "script:PATH", modules), "main", "workdir", "isolated", "internal",
"governed": [...], "modules": [...], "wide": N, "budget": N, "grep": false (Python reads
every file instead)}. The answer, on stdout's last line after
the marker: {"answers": {MODULE: {"context", "path"} | {"wide": REASON}}, "parsed",
"cached", "searched", "read"}.
"""

from __future__ import annotations

import json
import sys
import time

from .caches.folder import cache_path, load_cache, save_cache
from .caches.store import bound
from .facts.editable import editable_mapping
from .graph.demand import BUDGET, WIDE, Demand, Reader, Wide
from .graph.finder import ModuleFinder
from .graph.roots import site_roots
from .graph.search import Search
from .graph.startup import builder
from .protocol import REACH_MARKER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def answer(options: dict[str, Any], base: str | None, digest: str) -> dict[str, Any]:
    started = time.time()
    paths = [p for p in sys.path if p]
    hashes_path = cache_path(base, "hashes", digest)
    hashes = load_cache(hashes_path) if hashes_path else None
    before = dict(hashes) if hashes is not None else None
    finder = ModuleFinder(paths, editable_mapping(paths))
    launch = dict(options, roots=list(options.get("launch") or []))
    reader, _, _ = builder(Reader, launch, finder, base, digest, hashes)
    assert isinstance(reader, Reader)
    site, pseudo = site_roots(reader.finder)
    folders = [p for p in reader.finder.paths if not reader.finder.in_stdlib(p)]
    folders += [p for p in finder.editable.values()]
    search = Search(folders, use_grep=options.get("grep", True) is not False)
    roots = [(str(m), str(c)) for m, c in options.get("roots") or []]
    roots = [(m, "module") for m in site] + roots
    demand = Demand(
        reader,
        reader.finder,
        roots,
        pseudo,
        set(options.get("governed") or []),
        search,
        int(options.get("wide") or WIDE),
        int(options.get("budget") or BUDGET),
    )
    answers: dict[str, Any] = {}
    for module in options.get("modules") or []:
        try:
            answers[module] = demand.reach(str(module))
        except Wide as e:
            answers[module] = {"wide": str(e)}
    reader.mentions.close()
    if hashes_path and hashes is not None and hashes != before:
        save_cache(hashes_path, hashes)
    bound(base)  # the cache folder under its cap, as the probe leaves it
    return {
        "answers": answers,
        "parsed": reader.parsed,
        "cached": reader.cached,
        "searched": len(demand.hits),
        "read": search.read,
        "searches": search.runs,
        "search_s": round(search.seconds, 3),
        "duration_s": round(time.time() - started, 3),
    }


def main(args: list[str], digest: str, cache: str | None) -> int:
    options = json.loads(args[0]) if args else {}
    out = answer(options, cache, digest)
    sys.stdout.write("\n" + REACH_MARKER + json.dumps(out, sort_keys=True) + "\n")
    return 0
