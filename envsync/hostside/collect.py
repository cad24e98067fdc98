"""The probe: the facts of an envsync snapshot, as one JSON document on stdout.

It installs nothing; its only writes are its caches (caches.py). Options come as one JSON
object in its first argument: {"host", "watch": [...], "env": [...], "deep": false,
"roots": [...], "internal": [...], "workdir", "isolated", "main", "loader_env": {...},
"model": {...}} (model.py), "known": {"graph": DIGEST, "graphs": [DIGEST, ...],
"distributions": DIGEST, ...},
"share": {"bytes": N}} (share.py: the packs given, and those envsync holds, follow the
bundle on stdin).

The document is one line; a startup graph's modules follow it on a line of their own, and
so do the distributions and the native facts, unless envsync said it holds them ("known":
their digests; "graphs": the graphs of the request's last states, one of which a host back
in a past state has): then the first line gives the digest alone (graphcache.py,
dumps_facts).
After them, a line each, the packs of facts envsync does not hold (share.py), which the
first line's "packs" lists. Where envsync named another facts store than this host's (it
was made anew), the answer is one line, {"share_again": ID}: envsync asks again.
"""

from __future__ import annotations

import json
import sys
import time

from .caches.folder import cache_path, load_cache, save_cache
from .caches.graphcache import RawJSON, cached_startup_graph
from .caches.share import Share, read_payload, stale
from .caches.store import bound, open_store
from .facts.dists import scan_distributions
from .facts.editable import editable_mapping
from .facts.interpreter import interpreter_facts
from .facts.machine import env_facts, gpu_facts, installer_facts, system_facts, torch_facts
from .facts.state import service_state
from .graph.finder import ModuleFinder
from .graph.model import served_model
from .native.nccl import nccl_facts
from .native.scan import native_facts
from .shared import normalize, text_digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .protocol import ProbeFacts


def collect(
    options: dict[str, Any], base: str | None, digest: str, given: dict[str, Any] | None = None
) -> ProbeFacts:
    """Every fact of a snapshot; `base` is the cache folder (None: no cache); `given`:
    the packs of facts envsync gave (share.py)."""
    started = time.time()
    paths = [p for p in sys.path if p]
    hashes_path = cache_path(base, "hashes", digest)
    hashes = load_cache(hashes_path) if hashes_path else None
    before = dict(hashes) if hashes is not None else None
    finder = ModuleFinder(paths, editable_mapping(paths))
    distributions, broken = scan_distributions(paths, options.get("watch") or [], hashes, finder)
    nccl = nccl_facts(paths, hashes)
    share = Share(options, given or {}, distributions, hashes)
    facts: ProbeFacts = {
        "schema_version": 1,
        "host": options.get("host") or "local",
        "source": "probe",
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "interpreter": interpreter_facts(),
        "distributions": distributions,
        "broken": broken,
        "watch": sorted({normalize(w) for w in options.get("watch") or []}),
        "torch": torch_facts(paths, bool(options.get("deep"))),
        "nccl": nccl,
        "gpu": gpu_facts(),
        "system": system_facts(),
        "env": env_facts(options.get("env") or []),
        "startup": cached_startup_graph(options, finder, base, digest, hashes, share),
        "installers": installer_facts(finder),
        "model": served_model(options.get("model"), finder),
    }
    torch = facts["torch"] if isinstance(facts["torch"], dict) else None
    facts["native"] = native_facts(
        options, finder, facts["startup"], torch, distributions, base, digest
    )
    if hashes_path and hashes is not None and hashes != before:
        save_cache(hashes_path, hashes)
    facts["service_flags"], facts["crash"] = service_state()
    if share.enabled:
        facts["packs"] = share
    open_store(cache_path(base, "imports", digest)).keep_packs()  # other hosts' facts used
    bound(base)  # the cache folder under its cap, when this run wrote into it
    facts["duration_s"] = round(time.time() - started, 4)
    return facts


# The large parts of a snapshot besides the graph's modules: sent when they changed.
PARTS = ("distributions", "native")


def dumps_facts(facts: ProbeFacts, known: dict[str, str] | None = None) -> bytes:
    """The facts as the probe sends them: one JSON line, then the startup graph's modules
    (as the cache holds them) on a line of their own, then each of PARTS whose text has
    changed, a line each. What envsync names in `known` by its digest ("graph", and each
    part's name) is not sent: the first line gives the digest alone. A part sent, or
    not, is listed in the first line's "parts" ({name: [digest, sent]}), in line order."""
    known = known or {}
    rest = dict(facts)
    lines: list[bytes] = []
    parts: dict[str, list[Any]] = {}
    share = rest.pop("packs", None)
    if isinstance(share, Share):
        told = share.header()
        if told is not None:  # the packs' texts go last, after every part
            rest["packs"] = told
    for name in PARTS:
        value = rest.pop(name, None)
        if value is None:
            rest[name] = None
            continue
        text = json.dumps(value, separators=(",", ":")).encode("utf-8")
        digest = text_digest(text)
        sent = known.get(name) != digest
        parts[name] = [digest, sent]
        if sent:
            lines.append(text + b"\n")
    rest["parts"] = parts
    if "packs" in rest and isinstance(share, Share):
        lines.extend(share.lines())
    raw = rest.pop("startup", None)
    if not isinstance(raw, RawJSON):
        rest["startup"] = raw
        return b"".join([json.dumps(rest).encode("utf-8") + b"\n", *lines])
    held = known.get("graphs")  # the graphs of this request's last states envsync holds
    sent = raw.digest != known.get("graph") and not (isinstance(held, list) and raw.digest in held)
    head = raw.header[:-1] if raw.header.endswith("}") else "{"
    comma = ", " if head != "{" else ""
    # "modules": null in the header: they are on the next line, or already envsync's
    startup = f'{head}{comma}"modules": null, "modules_digest": "{raw.digest}", "modules_sent": '
    line = json.dumps(rest)[:-1] + ', "startup": ' + startup + ("true" if sent else "false") + "}}"
    first = line.encode("utf-8") + b"\n" + (raw.modules + b"\n" if sent else b"")
    return b"".join([first, *lines])


def main(args: list[str], digest: str, cache: str | None) -> int:
    options = json.loads(args[0]) if args else {}
    known = options.get("known")
    given = read_payload(options)
    again = stale(options, given, cache_path(cache, "imports", digest))
    if again is not None:  # envsync's word on what this store holds is stale: asked again
        sys.stdout.write(json.dumps({"share_again": again}) + "\n")
        return 0
    facts = collect(options, cache, digest, given)
    out = dumps_facts(facts, known if isinstance(known, dict) else None)
    sys.stdout.flush()
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0
